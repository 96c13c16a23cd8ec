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



@dataclass
class VariableScaler:
    """One affine scale per variable, shared by every series: ``(value - offset) / scale``. The
    asynchronous route's scaling: a series may observe a variable once or never, so per-series
    statistics do not exist. ``fit`` is min-max over the training observations (the published
    PhysioNet 2012 protocol): every training value then lies in [0, 1]."""

    offset: np.ndarray  # (C,)
    scale: np.ndarray  # (C,), positive

    @classmethod
    def fit(cls, values: np.ndarray, variable: np.ndarray, n_variables: int) -> "VariableScaler":
        """Min and max of each variable's observations; a variable seen at one value (or never) gets
        scale 1, so it stays finite."""
        lo, hi = np.full(n_variables, np.inf), np.full(n_variables, -np.inf)
        np.minimum.at(lo, variable, values)
        np.maximum.at(hi, variable, values)
        unseen = ~np.isfinite(lo)
        lo[unseen], hi[unseen] = 0.0, 1.0
        return cls.from_range(lo, hi)

    @classmethod
    def from_range(cls, minimum, maximum) -> "VariableScaler":
        """From each variable's min and max (e.g. ``PhysioNetDataModule.scale_min`` / ``scale_max``)."""
        lo, hi = np.asarray(minimum, dtype=np.float64), np.asarray(maximum, dtype=np.float64)
        if lo.shape != hi.shape or lo.ndim != 1 or not (np.isfinite(lo).all() and np.isfinite(hi).all()):
            raise ValueError(f"scale_min and scale_max must be finite, one per variable, got shapes {lo.shape} and "
                             f"{hi.shape}")
        if (hi < lo).any():
            raise ValueError(f"scale_max is below scale_min for variable index {int(np.argmax(hi < lo))}")
        return cls(lo, np.where(hi > lo, hi - lo, 1.0))

    def transform(self, values: np.ndarray, variable: np.ndarray) -> np.ndarray:
        return (values - self.offset[variable]) / self.scale[variable]

    def inverse(self, scaled: np.ndarray, variable: np.ndarray) -> np.ndarray:
        return np.asarray(scaled, dtype=np.float64) * self.scale[variable] + self.offset[variable]
