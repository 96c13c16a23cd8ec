"""``QueryState``: what a fitted asynchronous Forecaster knows (the model, where observations live in
a frame, the per-variable scaler, the time settings, the fitted series' observations and the
calibration), and ``predict``'s answer at the caller's query times.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .forecast_errors import listing, user_stacklevel
from .intervals import Level, VariableCalibration, parse_levels
from .query_examples import example_sets, forecast
from .query_frames import Observations, Queries, QuerySpec, answer_frame, plain, read_observations, read_queries
from .query_time import QueryTimes, TimeAxis
from ..data.scaling import VariableScaler


@dataclass
class QueryState:
    """A fitted model of observation sets and everything needed to read frames for it.

    ``context``: the fitted series' observations (within ``lookback`` of their end), which
    ``predict(at=...)`` without a frame continues; empty for a forecaster built from a model.
    """

    model: torch.nn.Module
    spec: QuerySpec
    scaler: VariableScaler
    times: QueryTimes
    context: Observations | None
    duplicates: str = "raise"
    calibration: VariableCalibration | None = None
    series: dict = field(init=False)  # series id -> index among the fitted series

    def __post_init__(self) -> None:
        ids = [] if self.context is None else self.context.ids
        self.series = {sid: i for i, sid in enumerate(ids)}

    @property
    def n_variables(self) -> int:
        return len(self.spec.variables)

    def axis(self, obs: Observations) -> TimeAxis:
        return self.times.axis(obs.time_kind, obs.tz is not None)

    def read(self, df: pd.DataFrame, what: str) -> Observations:
        """``df`` (either form) read with the fitted variables and kind of times."""
        return read_observations(df, self.spec, what, self.duplicates)[1]

    def known(self, obs: Observations) -> np.ndarray:
        """(S,) each series' index among the fitted series, -1 for a new one."""
        return np.array([self.series.get(sid, -1) for sid in obs.ids], dtype=np.int64)

    def training_end(self) -> np.ndarray:
        """(S_fit,) native time of each fitted series' last training observation."""
        return self.context.last_times()

    def forecasts(self, obs: Observations, series: np.ndarray, cutoffs: np.ndarray, q_example: np.ndarray,
                  q_variable: np.ndarray, q_times: np.ndarray, inclusive: bool = False) -> np.ndarray:
        """Forecasts in the data's units of the queries (example, variable, native time) of the
        examples (``series``, ``cutoffs``) of ``obs``."""
        sets = example_sets(obs, series, cutoffs, self.axis(obs), self.scaler, self.n_variables, q_example, q_variable,
                            q_times, inclusive=inclusive)
        return self.scaler.inverse(forecast(self.model, sets), q_variable)

    def calibrated(self, action: str) -> VariableCalibration:
        if self.calibration is None:
            raise ValueError(f"{action} needs prediction-interval calibration: call calibrate(df) first, on series or "
                             "times the model was not trained on (e.g. validation series)")
        return self.calibration

    # --- predict at the caller's times --------------------------------------------------------
    def predict(self, df: pd.DataFrame | None, at: pd.DataFrame, level: Level | None) -> pd.DataFrame:
        """Forecasts at exactly the rows of ``at``, in its order, from the history in ``df`` (or the
        fitted series'); ``level`` adds the calibrated intervals."""
        if df is None:
            if self.context is None or not len(self.context.ids):
                raise ValueError("this forecaster was built from a model and holds no series: pass the history, "
                                 "predict(df, at=...)")
            obs = self.context
        else:
            obs = self.read(df, "predict data")
        queries = read_queries(at, self.spec, obs)
        levels = None if level is None else parse_levels(level)
        quantiles = None
        if levels is not None:
            quantiles = self.calibrated("predict with level").quantiles(levels, self.spec.variables,
                                                                        np.unique(queries.variable))
        asked = np.unique(queries.series)
        origins = self._origins(obs, asked, queries, at)
        # a query asked twice is forecast once
        keys = np.stack([queries.series, queries.variable, queries.times.view(np.int64) if
                         queries.times.dtype.kind == "i" else queries.times.astype(np.float64).view(np.int64)])
        _, first, again = np.unique(keys, axis=1, return_index=True, return_inverse=True)
        example = np.searchsorted(asked, queries.series[first])
        pred = self.forecasts(obs, asked, origins, example, queries.variable[first], queries.times[first],
                              inclusive=True)[np.ravel(again)]
        intervals = None
        if levels is not None:
            half = quantiles[:, queries.variable] * self.scaler.scale[queries.variable][None, :]
            intervals = (levels, pred[None] - half, pred[None] + half)
        return answer_frame(queries, self.spec, pred, intervals)

    def _origins(self, obs: Observations, asked: np.ndarray, queries: Queries, at: pd.DataFrame) -> np.ndarray:
        """Each asked series' forecast origin (``TimeAxis.origins``), with queries checked against it:
        a query at or before the series' last history time is refused, naming the row."""
        axis = self.axis(obs)
        empty = np.diff(obs.offsets)[asked] == 0
        if empty.any() and (not axis.fixed or axis.after is not None):  # no origin without observations
            sid = obs.ids[asked[np.flatnonzero(empty)[0]]]
            raise ValueError(f"series {sid!r} has no observation in the history, so it has no forecast origin: give "
                             "its history, or leave it out of at")
        origins = axis.origins(obs)
        last = obs.last_times()
        early = (queries.times <= last[queries.series]) & (np.diff(obs.offsets)[queries.series] > 0)
        if early.any():
            q = int(np.flatnonzero(early)[0])
            s = queries.series[q]
            label = plain(at.index[queries.row[q]])
            raise ValueError(
                f"at: {int(early.sum())} query time(s) are at or before their series' last history time (first: row "
                f"{label!r}, series {obs.ids[s]!r} at {obs.stamp(queries.times[q])}, its history ends at "
                f"{obs.stamp(last[s])}); forecasts are for times after the history: drop those rows, or give the "
                "history up to before them")
        beyond = axis.units(queries.times - origins[queries.series]) > axis.units(axis.horizon) * (1 + 1e-9)
        if beyond.any():
            names = listing(dict.fromkeys(obs.ids[queries.series[beyond]]))
            warnings.warn(
                f"at: {int(beyond.sum())} of {len(queries.times)} queries (series {names}) lie more than the horizon "
                f"({axis.units(axis.horizon):g} time units) after their forecast origin: the model was trained on lead "
                "times up to the horizon, so these are extrapolations", UserWarning, stacklevel=user_stacklevel())
        return origins[asked]
