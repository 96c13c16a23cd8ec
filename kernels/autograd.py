"""The fused kernel as a backend of ``continuous_attention`` (contract: attention/backends.py)."""

from __future__ import annotations

import contextlib
import math
from typing import Protocol

import torch


from .continuous_bwd import backward
from .continuous_fwd import forward

HEAD_DIMS = (16, 32, 64, 128)  # compiled widths; other dims up to 128 are zero-padded to the next one
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def unsupported_reason(q: torch.Tensor, head_dim: int, value_dim: int) -> str:
    """'' if the kernel handles these inputs, else why not (the op then names backend='torch')."""
    if q.dtype not in DTYPES:
        return f"dtype {q.dtype} (the kernel takes float32, float16 and bfloat16)"
    if max(head_dim, value_dim) > HEAD_DIMS[-1]:
        return f"head dim {head_dim} / value dim {value_dim} (the kernel takes at most {HEAD_DIMS[-1]})"
    if q.dtype == torch.bfloat16 and q.device.type != "cuda":
        return "bfloat16 outside a GPU (the Triton interpreter cannot multiply bfloat16)"
    if q.device.type == "cuda" and torch.version.hip:
        return "a ROCm GPU (the kernel's fast reciprocal is NVIDIA PTX)"
    return ""


def on_device(t: torch.Tensor):
    """Triton launches on the current CUDA device: make it ``t``'s (a model on cuda:1 in a process
    whose current device is 0 would otherwise get kernels on the wrong GPU)."""
    return torch.cuda.device(t.device) if t.device.type == "cuda" else contextlib.nullcontext()


class ContinuousAttentionTriton(torch.autograd.Function):
    """Forward and backward kernels; saves q, k, v, the output and the LSE, nothing of size T x T."""

    @staticmethod
    def forward(ctx, q, k_ext, v_ext, log_delta, last, first, scale):
        q, k_ext, v_ext = q.contiguous(), k_ext.contiguous(), v_ext.contiguous()
        # The kernels work in base 2 (moments.segment_shape): log2 Δ = log Δ · log2 e.
        log2_delta = (log_delta.to(torch.float32) * math.log2(math.e)).contiguous()
        last = last.to(torch.int32).contiguous()
        with on_device(q):
            out, lse = forward(q, k_ext, v_ext, log2_delta, last, first, scale)
        ctx.save_for_backward(q, k_ext, v_ext, log2_delta, last, out, lse)
        ctx.first, ctx.scale = first, scale
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k_ext, v_ext, log2_delta, last, out, lse = ctx.saved_tensors
        grad_out = grad_out.to(q.dtype).contiguous()
        with on_device(q):
            dq, dk, dv = backward(q, k_ext, v_ext, out, grad_out, lse, log2_delta, last, ctx.first, ctx.scale)
        return dq, dk, dv, None, None, None, None


class Layout(Protocol):
    """Which segments each query row integrates over (the op's ``SegmentLayout``; the kernels read
    only these two fields and import nothing from the op's package): segments ``first <= j <=
    last[b, t]``, ``last`` 0 for padded query rows."""

    last: torch.Tensor  # (B|1, Tq) integer
    first: int


def padded_width(head_dim: int, value_dim: int) -> int:
    """The compiled width that holds both dims: the smallest of HEAD_DIMS >= max(head_dim, value_dim)."""
    return next(w for w in HEAD_DIMS if w >= max(head_dim, value_dim))


def triton_backend(
    q: torch.Tensor, k_ext: torch.Tensor, v_ext: torch.Tensor, log_delta: torch.Tensor,
    layout: Layout, scale: float,
) -> torch.Tensor:
    """Continuous attention on the extended sequence, (B, H, Tq, Dv) in q's dtype (any number of
    queries Tq for the T keys; causal layouts have Tq = T).

    Head dims the kernel is not compiled for (PatchTST's published ETT models have 4) are padded
    with zeros: zero columns add nothing to q·k, zero value columns give output columns that are
    cut off, so the result and the gradients of the real columns are exact. The scale is the
    caller's, computed from the real head dim.
    """
    D, Dv = q.shape[-1], v_ext.shape[-1]
    width = padded_width(D, Dv)
    if (D, Dv) == (width, width):
        return ContinuousAttentionTriton.apply(q, k_ext, v_ext, log_delta, layout.last, layout.first, scale)
    pad = torch.nn.functional.pad
    q, k_ext, v_ext = pad(q, (0, width - D)), pad(k_ext, (0, width - D)), pad(v_ext, (0, width - Dv))
    out = ContinuousAttentionTriton.apply(q, k_ext, v_ext, log_delta, layout.last, layout.first, scale)
    return out[..., :Dv]
