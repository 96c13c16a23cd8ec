"""Cross-validation: fit the forecaster's configuration on the data before the backtest windows, then
score them.

``backtest`` scores a forecaster as it was fitted, so an honest score needs a fit on the data before
the first cutoff; this makes that split itself, so no window can score data its model trained on.
``refit=False`` fits once, on each series' data up to its first cutoff, and forecasts every window
(neuralforecast's ``cross_validation(refit=False)``). ``refit=True`` fits again for every window, on
the data up to that window's cutoff: the expanding-window evaluation, at ``n_windows`` times the cost.
Cutoffs count back from each series' own last observation, as in ``backtest`` (and neuralforecast).
Every fit trains a fresh model with the forecaster's settings and the nominal step of the whole
frame; the forecaster it is called on is left as it was. Callback and logger objects passed to it are the
same objects in every fold, as in repeated ``fit`` calls: a recording callback sees every fold, and
a stateful one that Lightning does not reset (a user's own ``EarlyStopping``) carries its state over.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pandas as pd

from .backtest import (BacktestResult, ScoredWindows, backtest_result, calibration_from, check_season_length,
                       score_windows, warn_unscored, window_cutoffs)
from .frames import FrameSpec, Panel
from .grid_fit import GridFit
from .intervals import Calibration
from .steps import describe
from ..data.windows import EPS, Windows

IN_SAMPLE = "their errors are in-sample and optimistic"  # cannot happen: each fit ends at its first cutoff


def run_cross_validation(fit: GridFit, df: pd.DataFrame, n_windows: int, step: int | None, refit: bool,
                         id_col: str | None, time_col: str | None, target_cols: str | list[str] | None,
                         val_size: int | None, season_length: int | None = None) -> BacktestResult:
    """``Forecaster.cross_validation``: fresh models with the settings ``fit`` fitted up to the first
    cutoff (or each window's, with ``refit``), scored on the ``backtest`` windows of ``df``."""
    if not isinstance(refit, (bool, np.bool_)):
        raise ValueError(f"refit must be True (a fit per window) or False (one fit before the first window), "
                         f"got {refit!r}")
    fit.check_val_size(val_size)
    check_season_length(season_length)
    spec, panel, freq = fit.read_training(df, id_col, time_col, target_cols)
    windows = fit.windows(panel, freq)
    cutoffs = window_cutoffs(panel, windows, fit.horizon, n_windows, step)
    _check_training_span(fit, panel, windows, cutoffs, freq, val_size)
    folds = [(i, cutoffs[:, i : i + 1]) for i in range(cutoffs.shape[1])] if refit else [(0, cutoffs)]
    parts = []
    for first, scored in folds:
        state = fit.fit(spec, panel.take(windows.steps <= cutoffs[:, first][panel.codes] + EPS), freq, val_size).state
        parts.append(score_windows(state, panel, windows, scored, "cross_validation", IN_SAMPLE))
    merged = _merge(parts)
    warn_unscored(state, merged, "cross_validation")
    return backtest_result(state, merged, season_length=season_length)


def held_out_calibration(fit: GridFit, spec: FrameSpec, panel: Panel, freq: float | int, n_windows: int,
                         step: int | None, val_size: int | None) -> Calibration:
    """Conformal scores for ``fit(calibration_windows=...)``: a fresh model fitted on each series up to
    its first cutoff scores the last ``n_windows`` backtest windows, which it never saw
    (neuralforecast's conformal intervals work the same way)."""
    windows = fit.windows(panel, freq)
    cutoffs = window_cutoffs(panel, windows, fit.horizon, n_windows, step)
    _check_training_span(fit, panel, windows, cutoffs, freq, val_size, "fit(calibration_windows=...)")
    state = fit.fit(spec, panel.take(windows.steps <= cutoffs[:, 0][panel.codes] + EPS), freq, val_size).state
    w = score_windows(state, panel, windows, cutoffs, "calibration", IN_SAMPLE)
    warn_unscored(state, w, "fit(calibration_windows=...)")
    return calibration_from(state, panel, w)


def _check_training_span(f: GridFit, panel, windows: Windows, cutoffs: np.ndarray, freq: float,
                         val_size: int | None, who: str = "cross_validation") -> None:
    """Each series must keep enough history before its first cutoff to train on: said in terms of
    the windows, which the user chose, rather than as a too-short series."""
    need = f.lookback + f.horizon + (val_size or 0)
    bounds = zip(panel.bounds[:-1], panel.bounds[1:])
    last = np.array([b + np.searchsorted(windows.steps[b:e], c + EPS, side="right") - 1
                     for (b, e), c in zip(bounds, cutoffs[:, 0])])
    kept = windows.steps[last] + 1  # nominal steps from the first observation to the last one kept
    short = np.flatnonzero(kept < need - 0.5)
    if not len(short):
        return
    s = short[0]
    held_out = float(windows.steps[panel.last_rows[s]] - cutoffs[s, 0])
    extra = f" + val_size {val_size}" if val_size else ""
    raise ValueError(
        f"{who} trains on each series up to its first cutoff, horizon + (n_windows - 1) * step = "
        f"{held_out:g} nominal steps of {describe(freq, panel.time_kind)} before its last observation; "
        f"series {panel.ids[s]!r} keeps {kept[s]:g} steps there ({len(short)} series too short), "
        f"fewer than lookback {f.lookback} + horizon {f.horizon}{extra} = {need} needed to train: use fewer "
        "windows, a smaller step or a shorter lookback" + (" or a smaller val_size" if val_size else ""))


def _merge(parts: list[ScoredWindows]) -> ScoredWindows:
    """One set of windows, ordered by series and origin. Two cutoffs in one gap of an irregular series
    share an origin: the earlier fold's forecast is kept (both are honest; the later fold trained on
    more of the other series)."""
    if len(parts) == 1:
        return parts[0]
    names = [field.name for field in fields(ScoredWindows) if field.name != "panel"]
    joined = {name: np.concatenate([getattr(p, name) for p in parts]) for name in names}
    _, first = np.unique(np.stack([joined["series"], joined["origins"]]), axis=1, return_index=True)  # sorted
    return ScoredWindows(parts[0].panel, **{name: value[first] for name, value in joined.items()})
