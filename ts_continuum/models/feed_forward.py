"""The Transformer feed-forward block (Linear → GELU → dropout → Linear → dropout), lean in memory.

Autograd keeps three d_ff-wide tensors per token for the backward (the GELU's input, the float
dropout mask and the second linear's input: 12 bytes per hidden unit). In training this block keeps
the block's input and a boolean mask (1 byte per hidden unit) and recomputes the hidden layer in the
backward: one more d_model x d_ff product and a GELU per element, small beside the attention. On
PatchTST at the published ETTh1 size that takes 150 MB off what a CPU training step keeps (issue 47:
the quickstart's peak memory). The masks come from the same random stream and the products are the
ones autograd computes, so the numbers match plain autograd up to float rounding (below).

On the CPU the hidden layer is computed a block of rows at a time (``ROW_BLOCK_ELEMENTS`` hidden
units, 2 MiB in float32), in both passes and in evaluation: whole-batch hidden layers are 18-37 MB
blocks at that size, which glibc's heap cannot reuse for the attention's differently sized tiles,
so they fragment it (86 MB of the quickstart's heap after 14 steps). The masks are the same (the
generator draws serially); outputs and gradients are equal up to float rounding (a product kernel
may sum in another order for fewer rows; weight gradients are sums over blocks). GPUs keep whole
batches: their caching allocator does not fragment this way, and small products would waste launches.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import Dropout

ROW_BLOCK_ELEMENTS = 1 << 19  # hidden units per row block on the CPU


def _row_blocks(x: torch.Tensor, width: int) -> list[slice]:
    """Slices of the rows of x (all dimensions but the last, flattened) holding about
    ``ROW_BLOCK_ELEMENTS`` hidden units of ``width`` each on the CPU; one slice elsewhere."""
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    step = max(1, ROW_BLOCK_ELEMENTS // max(width, 1)) if x.device.type == "cpu" else max(rows, 1)
    return [slice(i, min(i + step, rows)) for i in range(0, rows, step)] or [slice(0, 0)]


def _by_row_blocks(fn: Callable[[slice], torch.Tensor], blocks: list[slice]) -> torch.Tensor:
    """fn of each row block, stacked along the rows (no copy when there is one block)."""
    if len(blocks) == 1:
        return fn(slice(None))
    return torch.cat([fn(rows) for rows in blocks])


def _draw_keep_mask(x: torch.Tensor, width: int, dtype: torch.dtype, p: float) -> torch.Tensor:
    """Boolean keep mask of shape (*x.shape[:-1], width), drawn block by block from the same random
    stream a whole-tensor ``torch.rand`` would use (the CPU generator draws serially)."""
    keep = torch.empty((*x.shape[:-1], width), dtype=torch.bool, device=x.device)
    flat = keep.view(-1, width)
    for rows in _row_blocks(x, width):
        torch.ge(torch.rand((rows.stop - rows.start, width), dtype=dtype, device=x.device), p, out=flat[rows])
    return keep


class _FeedForwardCore(torch.autograd.Function):
    """linear(gelu(linear(x, w1, b1)) · keep · scale, w2, b2), saving x and the boolean keep only.

    The backward recomputes the hidden layer from x (one small product and a GELU per element)
    in the dtype the forward used (autocast's, if on), then takes autograd's products.
    """

    @staticmethod
    def forward(ctx, x, keep, scale, w1, b1, w2, b2):
        x2, keep2 = x.reshape(-1, x.shape[-1]), keep.reshape(-1, keep.shape[-1])
        out = _by_row_blocks(  # under autocast: in the autocast dtype
            lambda rows: F.linear(F.gelu(F.linear(x2[rows], w1, b1)).mul_(keep2[rows]).mul_(scale), w2, b2),
            _row_blocks(x, w1.shape[0]))
        ctx.save_for_backward(x, keep, w1, b1, w2)
        ctx.scale, ctx.dtype = scale, out.dtype
        return out.reshape(*x.shape[:-1], w2.shape[0])

    @staticmethod
    def backward(ctx, grad):
        x, keep, w1, b1, w2 = ctx.saved_tensors
        dtype, scale = ctx.dtype, ctx.scale
        grad2 = grad.reshape(-1, grad.shape[-1]).to(dtype)
        x2, keep2 = x.reshape(-1, x.shape[-1]), keep.reshape(-1, keep.shape[-1])
        w1c, w2c, b1c = w1.to(dtype), w2.to(dtype), None if b1 is None else b1.to(dtype)
        grad_x = torch.empty_like(x2)
        grad_w1, grad_w2 = torch.zeros_like(w1), torch.zeros_like(w2)
        grad_b1 = None if b1 is None else torch.zeros_like(b1)
        for rows in _row_blocks(x, w1.shape[0]):
            g, xc, kc = grad2[rows], x2[rows].to(dtype), keep2[rows]
            h = F.linear(xc, w1c, b1c)
            grad_w2 += g.T @ F.gelu(h).mul_(kc).mul_(scale)
            grad_h = torch.ops.aten.gelu_backward((g @ w2c).mul_(kc).mul_(scale), h)
            del h
            grad_w1 += grad_h.T @ xc
            if grad_b1 is not None:
                grad_b1 += grad_h.sum(0)
            grad_x[rows] = grad_h @ w1c
        grad_b2 = grad2.sum(0).to(w2.dtype)
        return grad_x.reshape(x.shape), None, None, grad_w1, grad_b1, grad_w2, grad_b2


def _hidden_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype of the first linear's output: autocast's, if on (the mask is drawn in it)."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype


class FeedForward(nn.Sequential):
    """[LayerNorm →] Linear → GELU → dropout → Linear → dropout.

    A ``Sequential`` so that the parameters keep the names saved models have (``ff.0.weight``, ...);
    ``pre_norm`` puts a LayerNorm first (pre-norm layers), as the asynchronous model does.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float, pre_norm: bool = False):
        norm = [nn.LayerNorm(d_model)] if pre_norm else []
        super().__init__(*norm, nn.Linear(d_model, d_ff), nn.GELU(), Dropout(dropout), nn.Linear(d_ff, d_model),
                         Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *norm, first, act, drop, second, last_drop = self
        for module in norm:
            x = module(x)
        if drop.training and drop.p > 0.0 and torch.is_grad_enabled() and act.approximate == "none":
            keep = _draw_keep_mask(x, first.out_features, _hidden_dtype(x), drop.p)
            y = _FeedForwardCore.apply(x, keep, 1.0 / (1.0 - drop.p), first.weight, first.bias, second.weight,
                                       second.bias)
        elif torch.is_grad_enabled():
            y = second(drop(act(first(x))))
        else:  # evaluation: row blocks, nothing kept
            x2 = x.reshape(-1, x.shape[-1])
            y = _by_row_blocks(lambda rows: second(drop(act(first(x2[rows])))), _row_blocks(x, first.out_features))
            y = y.reshape(*x.shape[:-1], second.out_features)
        return last_drop(y)
