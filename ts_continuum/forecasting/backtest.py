"""Rolling-origin evaluation of a fitted Forecaster, without any training.

Unlike neuralforecast's ``cross_validation`` (which, with ``refit=False``, trains once on the data
before the first window), this scores the forecaster as it was fitted. Windows whose targets lie in
the data ``fit`` saw for a known series are in-sample: a ``UserWarning`` says so. For honest scores,
fit on the data up to the first cutoff and backtest on the full frame.

For each series the last ``n_windows`` cutoffs lie ``step`` nominal steps apart, the last one
``horizon`` steps before the series' last observation. On irregular data a cutoff falls between
observations: the forecast origin is the last observation at or before it (reported as ``cutoff``),
and cutoffs sharing an origin are reported once. The forecast uses only the history up to the
origin, scaling included (a series unseen in fit is standardised by its rows up to the origin);
actuals are the observations after it matched to horizon slots as in training (averaged when several
land in one slot, NaN when none does). Errors are in the data's original units.

The same windows calibrate prediction intervals (``run_calibration``, ``intervals.py``): their errors,
divided by each series' scale, are the conformal scores; ``run_backtest(level=...)`` then measures the
intervals' coverage on later windows.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .forecast_errors import listing, positive_int, user_stacklevel
from .frames import id_column
from .intervals import Calibration, Level, bounds, check_names, interval_columns, level_name, parse_levels
from .native_times import native_to_pandas
from .steps import describe, future_times, series_steps
from .grid_state import GridState
from ..data.windows import EPS, Windows


@dataclass
class BacktestResult:
    """``forecasts``: one row per series, cutoff and horizon slot, with each target's actual value
    and ``<target>_forecast``; ``metrics``: MSE, MAE, those of the persistence forecast (``naive_mse``,
    ``naive_mae``: the last observation at or before the origin, held) and matched points ``n`` per
    series, cutoff and target; ``overall``: the same per target over every matched point. Original
    units. With ``season_length`` m, also the seasonal naive forecast's ``snaive_mse``/``snaive_mae``:
    slot k gets the last observation at or before k - m * ceil(k / m) steps from the origin (on
    regular data the value one season before), scored where that observation exists. With ``level``,
    ``forecasts`` also holds ``<target>_forecast-lo-<L>``/``-hi-<L>`` and the scores ``coverage-<L>``
    (share of matched points inside the interval) and ``width-<L>`` (its mean width)."""

    forecasts: pd.DataFrame
    metrics: pd.DataFrame
    overall: pd.DataFrame


@dataclass
class ScoredWindows:
    """The backtest windows of a frame: origins (W,) rows of ``panel``, their series, forecasts and
    the std they were scaled by (W, C), actual values (W, H, C) and which slots were observed."""

    panel: object
    origins: np.ndarray
    series: np.ndarray
    predicted: np.ndarray
    std: np.ndarray
    actual: np.ndarray
    matched: np.ndarray


def run_backtest(state: GridState, df: pd.DataFrame, n_windows: int, step: int | None,
                 level: Level | None = None, season_length: int | None = None) -> BacktestResult:
    spec = state.spec
    check_season_length(season_length)
    levels = None if level is None else parse_levels(level)
    if levels is not None:
        quantiles = state.calibrated("backtest with level").quantiles(levels, spec.target_cols)
        check_names([f"{t}_forecast" for t in spec.target_cols], levels,
                    [*spec.target_cols, *(f"{t}_forecast" for t in spec.target_cols), "cutoff", spec.id_col,
                     spec.time_col or spec.index_name or "ds"])
    panel = state.read(df, "backtest data")
    windows = state.windows(panel)
    cutoffs = window_cutoffs(panel, windows, state.horizon, n_windows, step)
    w = score_windows(state, panel, windows, cutoffs, "backtest", "their errors are in-sample and optimistic")
    warn_unscored(state, w, "backtest")
    if levels is None:
        return backtest_result(state, w, season_length=season_length)
    _warn_calibration_overlap(state, w)
    return backtest_result(state, w, (levels, *bounds(w.predicted, w.std, quantiles)), season_length)


def check_season_length(season_length: int | None) -> None:
    if season_length is not None:
        positive_int("season_length", season_length)


def run_calibration(state: GridState, df: pd.DataFrame, n_windows: int, step: int | None) -> Calibration:
    """Conformal scores of the backtest windows of ``df``: ``|forecast - actual| / std``."""
    panel = state.read(df, "calibrate data")
    windows = state.windows(panel)
    cutoffs = window_cutoffs(panel, windows, state.horizon, n_windows, step)
    w = score_windows(state, panel, windows, cutoffs, "calibrate",
                      "their errors are in-sample and too small, so the intervals would be too narrow")
    warn_unscored(state, w, "calibrate")
    return calibration_from(state, panel, w)


def calibration_from(state: GridState, panel, w: ScoredWindows) -> Calibration:
    """The conformal scores of scored windows, and where each series' calibration ends."""
    with np.errstate(invalid="ignore"):
        scores = np.abs(w.predicted - w.actual) / w.std[:, None, :]
    ends = future_times(panel.times[w.origins], state.freq, state.horizon)[:, -1]  # each window's last horizon slot
    known = state.known(panel)[w.series]
    until = np.full(len(state.context.ids), _lowest(ends.dtype), dtype=ends.dtype)
    np.maximum.at(until, known[known >= 0], ends[known >= 0])
    return Calibration(np.where(w.matched, scores, np.nan), until)


def _lowest(dtype) -> int | float:
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -np.inf


def _warn_calibration_overlap(state: GridState, w: ScoredWindows) -> None:
    """Coverage measured on the windows that calibrated the intervals is at least the level by
    construction: warn when a backtest window starts before the end of its series' calibration."""
    until = state.calibration.until
    if until is None:
        return
    known = state.known(w.panel)[w.series]
    overlap = (known >= 0) & (w.panel.times[w.origins] < until[np.maximum(known, 0)])
    if not overlap.any():
        return
    i = int(np.flatnonzero(overlap)[0])
    warnings.warn(
        f"backtest: {int(overlap.sum())} of {len(w.origins)} windows (series "
        f"{listing(dict.fromkeys(w.panel.ids[w.series[overlap]]))}) overlap the windows calibrate scored (e.g. "
        f"{w.panel.ids[w.series[i]]!r} after cutoff {w.panel.stamp(w.panel.times[w.origins[i]])}, while its "
        f"calibration ran to {w.panel.stamp(until[known[i]])}): there the intervals cover at least their level by "
        "construction, so coverage-* is no estimate. Measure it on windows after the calibration ones",
        UserWarning, stacklevel=user_stacklevel())


def window_cutoffs(panel, windows: Windows, horizon: int, n_windows: int, step: int | None) -> np.ndarray:
    """(S, n_windows) cutoffs in nominal steps from each series' first observation, ``step`` apart,
    the last ``horizon`` steps before its last observation."""
    n_windows = positive_int("n_windows", n_windows)
    step = horizon if step is None else positive_int("step", step)
    span = windows.steps[panel.last_rows]
    need = horizon + (n_windows - 1) * step
    short = np.flatnonzero(span < need - EPS)
    if len(short):
        raise ValueError(f"series {panel.ids[short[0]]!r} spans {span[short[0]] + 1:g} nominal steps; {n_windows} "
                         f"window(s) {step} steps apart need at least horizon + (n_windows - 1) * step + 1 = "
                         f"{need + 1} "
                         f"({len(short)} series too short): use fewer windows or a smaller step")
    return span[:, None] - horizon - (n_windows - 1 - np.arange(n_windows))[None, :] * step


def score_windows(state: GridState, panel, windows: Windows, cutoffs: np.ndarray, what: str,
                  in_sample: str) -> ScoredWindows:
    """Forecast and match the windows at ``cutoffs`` (S, K): the origin is each series' last
    observation at or before a cutoff; cutoffs sharing an origin give one window."""
    origins, series = [], []
    for i, (b, e) in enumerate(zip(panel.bounds[:-1], panel.bounds[1:])):
        rows = np.unique(b + np.searchsorted(windows.steps[b:e], cutoffs[i] + EPS, side="right") - 1)
        origins.append(rows)
        series.append(np.full(len(rows), i))
    origins, series = np.concatenate(origins), np.concatenate(series)
    held_out = float(windows.steps[panel.last_rows[0]] - cutoffs[0, 0])  # horizon + (n_windows - 1) * step
    _warn_in_sample(state, panel, windows, origins, series, held_out, what, in_sample)

    state.warn_short_history(windows, origins, panel, series)
    state.check_history(windows, panel.values, origins, panel, series)  # counts observations: unscaled values do
    predicted, std = _forecasts(state, panel, windows, origins, series)
    actual, matched = windows.targets(panel.values, origins)
    return ScoredWindows(panel, origins, series, predicted, std, actual, matched)


def warn_unscored(state: GridState, w: ScoredWindows, what: str) -> None:
    """Scores of n = 0 are NaN, easy to miss in a table: say which targets nothing scored, and why.
    Called once on all the windows of a call (a refit fold alone may have none of a target)."""
    panel = w.panel
    none = [name for c, name in enumerate(state.spec.target_cols) if not w.matched[:, :, c].any()]
    if none:
        warnings.warn(
            f"{what}: no forecast of {', '.join(map(repr, none))} could be scored (n = 0, its scores are NaN): no "
            f"forecast time cutoff + k * {describe(state.freq, panel.time_kind)}, k = 1..{state.horizon}, has an "
            "observation of it. Check that the data is spaced like the data the model was fitted on",
            UserWarning, stacklevel=user_stacklevel())


def backtest_result(state: GridState, w: ScoredWindows, intervals: tuple | None = None,
                    season_length: int | None = None) -> BacktestResult:
    """The scored windows ``w`` as frames, beside the persistence forecast (and the seasonal naive
    one, given ``season_length``)."""
    times = future_times(w.panel.times[w.origins], state.freq, state.horizon)
    baselines = {"naive": _naive(w.panel, w.origins, state.horizon)}
    if season_length is not None:
        baselines["snaive"] = _seasonal_naive(w.panel, series_steps(w.panel, state.freq), w.origins, w.series,
                                              state.horizon, int(season_length))
        _warn_short_seasons(w, baselines["snaive"], int(season_length))
    return _result(state.spec, w, times, baselines, intervals)


def _warn_short_seasons(w: ScoredWindows, snaive: np.ndarray, season_length: int) -> None:
    """The seasonal naive forecast needs a season of history; where a series lacks it, its scores
    average over fewer points than the model's (``snaive_n``), or are NaN: say so."""
    missing = int((w.matched & np.isnan(snaive)).sum())
    if missing:
        short = dict.fromkeys(w.panel.ids[w.series[(w.matched & np.isnan(snaive)).any((1, 2))]])
        warnings.warn(
            f"season_length={season_length}: {missing} of {int(w.matched.sum())} scored points have no observation "
            f"a season earlier in their series (series {listing(short)}), so snaive_mse and snaive_mae average over "
            "fewer points than the model's (snaive_n against n), and are NaN where none is left",
            UserWarning, stacklevel=user_stacklevel())


def _observed_so_far(panel) -> np.ndarray:
    """Each row's values with every target's gaps filled by its last observation, never across series."""
    return pd.DataFrame(panel.values).groupby(panel.codes).ffill().to_numpy()


def _naive(panel, origins: np.ndarray, horizon: int) -> np.ndarray:
    """The persistence forecast (W, H, C): each target's last observation at or before the origin,
    held over the horizon. The bar a model must clear to be worth its training."""
    return np.repeat(_observed_so_far(panel)[origins][:, None, :], horizon, axis=1)


def _seasonal_naive(panel, steps: np.ndarray, origins: np.ndarray, series: np.ndarray, horizon: int,
                    m: int) -> np.ndarray:
    """The seasonal naive forecast (W, H, C): slot k repeats the last observation at or before
    k - m * ceil(k / m) nominal steps from the origin, the same phase of the latest season the history
    holds; NaN where the series has no observation that early. The bar for data with a cycle, which
    persistence sets far too low."""
    k = np.arange(1, horizon + 1)
    back = steps[origins][:, None] + (k - m * np.ceil(k / m))[None, :]  # (W, H) series steps, <= origin's
    rows = np.empty(back.shape, dtype=np.int64)
    for s in np.unique(series):
        sel = series == s
        b, e = panel.bounds[s], panel.bounds[s + 1]
        rows[sel] = b + np.searchsorted(steps[b:e], back[sel] + EPS, side="right") - 1
    before = rows < panel.bounds[series][:, None]  # earlier than the series' first observation
    values = _observed_so_far(panel)[np.maximum(rows, 0)]
    return np.where(before[:, :, None], np.nan, values)


def _warn_in_sample(state: GridState, panel, windows: Windows, origins: np.ndarray, series: np.ndarray, held_out: float,
                    what: str, consequence: str) -> None:
    """Warn when a window of a series known from fit scores targets at or before the end of that
    series' training data (its last observation in fit, the end of ``context_``, saved with it)."""
    known = state.known(panel)[series]
    until = state.training_end()[np.maximum(known, 0)]
    lo, hi = windows.tgt_lo[origins], windows.tgt_hi[origins]
    seen = (known >= 0) & (hi > lo) & (panel.times[np.minimum(lo, len(panel.times) - 1)] <= until)
    if not seen.any():
        return
    w = int(np.flatnonzero(seen)[0])
    names = listing(dict.fromkeys(panel.ids[series[seen]]))

    warnings.warn(
        f"{what}: {int(seen.sum())} of {len(origins)} windows (series {names}) "
        f"score targets the model was trained on (e.g. {panel.ids[series[w]]!r} after cutoff "
        f"{panel.stamp(panel.times[origins[w]])}, while fit saw it up to {panel.stamp(until[w])}), so {consequence}; "
        "if fit had no val_size, these series' scalers were fitted on those values "
        "too. For honest scores, fit on the data up to the first cutoff, e.g. without the last "
        "horizon + (n_windows - 1) * step = "
        f"{held_out:g} nominal steps of each series, then {what} on the full frame",
        UserWarning, stacklevel=user_stacklevel())


def _forecasts(state: GridState, panel, windows: Windows, origins: np.ndarray,
               series: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Forecasts (W, H, C) in original units, each from the history up to its origin, and the std
    (W, C) each window was scaled by.

    A series unseen in fit is standardised by its own statistics, fitted per window on the rows up to
    that window's origin: exactly what ``predict`` on that history does. Statistics of the whole frame
    would let the values being scored shape their own forecasts (and those of the earliest cutoff
    alone would make later windows differ from ``predict``). Windows are grouped by their rank within
    their series, one scaler per rank, so the cost is ``n_windows`` passes over the rows, not one per
    window. Known series use their training statistics, so they need a single group.
    """
    new = np.array([sid not in state.series for sid in panel.ids], dtype=bool)
    rank = np.arange(len(origins)) - np.searchsorted(series, series)  # origins are sorted by series, then row
    if not new[series].any():
        rank = np.zeros_like(rank)
    out = np.empty((len(origins), state.horizon, panel.values.shape[1]))
    std = np.empty((len(origins), panel.values.shape[1]))
    for r in np.unique(rank):
        sel = np.flatnonzero(rank == r)
        upto = panel.last_rows.copy()
        upto[series[sel]] = origins[sel]
        scaler = state.scaler_for(panel, upto)
        values = scaler.transform(panel.values, panel.bounds)
        scaled = state.forecast(windows.batch(values, origins[sel], with_targets=False))
        out[sel] = scaler.inverse(scaled, series[sel])
        std[sel] = scaler.std[series[sel]]
    return out, std


def _result(spec, w: ScoredWindows, times: np.ndarray, baselines: dict[str, np.ndarray],
            intervals: tuple | None) -> BacktestResult:
    panel, origins, series, actual, matched, predicted = w.panel, w.origins, w.series, w.actual, w.matched, w.predicted
    W, H, C = predicted.shape

    def as_pandas(t):
        return native_to_pandas(t, panel.time_kind, panel.tz, panel.time_dtype)

    time_name = spec.time_col or spec.index_name or "ds"
    keys = {"cutoff": as_pandas(panel.times[np.repeat(origins, H)]), time_name: as_pandas(times.reshape(-1))}
    if spec.kind == "long":
        keys = {spec.id_col: id_column(panel.ids[np.repeat(series, H)], panel.id_dtype), **keys}
    data = {}
    for c, name in enumerate(spec.target_cols):
        data[name] = actual[:, :, c].reshape(-1)
        data[f"{name}_forecast"] = predicted[:, :, c].reshape(-1)
        data.update(interval_columns(f"{name}_forecast", intervals, c))
    forecasts = pd.DataFrame({**keys, **data})

    err = np.where(matched, predicted - np.nan_to_num(actual), 0.0)
    n = matched.sum(1)  # (W, C)
    total = n.sum(0)
    baseline_errors = {}  # name -> (errors, points scored): where the baseline has a value
    for name, forecast in baselines.items():
        scored = matched & np.isfinite(forecast)
        baseline_errors[name] = (np.where(scored, np.nan_to_num(forecast) - np.nan_to_num(actual), 0.0), scored)

    def scores(axis, count) -> dict[str, np.ndarray]:
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {"mse": (err**2).sum(axis) / count, "mae": np.abs(err).sum(axis) / count}
            for name, (e, scored) in baseline_errors.items():
                points = scored.sum(axis)
                out[f"{name}_mse"], out[f"{name}_mae"] = (e**2).sum(axis) / points, np.abs(e).sum(axis) / points
                if name != "naive":  # persistence always has a value where the model is scored
                    out[f"{name}_n"] = points
            if intervals is not None:
                levels, lo, hi = intervals
                for i, level in enumerate(levels):
                    inside = matched & (lo[i] <= actual) & (actual <= hi[i])
                    out[f"coverage-{level_name(level)}"] = inside.sum(axis) / count
                    out[f"width-{level_name(level)}"] = np.where(matched, hi[i] - lo[i], 0.0).sum(axis) / count
            return out

    rows = {"cutoff": as_pandas(panel.times[np.repeat(origins, C)]), "target": np.tile(list(spec.target_cols), W),
            **{k: v.reshape(-1) for k, v in scores(1, n).items()}, "n": n.reshape(-1)}
    if spec.kind == "long":
        rows = {spec.id_col: id_column(panel.ids[np.repeat(series, C)], panel.id_dtype), **rows}
    overall = pd.DataFrame({**scores((0, 1), total), "n": total}, index=pd.Index(list(spec.target_cols), name="target"))
    return BacktestResult(forecasts, pd.DataFrame(rows), overall)
