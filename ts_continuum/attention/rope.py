"""Rotary position embedding by real timestamps (continuous-time RoPE).

Standard RoPE rotates query/key channel pairs by ``position × θ_i``; using each token's real
timestamp instead of its index makes q·k depend on the true time difference, which is exact on
irregular data and identical to standard RoPE on a regular grid.
"""

from __future__ import annotations

import torch


def rope_frequencies(head_dim: int, base: float = 10000.0,
                     device: torch.device | str | None = None) -> torch.Tensor:
    """The D/2 rotation rates θ_i = base^(-2i/D) (radians per nominal step), float32."""
    if head_dim % 2:
        raise ValueError(f"rotary embeddings need an even head dimension, got {head_dim}")
    return base ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)


def apply_rope(x: torch.Tensor, times: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotate ``x`` (B, H, T, D) by ``times`` ((T,) or (B, T), any real values).

    Channel pairs are (i, i + D/2) (the "rotate half" layout).
    """
    if x.dim() != 4:
        raise ValueError(f"apply_rope needs x of shape (B, H, T, D), got {tuple(x.shape)}")
    B, _, T, D = x.shape
    if not isinstance(times, torch.Tensor) or tuple(times.shape) not in ((T,), (B, T)):
        got = tuple(times.shape) if isinstance(times, torch.Tensor) else type(times).__name__
        raise ValueError(f"apply_rope needs times of shape (T,) = ({T},) or (B, T) = ({B}, {T}), got {got}")
    freqs = rope_frequencies(D, base, x.device).to(torch.float64)
    # angles in float64: in float32, times near 1e5 already shift q·k by 1 %; only differences matter
    # to q·k, but a learned sink key is not rotated, so the origin is kept as given
    angles = times.to(torch.float64)[..., None] * freqs  # (B|., T, D/2)
    if angles.dim() == 3:
        angles = angles[:, None]  # (B, 1, T, D/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
