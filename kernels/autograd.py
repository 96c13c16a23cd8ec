"""The fused kernel as a backend of ``continuous_attention`` (contract: attention/backends.py)."""

from __future__ import annotations

import torch

from ts_continuum.attention.reference import SegmentLayout

from .continuous_bwd import backward
from .continuous_fwd import forward

HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def unsupported_reason(q: torch.Tensor, head_dim: int, value_dim: int) -> str:
    """'' if the kernel handles these inputs, else why not (the op then names backend='torch')."""
    if q.dtype not in DTYPES:
        return f"dtype {q.dtype} (the kernel takes float32, float16 and bfloat16)"
    if head_dim not in HEAD_DIMS:
        return f"head dim {head_dim} (the kernel takes {', '.join(map(str, HEAD_DIMS))})"
    if value_dim != head_dim:
        return f"value dim {value_dim} != head dim {head_dim} (the kernel needs them equal)"
    if q.dtype == torch.bfloat16 and q.device.type != "cuda":
        return "bfloat16 outside a GPU (the Triton interpreter cannot multiply bfloat16)"
    return ""


class ContinuousAttentionTriton(torch.autograd.Function):
    """Forward and backward kernels; saves q, k, v, the output and the LSE, nothing of size T x T."""

    @staticmethod
    def forward(ctx, q, k_ext, v_ext, log_delta, last, first, scale):
        q, k_ext, v_ext = q.contiguous(), k_ext.contiguous(), v_ext.contiguous()
        log_delta = log_delta.to(torch.float32).contiguous()
        last = last.to(torch.int32).contiguous()
        out, lse = forward(q, k_ext, v_ext, log_delta, last, first, scale)
        ctx.save_for_backward(q, k_ext, v_ext, log_delta, last, out, lse)
        ctx.first, ctx.scale = first, scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k_ext, v_ext, log_delta, last, out, lse = ctx.saved_tensors
        grad_out = grad_out.to(q.dtype).contiguous()
        dq, dk, dv = backward(q, k_ext, v_ext, out, grad_out, lse, log_delta, last, ctx.first, ctx.scale)
        return dq, dk, dv, None, None, None, None


def triton_backend(
    q: torch.Tensor, k_ext: torch.Tensor, v_ext: torch.Tensor, log_delta: torch.Tensor,
    layout: SegmentLayout, scale: float,
) -> torch.Tensor:
    """Continuous attention on the extended sequence, (B, H, T, D) in q's dtype."""
    return ContinuousAttentionTriton.apply(q, k_ext, v_ext, log_delta, layout.last, layout.first, scale)
