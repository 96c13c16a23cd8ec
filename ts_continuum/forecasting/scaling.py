"""Per-series, per-variable standardisation fitted on observed training values.

Series of very different levels then weigh alike in the training loss. Statistics ignore missing
values; a constant series gets a unit scale so it stays finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Scaler:
    mean: np.ndarray  # (S, C)
    std: np.ndarray  # (S, C)

    @classmethod
    def fit(cls, values: np.ndarray, bounds: np.ndarray) -> "Scaler":
        """Statistics of each series' rows ``bounds[i]:bounds[i + 1]`` (every series non-empty)."""
        observed = ~np.isnan(values)
        starts = bounds[:-1]
        count = np.add.reduceat(observed, starts, axis=0).astype(np.float64)
        filled = np.where(observed, values, 0.0)
        total = np.add.reduceat(filled, starts, axis=0)
        mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
        rows = np.repeat(np.arange(len(starts)), np.diff(bounds))
        centred = np.where(observed, values - mean[rows], 0.0)
        var = np.divide(np.add.reduceat(centred**2, starts, axis=0), count, out=np.ones_like(total), where=count > 0)
        std = np.sqrt(var)
        return cls(mean, np.where(std > 1e-8 * np.maximum(1.0, np.abs(mean)), std, 1.0))

    def transform(self, values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        rows = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
        return ((values - self.mean[rows]) / self.std[rows]).astype(np.float32)

    def inverse(self, scaled: np.ndarray, series: np.ndarray) -> np.ndarray:
        """(W, H, C) scaled forecasts of series ``series`` (W,) -> original units (float64)."""
        return scaled.astype(np.float64) * self.std[series][:, None, :] + self.mean[series][:, None, :]
