"""Figures of the asynchronous route: one series, one panel per variable, with its history, the
forecasts at the queried times (with their intervals) and the actual values.

``forecast`` is ``predict(at=...)``'s answer (either form) or a backtest's ``forecasts`` frame (long
form, actual values in the value column and forecasts in ``<value>_forecast``). Actual values are the
backtest's, or the observations of ``history`` after the forecast origin (the history's last time
before the first forecast). Observed points are markers joined by lines, so gaps stay visible.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .forecast_errors import listing
from .plotting import _series_index, interval_levels
from .query_frames import Observations, read_observations
from .query_state import QueryState

MAX_PANELS = 12


def plot_queries(state: QueryState, history: pd.DataFrame | None, forecast: pd.DataFrame, id=None,
                 variables: list | None = None) -> Figure:
    """One series' history, forecasts and actual values, a panel per variable (``variables``, default
    the variables forecast for it, at most ``MAX_PANELS``)."""
    spec = state.spec
    backtest = f"{spec.value_col}_forecast" in getattr(forecast, "columns", [])
    if backtest:
        pred = _read(forecast, replace(spec, form="long"), f"{spec.value_col}_forecast", "forecast")
        actual = _read(forecast, replace(spec, form="long"), spec.value_col, "forecast")
    else:
        pred = _read(forecast, spec, None, "forecast")
    if spec.id_col is None:
        if id is not None:
            raise ValueError(f"id={id!r} selects a series, but this forecaster reads frames of one series (no id "
                             "column): call plot without id")
        p = 0
    else:
        if id is None:
            if len(pred.ids) != 1:
                raise ValueError(f"the forecast holds {len(pred.ids)} series; choose one with id=... "
                                 f"({listing(pred.ids)})")
            id = pred.ids[0]
        p = _series_index(pred, id, "forecast")
    p_rows = slice(pred.offsets[p], pred.offsets[p + 1])
    first_forecast = pred.times[p_rows].min() if p_rows.stop > p_rows.start else None
    hist = None
    if history is not None:
        obs = state.read(history, "history")
        hist = obs.take(np.array([_series_index(obs, id, "history")])) if spec.id_col is not None else obs
    if backtest:
        a = _series_index(actual, id, "forecast") if spec.id_col is not None else 0
        actual = actual.take(np.array([a]))
    elif hist is not None and first_forecast is not None:
        actual = hist.select(hist.times >= first_forecast)
        hist = hist.select(hist.times < first_forecast)
    else:
        actual = None
    shown = _variables(state, pred, p_rows, variables)
    if backtest:  # each window's cutoff
        rows = forecast if spec.id_col is None else forecast[forecast[spec.id_col] == id]
        cutoffs = list(pd.unique(rows["cutoff"]))
    elif hist is not None and len(hist.times):  # where the history ends
        cutoffs = [pred.as_pandas(np.array([hist.times.max()]))[0]]
    else:
        cutoffs = []
    names = spec.variables
    fig = Figure(figsize=(10, 2.0 * len(shown) + 0.8), layout="constrained")
    axes = fig.subplots(len(shown), 1, sharex=True, squeeze=False)[:, 0]
    levels = interval_levels(forecast.columns, f"{spec.value_col}_forecast" if backtest else
                             (spec.value_col if spec.form_of(forecast) == "long" else names[shown[0]]))
    for ax, c in zip(axes, shown):
        if hist is not None:
            _draw(ax, hist, c, ".-", "tab:blue", "history")
        if actual is not None:
            _draw(ax, actual, c, "x", "black", "actual")
        sel = pred.variable[p_rows] == c
        t = pred.as_pandas(pred.times[p_rows][sel])
        ax.plot(t, pred.values[p_rows][sel], "o", ms=4, color="tab:orange", label="forecast")
        _draw_intervals(ax, forecast, state, levels, backtest, id, c)
        for cutoff in cutoffs:
            ax.axvline(cutoff, ls=":", color="grey", lw=0.8)
        ax.set_ylabel(str(names[c]))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize="small")
    what = f"backtest, {len(cutoffs)} window(s)" if backtest else "forecasts at the queried times"
    fig.suptitle(("" if id is None else f"{id}: ") + f"{what} ({type(state.model).__name__})")
    return fig


def _read(frame: pd.DataFrame, spec, value_col: str | None, what: str) -> Observations:
    """A forecast frame as observations (``value_col``: which column holds the values, long form)."""
    if value_col is not None:
        spec = replace(spec, value_col=value_col)
    return read_observations(frame, spec, what, duplicates="mean")[1]


def _variables(state: QueryState, pred: Observations, rows: slice, chosen: list | None) -> list[int]:
    names = state.spec.variables
    if chosen is not None:
        unknown = [v for v in chosen if v not in names]
        if unknown or not chosen:
            raise ValueError(f"variables must name some of the forecaster's variables; unknown: {listing(unknown)}; "
                             f"known: {listing(names, 12)}")
        return [names.index(v) for v in chosen]
    forecast = list(dict.fromkeys(pred.variable[rows].tolist()))
    if not forecast:
        raise ValueError("the forecast holds no value for this series")
    return sorted(forecast)[:MAX_PANELS]


def _draw(ax, obs: Observations, c: int, style: str, colour: str, label: str) -> None:
    sel = obs.variable == c
    if sel.any():
        ax.plot(obs.as_pandas(obs.times[sel]), obs.values[sel], style, lw=0.8, ms=4, color=colour, label=label)


def _draw_intervals(ax, forecast: pd.DataFrame, state: QueryState, levels: list[str], backtest: bool, id,
                    c: int) -> None:
    """Error bars of each level's interval at the forecast times of variable ``c``."""
    spec = state.spec
    if not levels:
        return
    rows = forecast
    if spec.id_col is not None:
        rows = rows[rows[spec.id_col] == id]
    long = backtest or spec.form_of(forecast) == "long"
    column = f"{spec.value_col}_forecast" if backtest else (spec.value_col if long else spec.variables[c])
    if long:
        rows = rows[rows[spec.variable_col] == spec.variables[c]]
    rows = rows.sort_values(spec.time_col)
    for i, level in enumerate(levels):
        lo, hi = rows[f"{column}-lo-{level}"].to_numpy(), rows[f"{column}-hi-{level}"].to_numpy()
        ax.vlines(pd.to_datetime(rows[spec.time_col]) if not np.issubdtype(rows[spec.time_col].dtype, np.number)
                  else rows[spec.time_col], lo, hi, color="tab:orange", alpha=0.25 + 0.15 * i, lw=3,
                  label=f"{level} % interval")
