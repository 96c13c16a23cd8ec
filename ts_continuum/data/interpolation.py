"""The interpolation baseline, once: a window's observed inputs read out on a regular grid by linear
interpolation. The study's runner (``WindowDataset(interpolate=True)``) and ``Forecaster(
interpolate_inputs=True)`` both call it, so the baseline the study reports is the code users run.
"""

from __future__ import annotations

import numpy as np


def interpolate_window(grid: np.ndarray, times: np.ndarray, values: np.ndarray,
                       mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (K, C), observed where ``mask`` (K, C), at increasing ``times`` (K,), read out at
    ``grid`` (L,): each variable linearly interpolated between its own observations and held flat
    before the first and after the last. Returns (L, C) in ``values``' dtype and which variables (C,)
    have an observation at all (the others stay 0)."""
    out = np.zeros((len(grid), values.shape[1]), dtype=values.dtype)
    seen = mask.any(axis=0)
    for c in np.flatnonzero(seen):
        m = mask[:, c]
        out[:, c] = np.interp(grid, times[m], values[m, c])
    return out, seen
