"""Per-series, per-variable standardisation fitted on observed training values.

Series of very different levels then weigh alike in the training loss. Statistics ignore missing
values. Scaling is unit-free: a series of values around 1e-9 is standardised like one around 1e9
(forecasts of ``c * y`` are ``c`` times those of ``y``). Only a constant series (its values equal,
up to the rounding of the statistics themselves) gets a unit scale, so it stays finite.
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
        """Statistics of each series' rows ``bounds[i]:bounds[i + 1]`` (every series non-empty).

        Computed on values divided by each series' largest magnitude, so that the variance neither
        underflows (values around 1e-170) nor overflows (around 1e155) whatever the units.
        """
        observed = ~np.isnan(values)
        starts = bounds[:-1]
        rows = np.repeat(np.arange(len(starts)), np.diff(bounds))
        count = np.add.reduceat(observed, starts, axis=0).astype(np.float64)
        size = np.maximum.reduceat(np.where(observed, np.abs(values), 0.0), starts, axis=0)
        size = np.where(size > 0, size, 1.0)
        unit = np.where(observed, values / size[rows], 0.0)  # within [-1, 1]
        mean = np.divide(np.add.reduceat(unit, starts, axis=0), count, out=np.zeros_like(size), where=count > 0)
        centred = np.where(observed, unit - mean[rows], 0.0)  # within [-2, 2]
        var = np.divide(np.add.reduceat(centred**2, starts, axis=0), count, out=np.zeros_like(size), where=count > 0)
        # rounding of the mean over n values reaches n * eps of it: a smaller spread is no spread
        constant = np.sqrt(var) <= count * np.finfo(np.float64).eps * np.abs(mean)
        return cls(mean * size, np.where(constant, 1.0, np.sqrt(var) * size))

    def transform(self, values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        rows = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
        return ((values - self.mean[rows]) / self.std[rows]).astype(np.float32)

    def inverse(self, scaled: np.ndarray, series: np.ndarray) -> np.ndarray:
        """(W, H, C) scaled forecasts of series ``series`` (W,) -> original units (float64)."""
        return scaled.astype(np.float64) * self.std[series][:, None, :] + self.mean[series][:, None, :]

