"""The NaN-aware scalers: per-series standardisation (``Scaler``: ``ForecastDataModule`` and the
grid ``Forecaster``) and per-variable min-max (``VariableScaler``: the asynchronous route).

``Scaler`` fits on observed training values only, so series of very different levels weigh alike in
the training loss. Its statistics are the population mean and std (ddof=0) by the corrected two-pass
algorithm, computed on values divided by a power of two near each series' largest magnitude: that
division is exact, so the numbers equal scikit-learn's ``StandardScaler`` (what the study's data
module used) bit for bit, and the variance neither underflows (values around 1e-170) nor overflows
(around 1e155) whatever the units. Only a constant series (its values equal, up to the rounding of
the statistics themselves) gets a unit scale, so it stays finite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def moments(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std (ddof=0) of each column of ``values`` (n, C) over its non-NaN entries; a column
    with none gets mean 0, a constant one std 1."""
    observed = ~np.isnan(values)
    count = observed.sum(axis=0).astype(np.float64)
    largest = np.where(observed, np.abs(values), 0.0).max(axis=0, initial=0.0)
    size = np.ldexp(1.0, np.frexp(np.where(largest > 0, largest, 1.0))[1] - 1)  # a power of two: exact
    with np.errstate(invalid="ignore", divide="ignore"):
        unit = np.where(observed, values / size, 0.0)  # within (-2, 2)
        mean = np.where(count > 0, unit.sum(axis=0) / count, 0.0)
        centred = np.where(observed, unit - mean, 0.0)
        correction = centred.sum(axis=0)
        var = np.where(count > 0, ((centred**2).sum(axis=0) - correction**2 / count) / count, 0.0)
    # rounding of the mean over n values reaches n * eps of it: a smaller spread is no spread
    constant = np.sqrt(var) <= count * np.finfo(np.float64).eps * np.abs(mean)
    return mean * size, np.where(constant, 1.0, np.sqrt(var) * size)


@dataclass
class Scaler:
    """``(value - mean) / std`` per series and variable; ``bounds`` (S + 1,) are the row offsets of
    series concatenated row-wise (default: all rows one series)."""

    mean: np.ndarray  # (S, C)
    std: np.ndarray  # (S, C)

    @classmethod
    def fit(cls, values: np.ndarray, bounds: np.ndarray | None = None) -> "Scaler":
        """Statistics of each series' rows ``bounds[i]:bounds[i + 1]`` (every series non-empty)."""
        bounds = _bounds(values, bounds)
        stats = [moments(values[b:e]) for b, e in zip(bounds[:-1], bounds[1:])]
        return cls(np.stack([m for m, _ in stats]), np.stack([s for _, s in stats]))

    def transform(self, values: np.ndarray, bounds: np.ndarray | None = None) -> np.ndarray:
        rows = np.repeat(np.arange(len(self.mean)), np.diff(_bounds(values, bounds)))
        return ((values - self.mean[rows]) / self.std[rows]).astype(np.float32)

    def inverse(self, scaled: np.ndarray, series: np.ndarray | None = None) -> np.ndarray:
        """(W, H, C) scaled forecasts of series ``series`` (W,) -> original units (float64); without
        ``series``, values (..., C) of the one series."""
        scaled = np.asarray(scaled, dtype=np.float64)
        if series is None:
            return scaled * self.std[0] + self.mean[0]
        return scaled * self.std[series][:, None, :] + self.mean[series][:, None, :]


def _bounds(values: np.ndarray, bounds: np.ndarray | None) -> np.ndarray:
    return np.array([0, len(values)]) if bounds is None else bounds


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
