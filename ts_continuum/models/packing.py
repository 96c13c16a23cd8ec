"""Turning masked, irregularly timed inputs into left-packed token sequences with lengths.

Models receive values with a mask (False = not observed) and real timestamps. Attention wants
tokens that exist: observed tokens are moved to the front in time order (padding on the right,
``lengths`` per row), so nothing unobserved is ever fed to the model as a number.
"""

from __future__ import annotations

import torch


def is_regular(mask: torch.Tensor | None, times: torch.Tensor | None) -> bool:
    """True when every input is observed on the unit grid: the fast path applies."""
    if mask is not None and not bool(mask.all()):
        return False
    if times is not None and times.shape[-1] > 1:
        return bool((torch.diff(times, dim=-1) == 1).all())
    return True


def pack(mask: torch.Tensor, *tensors: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Move the observed entries (``mask`` True along dim 1) of each row to the front, in order.

    ``mask``: (N, L); each tensor: (N, L, ...). Returns the counts (N,) and the packed tensors;
    entries past a row's count are copies of earlier entries and must be ignored.
    """
    order = torch.sort((~mask).to(torch.int8), dim=1, stable=True).indices
    counts = mask.sum(1)
    packed = []
    for t in tensors:
        idx = order.view(order.shape + (1,) * (t.dim() - 2)).expand(order.shape + t.shape[2:])
        packed.append(torch.gather(t, 1, idx))
    return counts, tuple(packed)


def right_align(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(N, S, ...) left-packed rows -> rows whose last valid entry sits in the last slot, zeros before.

    Positional slots and flatten heads then see the most recent token at a fixed place.
    """
    N, S = x.shape[:2]
    slots = torch.arange(S, device=x.device)
    src = slots[None, :] - (S - lengths[:, None])  # (N, S)
    ok = src >= 0
    idx = src.clamp_min(0).view(N, S, *([1] * (x.dim() - 2))).expand_as(x)
    return torch.where(ok.view(N, S, *([1] * (x.dim() - 2))), torch.gather(x, 1, idx), torch.zeros_like(x))


def slot_index(lengths: torch.Tensor, slots: int) -> torch.Tensor:
    """Right-aligned slot of each left-packed token: token k of a row with n tokens -> slots - n + k."""
    k = torch.arange(slots, device=lengths.device)
    return (slots - lengths[:, None] + k[None, :]).clamp(0, slots - 1)
