"""Backtest, calibration and cross-validation of the asynchronous route: every observation a cutoff
holds out is a query, forecast from the history before the cutoff and scored against what was
observed (the PhysioNet 2012 protocol is one instance: history before hour 24, every later
observation scored).

Cutoffs are the forecaster's (``query_time.py``): its fixed cutoff, one per series, or the last
``n_windows`` rolling cutoffs ``step`` apart, the last ``horizon`` before each series' last
observation. Errors are in the data's units and, as ``scaled_mse``/``scaled_mae`` in ``overall``,
in the scaler's units (each variable divided by its training range): the published PhysioNet
metric is ``overall["scaled_mse"].mean()``, the per-variable errors averaged over the variables
that were queried. The persistence forecast (each variable's last observation in the history) is
scored beside the model, where it exists (``naive_n``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .backtest import BacktestResult
from .forecast_errors import listing, positive_int, user_stacklevel
from .frames import id_column
from .intervals import Level, VariableCalibration, check_names, level_name, parse_levels
from .query_examples import history_rows, query_rows
from .query_fit import QueryFit
from .query_frames import Observations
from .query_state import QueryState


@dataclass
class ScoredQueries:
    """The scored queries of examples (``series``, ``cutoffs``) of ``obs``: the example and row of
    ``obs`` each query is, its forecast, the persistence forecast (NaN without history) and the scale
    of the model that forecast it (its variable's range: cross-validation folds have their own)."""

    obs: Observations
    series: np.ndarray
    cutoffs: np.ndarray
    example: np.ndarray
    rows: np.ndarray
    predicted: np.ndarray
    naive: np.ndarray
    scale: np.ndarray

    @property
    def variable(self) -> np.ndarray:
        return self.obs.variable[self.rows]

    @property
    def actual(self) -> np.ndarray:
        return self.obs.values[self.rows]


def score_queries(state: QueryState, obs: Observations, series: np.ndarray, cutoffs: np.ndarray) -> ScoredQueries:
    """Forecast every observation from each cutoff to ``cutoff + horizon`` from the history before it."""
    axis = state.axis(obs)
    example, rows = query_rows(obs, series, cutoffs, axis)
    predicted = state.forecasts(obs, series, cutoffs, example, obs.variable[rows], obs.times[rows])
    variable = obs.variable[rows]
    return ScoredQueries(obs, series, cutoffs, example, rows, predicted,
                         _last_observed(obs, series, cutoffs, axis, example, variable, state.n_variables),
                         state.scaler.scale[variable])


def _last_observed(obs, series, cutoffs, axis, example, variable, C) -> np.ndarray:
    """Each query's variable's last value in its example's history (NaN where there is none)."""
    h_example, h_rows = history_rows(obs, series, cutoffs, axis, inclusive=False)
    wanted = example * C + variable
    if not len(h_rows):
        return np.full(len(wanted), np.nan)
    key = h_example * C + obs.variable[h_rows]
    order = np.lexsort((obs.times[h_rows], key))
    key, values = key[order], obs.values[h_rows][order]
    last = np.flatnonzero(np.concatenate([key[1:] != key[:-1], [True]]))
    keys, lasts = key[last], values[last]
    at = np.clip(np.searchsorted(keys, wanted), 0, len(keys) - 1)
    return np.where(keys[at] == wanted, lasts[at], np.nan)


def backtest_cutoffs(state: QueryState, obs: Observations, n_windows: int, step) -> tuple[np.ndarray, np.ndarray]:
    return state.axis(obs).backtest_cutoffs(obs, positive_int("n_windows", n_windows), step)


def _warn_in_sample(state: QueryState, s: ScoredQueries, what: str, consequence: str) -> None:
    """Queries of a fitted series at or before the end of its training data were trained on."""
    if state.context is None or not len(s.rows):
        return
    known = state.known(s.obs)[s.series[s.example]]
    end = state.training_end()[np.maximum(known, 0)]
    seen = (known >= 0) & (s.obs.times[s.rows] <= end)
    if not seen.any():
        return
    i = int(np.flatnonzero(seen)[0])
    names = listing(dict.fromkeys(s.obs.ids[s.series[s.example[seen]]]))
    warnings.warn(
        f"{what}: {int(seen.sum())} of {len(s.rows)} queries (series {names}) are observations the model was trained "
        f"on (e.g. {s.obs.ids[s.series[s.example[i]]]!r} at {s.obs.stamp(s.obs.times[s.rows[i]])}, while fit saw it up "
        f"to {s.obs.stamp(end[i])}), so {consequence}. For honest scores use series fit did not see (e.g. hold out "
        f"series), or fit on the data before the cutoffs; cross_validation does either",
        UserWarning, stacklevel=user_stacklevel())


def run_query_backtest(state: QueryState, df: pd.DataFrame, n_windows: int, step,
                       level: Level | None) -> BacktestResult:
    obs = state.read(df, "backtest data")
    series, cutoffs = backtest_cutoffs(state, obs, n_windows, step)
    levels = None if level is None else parse_levels(level)
    scored = score_queries(state, obs, series, cutoffs)
    _warn_in_sample(state, scored, "backtest", "their errors are in-sample and optimistic")
    intervals = None
    if levels is not None:
        spec = state.spec
        forecast = f"{spec.value_col}_forecast"
        check_names([forecast], levels, [spec.value_col, forecast, "cutoff", spec.id_col, spec.time_col,
                                         spec.variable_col])
        quantiles = state.calibrated("backtest with level").quantiles(levels, spec.variables,
                                                                       np.unique(scored.variable))
        half = quantiles[:, scored.variable] * state.scaler.scale[scored.variable][None, :]
        intervals = (levels, scored.predicted[None] - half, scored.predicted[None] + half)
        _warn_calibration_overlap(state, scored)
    return query_result(state, scored, intervals)


def run_query_calibration(state: QueryState, df: pd.DataFrame, n_windows: int, step) -> VariableCalibration:
    """Conformal scores ``|forecast - actual| / scale`` of the backtest queries of ``df``."""
    obs = state.read(df, "calibrate data")
    series, cutoffs = backtest_cutoffs(state, obs, n_windows, step)
    scored = score_queries(state, obs, series, cutoffs)
    _warn_in_sample(state, scored, "calibrate",
                    "their errors are in-sample and too small, so the intervals would be too narrow")
    if not len(scored.rows):
        raise ValueError("calibrate: no observation of df lies within horizon after a cutoff, so there is no error "
                         "to calibrate on")
    scores = np.abs(scored.predicted - scored.actual) / scored.scale
    until = None
    if state.context is not None:
        known = state.known(obs)[scored.series]
        ends = scored.cutoffs + np.asarray(state.axis(obs).horizon).astype(obs.times.dtype)
        until = np.full(len(state.context.ids), np.iinfo(np.int64).min if obs.times.dtype.kind == "i" else -np.inf,
                        dtype=obs.times.dtype)
        np.maximum.at(until, known[known >= 0], ends[known >= 0])
    return VariableCalibration(scores, scored.variable, until)


def _warn_calibration_overlap(state: QueryState, s: ScoredQueries) -> None:
    until = state.calibration.until
    if until is None or not len(s.rows):
        return
    known = state.known(s.obs)[s.series]
    overlap = (known >= 0) & (s.cutoffs < until[np.maximum(known, 0)])
    if overlap.any():
        warnings.warn(
            f"backtest: {int(overlap.sum())} of {len(s.series)} windows (series "
            f"{listing(dict.fromkeys(s.obs.ids[s.series[overlap]]))}) overlap the windows calibrate scored: there the "
            "intervals cover at least their level by construction, so coverage-* is no estimate. Measure it on other "
            "series or later windows", UserWarning, stacklevel=user_stacklevel())


def run_query_cross_validation(fit: QueryFit, df: pd.DataFrame, n_windows: int, step, refit: bool, folds: int | None,
                               id_col, time_col, target_cols, variable_col, value_col, val_size) -> BacktestResult:
    """Fresh models fitted without the scored observations: with ``folds``, each fold of series is
    scored by a model fitted on the other series; otherwise (rolling cutoffs) each series is cut at
    its first backtest cutoff (each window's with ``refit``) and the model fitted on what is before."""
    if not isinstance(refit, (bool, np.bool_)):
        raise ValueError(f"refit must be True or False, got {refit!r}")
    fit.check_val_size(val_size)
    spec, obs = fit.read_training(df, id_col, time_col, target_cols, variable_col, value_col)
    axis = fit.times.axis(obs.time_kind, obs.tz is not None)
    series, cutoffs = axis.backtest_cutoffs(obs, positive_int("n_windows", n_windows), step)
    parts = []
    if folds is not None:
        present = np.unique(series)
        k = positive_int("folds", folds)
        if not 2 <= k <= len(present):
            raise ValueError(f"folds={folds} must lie between 2 and the number of series with observations "
                             f"({len(present)})")
        if refit:
            raise ValueError("refit refits per time window; with folds each fold is fitted once: pass one of them")
        for group in np.array_split(np.random.default_rng(fit.seed).permutation(present), k):
            state = fit.fit(spec, obs.select(~np.isin(obs.series, group)), val_size).state
            mine = np.isin(series, group)
            parts.append(score_queries(state, obs, series[mine], cutoffs[mine]))
    else:
        if axis.fixed:
            raise ValueError("with a fixed cutoff every series has one window and nothing before it to train on: "
                             "cross-validate over series with folds=k (each fold scored by a model fitted on the "
                             "others)")
        windows = [np.arange(len(series))] if not refit else [np.flatnonzero(np.arange(len(series)) % n_windows == i)
                                                              for i in range(n_windows)]
        for chosen in windows:
            first = np.full(len(obs.ids), np.iinfo(np.int64).max if obs.times.dtype.kind == "i" else np.inf,
                            dtype=obs.times.dtype)
            np.minimum.at(first, series[chosen], cutoffs[chosen])
            state = fit.fit(spec, obs.select(obs.times < first[obs.series]), val_size).state
            parts.append(score_queries(state, obs, series[chosen], cutoffs[chosen]))
    return query_result(state, _merge(parts))


def _merge(parts: list[ScoredQueries]) -> ScoredQueries:
    """One set of scored queries, ordered by series, cutoff and time."""
    if len(parts) == 1:
        return parts[0]
    offsets = np.cumsum([0] + [len(p.series) for p in parts[:-1]])
    series = np.concatenate([p.series for p in parts])
    cutoffs = np.concatenate([p.cutoffs for p in parts])
    example = np.concatenate([p.example + o for p, o in zip(parts, offsets)])
    rows = np.concatenate([p.rows for p in parts])
    order_ex = np.lexsort((cutoffs, series))
    rank = np.empty_like(order_ex)
    rank[order_ex] = np.arange(len(order_ex))
    example = rank[example]
    order = np.lexsort((rows, example))
    joined = {name: np.concatenate([getattr(p, name) for p in parts])[order] for name in ("predicted", "naive",
                                                                                           "scale")}
    return ScoredQueries(parts[0].obs, series[order_ex], cutoffs[order_ex], example[order], rows[order], **joined)


def query_result(state: QueryState, s: ScoredQueries, intervals: tuple | None = None) -> BacktestResult:
    """The scored queries as frames (see the module docstring and ``BacktestResult``)."""
    spec, obs = state.spec, s.obs
    names = np.asarray(spec.variables, dtype=object)
    variable, actual, predicted = s.variable, s.actual, s.predicted
    cut = obs.as_pandas(s.cutoffs[s.example])
    keys = {"cutoff": cut, spec.time_col: obs.as_pandas(obs.times[s.rows]), spec.variable_col: names[variable]}
    if spec.id_col is not None:
        keys = {spec.id_col: id_column(obs.ids[s.series[s.example]], obs.id_dtype), **keys}
    forecast = f"{spec.value_col}_forecast"
    data = {spec.value_col: actual, forecast: predicted}
    if intervals is not None:
        levels, lo, hi = intervals
        for i in reversed(range(len(levels))):
            data[f"{forecast}-lo-{level_name(levels[i])}"] = lo[i]
        for i, level in enumerate(levels):
            data[f"{forecast}-hi-{level_name(level)}"] = hi[i]
    forecasts = pd.DataFrame({**keys, **data})

    err = predicted - actual
    scale = s.scale
    naive_err = s.naive - actual
    frame = pd.DataFrame({"group": s.example * len(names) + variable, "variable": variable,
                          "se": err**2, "ae": np.abs(err), "sse": (err / scale) ** 2, "sae": np.abs(err) / scale,
                          "nse": naive_err**2, "nae": np.abs(naive_err), "naive": np.isfinite(s.naive)})
    if intervals is not None:
        levels, lo, hi = intervals
        for i, level in enumerate(levels):
            frame[f"coverage-{level_name(level)}"] = (lo[i] <= actual) & (actual <= hi[i])
            frame[f"width-{level_name(level)}"] = hi[i] - lo[i]
    extra = [c for c in frame.columns if c.startswith(("coverage-", "width-"))]

    def scores(groups) -> pd.DataFrame:
        g = frame.groupby(groups, sort=True)
        out = pd.DataFrame({"mse": g["se"].mean(), "mae": g["ae"].mean()})
        naive = frame[frame["naive"]].groupby(groups, sort=True)
        out["naive_mse"], out["naive_mae"] = naive["nse"].mean(), naive["nae"].mean()
        out["naive_n"] = naive.size().reindex(out.index).fillna(0).astype(np.int64)
        for column in extra:
            out[column] = g[column].mean()
        out["n"] = g.size()
        return out, g

    per, _ = scores("group")
    example, var = np.divmod(per.index.to_numpy(), len(names))
    metrics = pd.DataFrame({"cutoff": obs.as_pandas(s.cutoffs[example]), spec.variable_col: names[var]})
    if spec.id_col is not None:
        metrics.insert(0, spec.id_col, id_column(obs.ids[s.series[example]], obs.id_dtype))
    metrics = pd.concat([metrics, per.reset_index(drop=True)], axis=1)
    overall, g = scores("variable")
    overall.insert(2, "scaled_mse", g["sse"].mean())
    overall.insert(3, "scaled_mae", g["sae"].mean())
    overall.index = pd.Index(names[overall.index.to_numpy()], name=spec.variable_col)
    return BacktestResult(forecasts, metrics, overall)
