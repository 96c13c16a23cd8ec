"""Turning masked, irregularly timed inputs into left-packed token sequences with lengths.

Models receive values with a mask (False = not observed) and real timestamps. Attention wants
tokens that exist: observed tokens are moved to the front in time order (padding on the right,
``lengths`` per row), so nothing unobserved is ever fed to the model as a number.
"""

from __future__ import annotations

import torch


def regular_grid(mask: torch.Tensor | None, times: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """True (a 0-dim tensor, read by the caller with its other checks) when every input is observed
    on the grid -L+1, ..., 0 itself: the fast path, which never reads the times, applies. A
    unit-spaced window that ends before the origin is not that grid (its forecast lies further
    ahead), so it takes the irregular path."""
    flag = torch.ones((), dtype=torch.bool, device=device)
    if mask is not None:
        flag = flag & mask.all()
    if times is not None:
        flag = flag & (torch.diff(times, dim=-1) == 1).all() & (times[..., -1] == 0).all()
    return flag


def is_regular(mask: torch.Tensor | None, times: torch.Tensor | None) -> bool:
    """``regular_grid`` read on its own (the models read it together with their input checks)."""
    device = next((t.device for t in (mask, times) if t is not None), torch.device("cpu"))
    return bool(regular_grid(mask, times, device))


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


def interpolate_to_grid(z: torch.Tensor, times: torch.Tensor, counts: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """Tokens at irregular times, read out on a regular grid by linear interpolation in time.

    ``z``: (N, S, d) left-packed tokens, ``times``: (N, S) their increasing times (entries past a
    row's ``counts`` are ignored), ``grid``: (G,) the times to read at. Outside a row's first and
    last token the nearest token is taken. The same assumption as continuous attention (linear
    between observations) gives a time-aligned input to slot-based heads; on the regular grid
    itself it returns the tokens unchanged.
    """
    N, S = times.shape
    valid = torch.arange(S, device=times.device)[None, :] < counts[:, None]
    t = torch.where(valid, times, torch.full_like(times, float("inf")))  # padding sorts last
    right = torch.searchsorted(t.contiguous(), grid.to(t.dtype).expand(N, -1).contiguous())  # first token after
    last = (counts - 1)[:, None]
    right = torch.minimum(right, last)
    left = (right - 1).clamp_min(0)
    t_left, t_right = torch.gather(times, 1, left), torch.gather(times, 1, right)
    span = t_right - t_left
    w = torch.where(span > 0, (grid[None, :] - t_left) / torch.where(span > 0, span, torch.ones_like(span)), 1.0)
    w = w.clamp(0.0, 1.0).unsqueeze(-1).to(z.dtype)
    idx = lambda i: i.unsqueeze(-1).expand(-1, -1, z.shape[-1])  # noqa: E731
    return torch.gather(z, 1, idx(left)) * (1 - w) + torch.gather(z, 1, idx(right)) * w
