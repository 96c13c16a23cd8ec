"""Figures: one series' recent history and its forecast (one panel per target), and the learning curve.

Observed points are drawn as markers joined by lines, so irregular spacing and gaps stay visible.
Prediction intervals in the frames (``<column>-lo-<L>``/``-hi-<L>``) are drawn as shaded bands.
Built on ``matplotlib.figure.Figure`` (no pyplot state), so it works on any backend, headless too.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure

from ..training.learning_curve import plot_learning_curve as draw_learning_curve
from .backtest import BacktestResult
from .forecast_errors import did_you_mean, listing, positive_int
from .frames import read_panel
from .grid_state import GridState
from .native_times import native_to_pandas


def plot_forecast(state: GridState, history: pd.DataFrame, forecast: pd.DataFrame, id=None,
                  history_steps: int | None = None) -> Figure:
    """History (the last ``history_steps`` nominal steps, default ``lookback``) and forecast of series ``id``."""
    steps = state.lookback if history_steps is None else positive_int("history_steps", history_steps)
    _refuse_backtest(forecast, state.spec)
    if state.spec.kind == "wide" and id is not None:
        raise ValueError(f"id={id!r} selects a series of a long frame, but this forecaster was fitted on a wide "
                         "frame (one series, no ids): call plot without id")
    hist = read_panel(history, state.spec, "history")
    pred = read_panel(forecast, state.spec, "forecast")
    if state.spec.kind == "long" and id is None:
        if pred.n_series != 1:
            raise ValueError(f"the forecast holds {pred.n_series} series; choose one with id=... ({listing(pred.ids)})")
        id = pred.ids[0]
    h, p = _series_index(hist, id, "history"), _series_index(pred, id, "forecast")
    h_rows, p_rows = slice(*hist.bounds[h : h + 2]), slice(*pred.bounds[p : p + 2])
    h_times = hist.times[h_rows]
    recent = h_times > h_times[-1] - steps * (state.freq if hist.time_kind == "numeric" else np.int64(state.freq))

    def as_pandas(panel, times):
        return native_to_pandas(times, panel.time_kind, panel.tz, panel.time_dtype)

    h_t, h_v = as_pandas(hist, h_times[recent]), hist.values[h_rows][recent]
    p_t, p_v = as_pandas(pred, pred.times[p_rows]), pred.values[p_rows]
    targets = state.spec.target_cols
    fig = Figure(figsize=(10, 2.4 * len(targets) + 0.6), layout="constrained")
    axes = fig.subplots(len(targets), 1, sharex=True, squeeze=False)[:, 0]
    for c, (ax, name) in enumerate(zip(axes, targets)):
        seen = ~np.isnan(h_v[:, c])
        ax.plot(h_t[seen], h_v[seen, c], ".-", lw=0.8, ms=3, color="tab:blue", label="history (observed)")
        levels = interval_levels(forecast.columns, name)
        if levels:
            edges = tuple(f"{name}-{side}-{lv}" for lv in levels for side in ("lo", "hi"))
            spec = replace(state.spec, target_cols=edges)
            band = read_panel(forecast, spec, "forecast")
            b = _series_index(band, id, "forecast")
            draw_bands(ax, p_t, band.values[slice(*band.bounds[b : b + 2])], levels, "tab:orange")
        ax.plot(p_t, p_v[:, c], "-", lw=1.4, color="tab:orange", label="forecast")
        ax.axvline(h_t[-1], ls=":", color="grey", lw=0.8)
        ax.set_ylabel(str(name))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize="small")
    fig.suptitle(("" if id is None else f"{id}: ") + f"{state.horizon}-step forecast ({_attention(state)})")
    return fig


def plot_backtest(state: GridState, result, id=None) -> Figure:
    """Every backtest window's forecast of series ``id`` over the actual values, one panel per target
    with its MSE/MAE over the matched points: where the forecasts go wrong, not only by how much."""
    spec = state.spec
    forecasts = result.forecasts if isinstance(result, BacktestResult) else result
    time = spec.time_col or spec.index_name or "ds"
    targets = list(spec.target_cols)
    need = [spec.id_col] if spec.kind == "long" else []
    need += ["cutoff", time, *targets, *(f"{t}_forecast" for t in targets)]
    missing = [c for c in need if c not in getattr(forecasts, "columns", [])]
    if missing:
        hint = "; for predict()'s output use plot()" if "cutoff" in missing else ""
        raise ValueError(f"plot_backtest draws backtest()'s output (a BacktestResult or its forecasts), but this has "
                         f"no column {listing(missing)}{hint}")
    if spec.kind == "wide":
        if id is not None:
            raise ValueError(f"id={id!r} selects a series of a long frame, but this forecaster was fitted on a wide "
                             "frame (one series, no ids): call plot_backtest without id")
        rows = forecasts
    else:
        ids = list(dict.fromkeys(forecasts[spec.id_col]))
        if id is None:
            if len(ids) != 1:
                raise ValueError(f"the backtest holds {len(ids)} series; choose one with id=... ({listing(ids)})")
            id = ids[0]
        if not any(i == id for i in ids):
            raise ValueError(f"series {id!r} is not in the backtest{_id_hint(id, ids)}; series there: {listing(ids)}")
        rows = forecasts[forecasts[spec.id_col] == id]
    windows = list(rows.groupby("cutoff", sort=True))
    colours = colormaps["plasma"](np.linspace(0.0, 0.85, len(windows)))  # one per cutoff, none near black
    fig = Figure(figsize=(10, 2.4 * len(targets) + 0.6), layout="constrained")
    axes = fig.subplots(len(targets), 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, targets):
        actual = rows.groupby(time, sort=True)[name].first().dropna()  # overlapping windows repeat a value
        ax.plot(actual.index, actual.to_numpy(), ".-", lw=0.8, ms=3, color="black", alpha=0.7, label="actual")
        levels = interval_levels(rows.columns, f"{name}_forecast")
        for (cutoff, window), colour in zip(windows, colours):
            if levels:
                edges = [f"{name}_forecast-{side}-{lv}" for lv in levels for side in ("lo", "hi")]
                draw_bands(ax, window[time], window[edges].to_numpy(), levels, colour, label=cutoff == windows[0][0])
            ax.plot(window[time], window[f"{name}_forecast"], "-", lw=1.3, color=colour)
            ax.axvline(cutoff, ls=":", lw=0.8, color=colour)
        matched = rows.dropna(subset=[name])
        err = matched[f"{name}_forecast"] - matched[name]
        covered = []
        for lv in levels:
            inside = matched[name].between(matched[f"{name}_forecast-lo-{lv}"], matched[f"{name}_forecast-hi-{lv}"])
            covered.append(f", {lv} % interval covers {float(inside.mean()):.0%}")
        ax.set_title(f"{name}: MSE {float((err ** 2).mean()):.4g}, MAE {float(err.abs().mean()):.4g}"
                     + "".join(covered) + f" over {len(matched)} matched points", fontsize="small", loc="left")
        ax.set_ylabel(str(name))
        ax.grid(alpha=0.3)
    axes[0].plot([], [], "-", color=colours[0], label="forecast (one colour per cutoff, dotted)")
    axes[0].legend(loc="upper left", fontsize="small")
    fig.suptitle(("" if spec.kind == "wide" else f"{id}: ") + f"backtest, {len(windows)} window(s) of "
                 f"{state.horizon} steps ({_attention(state)})")
    return fig


def interval_levels(columns, column: str) -> list[str]:
    """The levels (as written in the names) with both ``<column>-lo-<L>`` and ``-hi-<L>`` columns, widest first."""
    pattern = re.compile(re.escape(str(column)) + r"-lo-(.+)")
    found = [m.group(1) for m in map(pattern.fullmatch, map(str, columns)) if m]
    return sorted((lv for lv in found if f"{column}-hi-{lv}" in set(map(str, columns))), key=float, reverse=True)


def draw_bands(ax, times, edges: np.ndarray, levels: list[str], colour, label: bool = True) -> None:
    """Shade each level's interval; ``edges`` (T, 2L) holds lower and upper bounds per level, widest first."""
    for i, level in enumerate(levels):
        ax.fill_between(times, edges[:, 2 * i], edges[:, 2 * i + 1], color=colour, alpha=0.12 + 0.1 * i, lw=0,
                        label=f"{level} % interval" if label else None)


def plot_learning_curve(curve: pd.DataFrame | None, loss: str, title: str) -> Figure:
    """The learning curve drawn (training/learning_curve.py); a forecaster saved without one is refused."""
    if curve is None or curve.empty:
        raise ValueError("this forecaster has no learning curve: it was saved by a ts-continuum version that did "
                         "not keep one; fit it again to draw one")
    return draw_learning_curve(curve, loss, title)


def _attention(state) -> str:
    """The model's attention, for titles ("continuous attention")."""
    attention = getattr(state.model, "config", {}).get("attention")
    return f"{attention} attention" if attention else type(state.model).__name__


def _refuse_backtest(forecast, spec) -> None:
    """Backtest output holds actuals under the target names: plotted as a forecast they would mislead."""
    columns = forecast.forecasts.columns if isinstance(forecast, BacktestResult) else getattr(forecast, "columns", [])
    if "cutoff" in columns and all(f"{name}_forecast" in columns for name in spec.target_cols):
        raise ValueError("plot draws predict()'s output, but this is a backtest's (a 'cutoff' column, actuals in "
                         f"{listing(spec.target_cols)} and forecasts in '<target>_forecast'): draw it with "
                         "f.plot_backtest(result, id=...), or one window with its history by plotting the "
                         "forecast from the history up to its cutoff, e.g. "
                         "f.plot(df, f.predict(df[df[time] <= cutoff]), id=...)")


def _series_index(panel, id, what: str) -> int:
    matches = np.flatnonzero(np.array([sid == id for sid in panel.ids], dtype=bool))
    if not len(matches):
        raise ValueError(f"series {id!r} is not in the {what}{_id_hint(id, panel.ids)}; series there: "
                         f"{listing(panel.ids)}")
    return int(matches[0])


def _id_hint(id, ids) -> str:
    """" (did you mean ...?)": the same id of another type (e.g. "202" for the integer 202) or a close one."""
    same_text = [sid for sid in ids if str(sid) == str(id)]
    return (f" (did you mean {same_text[0]!r}, {_kind(same_text[0])}?)" if same_text
            else did_you_mean(id, map(str, ids)))


def _kind(value) -> str:
    if isinstance(value, (int, np.integer)):
        return "an int"
    return "a string" if isinstance(value, str) else f"a {type(value).__name__}"
