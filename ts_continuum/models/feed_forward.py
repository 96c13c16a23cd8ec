"""The Transformer feed-forward block (Linear → GELU → dropout → Linear → dropout), lean in memory.

Autograd keeps three d_ff-wide tensors per token for the backward (the GELU's input, the float
dropout mask and the second linear's input: 12 bytes per hidden unit). In training this block keeps
the block's input and a boolean mask (1 byte per hidden unit) and recomputes the hidden layer in the
backward: one more d_model x d_ff product and a GELU per element, small beside the attention. On
PatchTST at the published ETTh1 size that takes 150 MB off what a CPU training step keeps (issue 47:
the quickstart's peak memory). The numbers are the same: the masks come from the same random stream,
and the products are the ones autograd computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .dropout import Dropout, draw_keep_mask


def _linear_2d(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a^T · b over every leading dimension: the weight gradient of a linear layer."""
    return a.reshape(-1, a.shape[-1]).T @ b.reshape(-1, b.shape[-1])


class _FeedForwardCore(torch.autograd.Function):
    """linear(gelu(linear(x, w1, b1)) · keep · scale, w2, b2), saving x and the boolean keep only.

    The backward recomputes the hidden layer from x (one small product and a GELU per element)
    in the dtype the forward used (autocast's, if on), then takes autograd's products.
    """

    @staticmethod
    def forward(ctx, x, keep, scale, w1, b1, w2, b2):
        h = F.linear(x, w1, b1)  # under autocast: in the autocast dtype
        out = F.linear(F.gelu(h).mul_(keep).mul_(scale), w2, b2)
        ctx.save_for_backward(x, keep, w1, b1, w2)
        ctx.scale, ctx.dtype = scale, out.dtype
        return out

    @staticmethod
    def backward(ctx, grad):
        x, keep, w1, b1, w2 = ctx.saved_tensors
        dtype = ctx.dtype
        grad, xc, w1c, w2c = grad.to(dtype), x.to(dtype), w1.to(dtype), w2.to(dtype)
        h = F.linear(xc, w1c, None if b1 is None else b1.to(dtype))
        y = F.gelu(h).mul_(keep).mul_(ctx.scale)
        grad_w2 = _linear_2d(grad, y).to(w2.dtype)
        grad_b2 = grad.reshape(-1, grad.shape[-1]).sum(0).to(w2.dtype)
        del y
        grad_h = torch.ops.aten.gelu_backward((grad @ w2c).mul_(keep).mul_(ctx.scale), h)
        grad_w1 = _linear_2d(grad_h, xc).to(w1.dtype)
        del xc
        grad_b1 = None if b1 is None else grad_h.reshape(-1, grad_h.shape[-1]).sum(0).to(b1.dtype)
        grad_x = (grad_h @ w1c).to(x.dtype)
        return grad_x, None, None, grad_w1, grad_b1, grad_w2, grad_b2


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
            keep = draw_keep_mask((*x.shape[:-1], first.out_features), _hidden_dtype(x), x.device, drop.p)
            y = _FeedForwardCore.apply(x, keep, 1.0 / (1.0 - drop.p), first.weight, first.bias, second.weight,
                                       second.bias)
        else:
            y = second(drop(act(first(x))))
        return last_drop(y)
