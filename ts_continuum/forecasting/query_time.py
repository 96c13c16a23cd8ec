"""Time for the asynchronous route: the unit, the spans (horizon, lookback) and the cutoffs that cut a
series into history and queries.

Datetimes enter the model in hours (``time_unit``; any fixed duration) relative to the forecast
origin; numeric times stay in their own unit. ``horizon``, ``lookback`` and ``cutoff_step`` are
numbers in that unit or, for datetimes, durations ("24h", ``pd.Timedelta``).

A cutoff splits a series: history is what was observed before it (within ``lookback``), queries
what was observed from it to ``cutoff + horizon``; the model sees times relative to the cutoff.
Training cutoffs are either

- fixed (``cutoff=``): a time of the data's kind, the same for every series (24 with times in hours
  since admission: the PhysioNet 2012 protocol), or for datetimes a duration after each series'
  first observation ("24h"); one example per series; or
- rolling (``cutoff=None``): every ``cutoff_step`` (default ``horizon``) from ``lookback`` (or
  ``horizon`` when the whole history is used) after each series' first observation, while the
  series has observations at or after the cutoff.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .query_frames import Observations, ranges
from .steps import parse_freq


def _span(name: str, value, allow_none: bool = False):
    """A positive span as given: a number (time units) or a duration (pd.Timedelta), or None."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a positive number (in the time unit) or a duration such as '24h', "
                         f"got {value!r}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number (in the time unit) or a duration, got {value!r}")
        return float(value)
    try:
        span = pd.Timedelta(value)
    except (ValueError, TypeError):
        raise ValueError(f"{name} must be a positive number (in the time unit) or a duration such as '24h' or "
                         f"pd.Timedelta(hours=24), got {value!r}") from None
    if span <= pd.Timedelta(0):
        raise ValueError(f"{name} must be a positive duration, got {value!r}")
    return span


def _cutoff(value):
    """``cutoff`` as given: None, a number (a time of numeric data), a pd.Timestamp (a time of
    datetime data) or a pd.Timedelta (after each series' first observation)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"cutoff must be a time, a duration or None, got {value!r}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        if not np.isfinite(value):
            raise ValueError(f"cutoff must be finite, got {value!r}")
        return float(value)
    if isinstance(value, (pd.Timedelta, dt.timedelta, np.timedelta64)):
        return pd.Timedelta(value)
    if isinstance(value, (pd.Timestamp, dt.datetime, np.datetime64)):
        return pd.Timestamp(value)
    if isinstance(value, str):
        try:
            return pd.Timedelta(value)
        except ValueError:
            pass
        try:
            return pd.Timestamp(value)
        except ValueError:
            pass
    raise ValueError(f"cutoff must be a time of the data (a number for numeric times, a timestamp for datetimes), "
                     f"a duration after each series' first observation ('24h'), or None (rolling cutoffs); got "
                     f"{value!r}")


@dataclass(frozen=True)
class QueryTimes:
    """The asynchronous route's time settings as the Forecaster was given them, checked for what
    can be checked before the data is seen. ``axis`` fits them to the data's kind of time."""

    horizon: object
    lookback: object = None
    cutoff: object = None
    cutoff_step: object = None
    time_unit: object = None

    @classmethod
    def parse(cls, horizon, lookback, cutoff, cutoff_step, time_unit) -> "QueryTimes":
        if horizon is None:
            raise ValueError("the asynchronous model needs horizon=: how far after a cutoff to forecast, a number in "
                             "the time unit (hours for datetimes) or a duration such as '24h'")
        if time_unit is not None:
            parse_freq(time_unit, "datetime")  # a fixed duration, or the error that says so
        if cutoff is not None and cutoff_step is not None:
            raise ValueError("cutoff_step spaces rolling cutoffs; with a fixed cutoff there is one per series: "
                             "pass one of them")
        return cls(_span("horizon", horizon), _span("lookback", lookback, True), _cutoff(cutoff),
                   _span("cutoff_step", cutoff_step, True), time_unit)

    def axis(self, time_kind: str, tz_aware: bool) -> "TimeAxis":
        """The settings in native units for data of ``time_kind`` (refusing what does not fit it)."""
        if time_kind == "numeric":
            if self.time_unit is not None:
                raise ValueError(f"time_unit={self.time_unit!r} converts datetimes; the times are numbers, which "
                                 "stay in their own unit: leave time_unit unset")
            unit = 1.0
        else:
            unit = float(parse_freq("h" if self.time_unit is None else self.time_unit, "datetime"))

        def native(name: str, span) -> float | None:
            if span is None:
                return None
            if isinstance(span, pd.Timedelta):
                if time_kind == "numeric":
                    raise ValueError(f"{name}={span} is a duration, but the times are numbers: give {name} as a "
                                     "number in their unit")
                return float(span.value)
            return span * unit

        cutoff, after = self.cutoff, None
        if isinstance(cutoff, float) and time_kind == "datetime":
            raise ValueError(f"cutoff={cutoff:g} is a number, but the times are datetimes: give a duration after each "
                             "series' first observation ('24h') or a timestamp (the same cutoff for every series)")
        if isinstance(cutoff, (pd.Timedelta, pd.Timestamp)) and time_kind == "numeric":
            raise ValueError(f"cutoff={cutoff} is a {type(cutoff).__name__}, but the times are numbers: give the "
                             "cutoff as a number (a time of the data)")
        if isinstance(cutoff, pd.Timestamp):
            if (cutoff.tz is not None) != tz_aware:
                raise ValueError(f"cutoff={cutoff} is {'tz-aware' if cutoff.tz else 'naive'} but the times are "
                                 f"{'tz-aware' if tz_aware else 'naive'}: give it like the data")
            cutoff = float(cutoff.tz_convert("UTC").tz_localize(None).value if cutoff.tz else cutoff.value)
        elif isinstance(cutoff, pd.Timedelta):
            cutoff, after = None, float(cutoff.value)
        horizon = native("horizon", self.horizon)
        return TimeAxis(time_kind, unit, horizon, native("lookback", self.lookback),
                        native("cutoff_step", self.cutoff_step) or horizon, cutoff, after)

    def units(self, span) -> float | None:
        """A span in time units (hours for datetimes unless ``time_unit``): what the model's own
        arguments (its lead-time scale, a grid model's history) are given in."""
        if isinstance(span, pd.Timedelta):
            return span.value / parse_freq("h" if self.time_unit is None else self.time_unit, "datetime")
        return span


@dataclass(frozen=True)
class TimeAxis:
    """Time settings in native units (nanoseconds for datetimes). ``cutoff``: the fixed cutoff time;
    ``after``: the fixed cutoff's distance from each series' first observation; neither: rolling."""

    kind: str
    unit: float  # native units per time unit
    horizon: float
    lookback: float | None
    step: float
    cutoff: float | None
    after: float | None

    @property
    def fixed(self) -> bool:
        return self.cutoff is not None or self.after is not None

    def units(self, delta: np.ndarray) -> np.ndarray:
        """Native time differences in time units (float64)."""
        return np.asarray(delta, dtype=np.float64) / self.unit

    def _span(self, span: float, times: np.ndarray):
        """A span in the dtype of ``times``: whole nanoseconds for datetimes, so cutoffs are exact."""
        return np.int64(round(span)) if np.issubdtype(times.dtype, np.integer) else span

    def fixed_cutoffs(self, obs: Observations) -> np.ndarray:
        """(S,) each series' fixed cutoff (native; meaningless for a series without observations under
        a cutoff after the first observation)."""
        if self.cutoff is not None:
            return np.full(len(obs.ids), self._span(self.cutoff, obs.times), dtype=obs.times.dtype)
        first = np.where(np.diff(obs.offsets) > 0, obs.first_times(), 0)
        return first + self._span(self.after, obs.times)

    def training_cutoffs(self, obs: Observations) -> tuple[np.ndarray, np.ndarray]:
        """(series, cutoff) of every training example (module docstring); only cutoffs with an
        observation at or after them."""
        has = np.flatnonzero(np.diff(obs.offsets) > 0)
        if self.fixed:
            return has, self.fixed_cutoffs(obs)[has]
        first, last = obs.first_times()[has], obs.last_times()[has]
        start = first + self._span(self.lookback if self.lookback is not None else self.horizon, obs.times)
        step = self._span(self.step, obs.times)
        count = np.maximum((last - start) // step + 1, 0).astype(np.int64)
        k = ranges(np.zeros(len(count)), count)
        return np.repeat(has, count), np.repeat(start, count) + k * step

    def backtest_cutoffs(self, obs: Observations, n_windows: int, step) -> tuple[np.ndarray, np.ndarray]:
        """(series, cutoff) of the backtest windows: the fixed cutoff of every series, or the last
        ``n_windows`` cutoffs ``step`` apart (default ``horizon``), the last ``horizon`` before each
        series' last observation."""
        has = np.flatnonzero(np.diff(obs.offsets) > 0)
        if self.fixed:
            if n_windows != 1 or step is not None:
                raise ValueError("this forecaster has a fixed cutoff, one per series: backtest scores that one "
                                 "window (n_windows=1, no step)")
            return has, self.fixed_cutoffs(obs)[has]
        step = self._span(self.step if step is None else _native_span("step", step, self), obs.times)
        last = obs.last_times()[has]
        back = self._span(self.horizon, obs.times) + np.arange(n_windows)[::-1] * step
        return np.repeat(has, n_windows), (last[:, None] - back[None, :]).reshape(-1)

    def origins(self, obs: Observations) -> np.ndarray:
        """(S,) the forecast origin of each series' full history (``predict``): its last observation,
        or the fixed cutoff when the history ends before it (the origin the model was trained with)."""
        last = obs.last_times()
        if not self.fixed:
            return last
        return np.maximum(last, self.fixed_cutoffs(obs))


def _native_span(name: str, value, axis: TimeAxis) -> float:
    """A span given to one call (backtest's ``step``) in native units."""
    span = _span(name, value)
    if isinstance(span, pd.Timedelta):
        if axis.kind == "numeric":
            raise ValueError(f"{name}={span} is a duration, but the times are numbers: give a number in their unit")
        return float(span.value)
    return span * axis.unit
