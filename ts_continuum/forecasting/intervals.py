"""Prediction intervals by split conformal prediction: forecast ± a quantile of held-out errors.

``Forecaster.calibrate`` forecasts backtest windows the model did not train on and keeps each
matched error as a score ``|forecast - actual| / std`` (the series' scale, so series of different
sizes pool). For a level ``L`` %, horizon slot ``k`` and target ``c`` with ``n`` scores, the interval
half-width is the ``ceil((n + 1) L / 100)``-th smallest score times the series' std: the
finite-sample conformal quantile (column names and order follow statsforecast's ``level=``). It
covers a new error with probability at least ``L`` % when errors are exchangeable with the
calibration ones. Time series bend that assumption (drift, regime changes, overlapping windows), so
the coverage is a target, not a guarantee: ``backtest(df, level=...)`` on later windows measures it
(on the calibration windows themselves it is at least ``L`` by construction, which a warning says).

Errors grow with the horizon, so each slot has its own quantile; pooling over series and windows
rather than over slots keeps them apart. A level needs ``n >= L / (100 - L)`` scores per slot (19
for 95 %); fewer would make the interval infinite, which is refused with the fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence, Union

import numpy as np

Level = Union[float, Sequence[float]]


@dataclass
class Calibration:
    """Calibration scores (W, H, C): ``|forecast - actual| / std`` of each window, horizon slot and
    target, NaN where nothing was observed. ``windows`` counts the windows they came from.
    ``until`` (one per series of the forecaster's context, native times, or None): the end of the
    last calibrated horizon of each series, the lowest time for a series not calibrated; a
    backtest window starting before it overlaps the calibration."""

    scores: np.ndarray
    until: np.ndarray | None = None

    @property
    def windows(self) -> int:
        return len(self.scores)

    def points(self) -> np.ndarray:
        """(H, C) matched points per horizon slot and target."""
        return (~np.isnan(self.scores)).sum(0)

    def quantiles(self, levels: list[float], target_names: Sequence[str]) -> np.ndarray:
        """(L, H, C) conformal quantiles of the scores for each level (percent)."""
        n = self.points()
        ordered = np.sort(self.scores, axis=0)  # NaN last
        out = np.empty((len(levels),) + n.shape)
        for i, level in enumerate(levels):
            need = min_points(level)
            if (n < need).any():
                k, c = np.unravel_index(int(np.argmin(n)), n.shape)
                raise ValueError(
                    f"level {level_name(level)} needs at least {need} calibration points per horizon step and "
                    f"target, but the calibration has {int(n[k, c])} for {target_names[c]!r} at step {k + 1} "
                    f"(the fewest; {self.windows} windows): calibrate on more windows (n_windows, or a smaller "
                    f"step) or more series, or ask for a lower level")
            rank = np.ceil(level * (n + 1) / 100 - 1e-9).astype(int)  # 1-based, at most n
            out[i] = np.take_along_axis(ordered, (rank - 1)[None], axis=0)[0]
        return out


def min_points(level: float) -> int:
    """The fewest scores whose conformal ``level`` quantile is finite: ``ceil((n + 1) L / 100) <= n``."""
    return max(1, math.ceil(level / (100 - level) - 1e-9))


def parse_levels(level: Level) -> list[float]:
    """``level`` (a number or a list of numbers, in percent) as sorted unique floats in [1, 100)."""
    items = list(level) if np.ndim(level) else [level.item() if isinstance(level, np.ndarray) else level]
    if not len(items):
        raise ValueError("level is empty: give coverage levels in percent, e.g. level=[80, 95]")
    out = []
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, float, np.integer, np.floating)):
            raise ValueError(f"level must be a number or a list of numbers in percent, e.g. level=[80, 95]; "
                             f"got {item!r}")
        if not 1 <= float(item) < 100:  # a fraction such as 0.8 is almost surely meant as 80 %
            raise ValueError(f"level {item!r} is not a coverage in percent from 1 to below 100: levels are "
                             f"percentages, e.g. level=80 for an 80 % interval (not 0.8)")
        out.append(float(item))
    return sorted(set(out))


def interval_columns(column: str, intervals: tuple | None, c: int) -> dict[str, np.ndarray]:
    """The flattened interval columns of forecast column ``column`` (target ``c``) from ``intervals``
    (levels, lower and upper bounds (L, ..., C)), named as in statsforecast and widest outside:
    ``<column>-lo-95, -lo-80, -hi-80, -hi-95``; none without intervals."""
    if intervals is None:
        return {}
    levels, lo, hi = intervals
    out = {f"{column}-lo-{level_name(levels[i])}": lo[i, ..., c].reshape(-1) for i in reversed(range(len(levels)))}
    return {**out, **{f"{column}-hi-{level_name(lv)}": hi[i, ..., c].reshape(-1) for i, lv in enumerate(levels)}}


def level_name(level: float) -> str:
    """A level as written in column names: ``80``, ``97.5``; distinct levels get distinct names."""
    return np.format_float_positional(level, trim="-")


def check_names(forecast_columns: Sequence[str], levels: list[float], taken: Sequence[str]) -> None:
    """Refuse interval columns that would overwrite another output column (e.g. a target named
    ``y-lo-80`` beside a target ``y``)."""
    for column in forecast_columns:
        for side in ("lo", "hi"):
            for level in levels:
                name = f"{column}-{side}-{level_name(level)}"
                if name in taken:
                    raise ValueError(f"the {level_name(level)} % interval of {column!r} would be written to column "
                                     f"{name!r}, which the output already has: rename that column before fit")


def bounds(forecast: np.ndarray, std: np.ndarray, quantiles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds (L, W, H, C) of forecasts (W, H, C) of series with scale ``std`` (W, C)."""
    half = quantiles[:, None, :, :] * std[None, :, None, :]
    return forecast[None] - half, forecast[None] + half


@dataclass
class VariableCalibration:
    """Calibration scores of the asynchronous route: ``|forecast - actual| / scale`` of every scored
    query (``scale``: the variable's scaler range) and the variable it asked for. One quantile per
    variable, pooled over series and lead times, so an interval does not widen with the lead time
    (``backtest(level=...)`` measures how that covers). ``until`` (one per series of the
    forecaster's context, native times, or None): where each series' calibration ends."""

    scores: np.ndarray
    variable: np.ndarray
    until: np.ndarray | None = None

    def points(self, n_variables: int) -> np.ndarray:
        """(C,) scores per variable."""
        return np.bincount(self.variable, minlength=n_variables)

    def quantiles(self, levels: list[float], names: Sequence[str], needed: np.ndarray) -> np.ndarray:
        """(L, C) conformal quantiles per level and variable; NaN for a variable with too few scores
        that ``needed`` (variable indices asked for) does not include, an error for one it does."""
        C = len(names)
        n = self.points(C)
        out = np.full((len(levels), C), np.nan)
        for i, level in enumerate(levels):
            need = min_points(level)
            short = np.intersect1d(np.flatnonzero(n < need), needed)
            if len(short):
                c = int(short[np.argmin(n[short])])
                raise ValueError(
                    f"level {level_name(level)} needs at least {need} calibration points per variable, but the "
                    f"calibration has {int(n[c])} for {names[c]!r} ({len(short)} variable(s) short): calibrate on "
                    "more series or windows, ask for a lower level, or leave that variable out of the queries")
            for c in np.flatnonzero(n >= need):
                ordered = np.sort(self.scores[self.variable == c])
                rank = int(np.ceil(level * (n[c] + 1) / 100 - 1e-9))
                out[i, c] = ordered[rank - 1]
        return out
