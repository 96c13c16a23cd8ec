"""Dropout that keeps a 1-byte mask for the backward pass.

``x * mask`` in autograd keeps the float mask (4 bytes per element) until the backward; this keeps
the boolean one and scales in both passes. The mask is drawn from uniform noise (same distribution
as ``nn.Dropout``, about twice as fast on the CPU, where ``bernoulli_`` took a third of a PatchTST
training step), so a seed draws the same masks as the float version did.
"""

from __future__ import annotations

import torch
from torch import nn


class _ScaleByMask(torch.autograd.Function):
    """x · keep / (1 - p), saving only the boolean ``keep``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return x.mul(keep).mul_(scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep).mul_(ctx.scale), None, None


def scale_by_mask(x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
    """x · keep · scale with a boolean ``keep`` (what dropout multiplies by), differentiable in x."""
    return _ScaleByMask.apply(x, keep, scale)


class Dropout(nn.Module):
    """Inverted dropout (zero with probability p, scale the rest by 1 / (1 - p)) with a 1-byte mask."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {p!r}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return scale_by_mask(x, torch.rand_like(x) >= self.p, 1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}"
