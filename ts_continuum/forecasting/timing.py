"""The nominal step: parsing ``freq=``, inferring it from the data, and time in nominal steps.

The model measures time in nominal steps (one step = ``freq``). Native times are int64 nanoseconds
for datetimes (so a step is a fixed duration: calendar offsets such as month ends are refused) and
float64 for numeric times. Irregular spacing is kept as it is: nothing is resampled or filled.
"""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pandas as pd

from .frames import Panel

SNAP = 1e-6  # times this close to a whole number of steps are taken as exact (float noise)


def parse_freq(freq, time_kind: str) -> float | int:
    """``freq`` in native units: nanoseconds (int) for datetimes, the number itself for numeric time."""
    if time_kind == "numeric":
        if isinstance(freq, bool) or not isinstance(freq, (int, float, np.integer, np.floating)):
            raise ValueError(f"the times are numbers, so freq must be a positive number, got {freq!r}")
        if not np.isfinite(freq) or freq <= 0:
            raise ValueError(f"freq must be a positive number, got {freq!r}")
        return float(freq)
    if isinstance(freq, (bool, int, float, np.integer, np.floating)):
        raise ValueError(f"the times are datetimes, so freq must be a duration such as 'h', '15min' or "
                         f"pd.Timedelta(hours=1), got the number {freq!r}")
    try:
        if isinstance(freq, str):
            step = _offset_step(pd.tseries.frequencies.to_offset(freq), freq)
        elif isinstance(freq, (pd.Timedelta, dt.timedelta, np.timedelta64)):
            step = pd.Timedelta(freq)
        elif isinstance(freq, pd.offsets.BaseOffset):
            step = _offset_step(freq, freq)
        else:
            raise ValueError(f"unsupported type {type(freq).__name__}")
    except ValueError as exc:
        raise ValueError(f"freq={freq!r} is not a fixed duration ({exc}); use e.g. 'h', '15min', 'D' (24 hours) "
                         "or a pd.Timedelta") from None
    if step <= pd.Timedelta(0):
        raise ValueError(f"freq must be a positive duration, got {freq!r}")
    return int(step.value)


def _offset_step(offset: pd.offsets.BaseOffset, freq) -> pd.Timedelta:
    """A pandas offset as a fixed duration; a day is 24 hours.

    Times are UTC nanoseconds, so a day cannot follow a daylight-saving change; pandas 3 no longer
    counts ``Day`` as a fixed ``Tick`` for that reason, pandas 2 does.
    """
    if isinstance(offset, pd.offsets.Day):
        return pd.Timedelta(days=offset.n)
    if isinstance(offset, pd.offsets.Tick):
        return pd.Timedelta(offset)
    raise ValueError(f"{freq!r} is a calendar offset of varying length")


def infer_freq(panel: Panel) -> float | int:
    """The median over series of each series' median spacing; warns when series disagree."""
    diffs = np.diff(panel.times)
    within = panel.codes[1:] == panel.codes[:-1]
    if not within.any():
        raise ValueError("cannot infer the nominal step: no series has two observations; pass freq=...")
    per_series = pd.Series(diffs[within]).groupby(panel.codes[1:][within]).median().to_numpy()
    step = float(np.median(per_series))
    off = np.abs(per_series / step - 1) > 0.25
    if off.any():
        warnings.warn(
            f"series differ in their typical spacing ({int(off.sum())} of {len(per_series)} series are more than "
            f"25% away from the median); using {describe(step, panel.time_kind)} as the nominal step. Pass freq=... "
            "to choose it", UserWarning, stacklevel=3)
    return int(round(step)) if panel.time_kind == "datetime" else step


def describe(freq: float | int, time_kind: str) -> str:
    """A readable nominal step for messages: '0 days 01:00:00' or '0.5'."""
    return str(pd.Timedelta(int(freq), unit="ns")) if time_kind == "datetime" else f"{freq:g}"


def to_steps(delta: np.ndarray, freq: float | int) -> np.ndarray:
    """Native time differences -> nominal steps (float64), whole numbers made exact."""
    steps = np.asarray(delta, dtype=np.float64) / float(freq)
    whole = np.rint(steps)
    return np.where(np.abs(steps - whole) < SNAP, whole, steps)


def series_steps(panel: Panel, freq: float | int) -> np.ndarray:
    """Every row's time in nominal steps since its series' first observation."""
    first = np.repeat(panel.times[panel.bounds[:-1]], np.diff(panel.bounds))
    return to_steps(panel.times - first, freq)


def irregularity(panel: Panel, freq: float | int) -> str | None:
    """What makes the data irregular on the nominal grid (off-grid spacing, missing values), or None."""
    steps = series_steps(panel, freq)
    within = panel.codes[1:] == panel.codes[:-1]
    off_grid = int((np.diff(steps)[within] != 1).sum())
    missing = int(np.isnan(panel.values).sum())
    parts = []
    if off_grid:
        parts.append(f"{off_grid} of {int(within.sum())} spacings differ from the nominal step "
                     f"{describe(freq, panel.time_kind)}")
    if missing:
        parts.append(f"{missing} target values are missing")
    return "; ".join(parts) or None


def future_times(last: np.ndarray, freq: float | int, horizon: int) -> np.ndarray:
    """(S, horizon) native times last + k * freq, k = 1..horizon."""
    k = np.arange(1, horizon + 1)
    if np.issubdtype(last.dtype, np.integer):
        return last[:, None] + k[None, :] * np.int64(freq)
    return last[:, None] + k[None, :] * float(freq)
