"""Cross-validation: fit the forecaster's configuration on the data before the backtest windows, then
score them.

``backtest`` scores a forecaster as it was fitted, so an honest score needs a fit on the data before
the first cutoff; this makes that split itself, so no window can score data its model trained on.
``refit=False`` fits once, on each series' data up to its first cutoff, and forecasts every window
(neuralforecast's ``cross_validation(refit=False)``). ``refit=True`` fits again for every window, on
the data up to that window's cutoff: the expanding-window evaluation, at ``n_windows`` times the cost.
Every fit uses a fresh forecaster with the same arguments and the nominal step of the whole frame;
the forecaster it is called on is left as it was.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .backtest import BacktestResult, ScoredWindows, backtest_result, score_windows, window_cutoffs
from .timing import describe
from .windows import EPS

IN_SAMPLE = "their errors are in-sample and optimistic"  # cannot happen: each fit ends at its first cutoff


def run_cross_validation(f, df: pd.DataFrame, n_windows: int, step: int | None, refit: bool, id_col: str | None,
                         time_col: str | None, target_cols, val_size: int | None) -> BacktestResult:
    if not isinstance(refit, (bool, np.bool_)):
        raise ValueError(f"refit must be True (a fit per window) or False (one fit before the first window), "
                         f"got {refit!r}")
    f._check_val_size(val_size)
    spec, panel, freq = f._read_training(df, id_col, time_col, target_cols)
    windows = f._windows(panel, freq)
    cutoffs = window_cutoffs(panel, windows, f.horizon, n_windows, step)
    _check_training_span(f, panel, windows, cutoffs, freq, val_size)
    folds = [(i, cutoffs[:, i : i + 1]) for i in range(cutoffs.shape[1])] if refit else [(0, cutoffs)]
    parts = []
    for first, scored in folds:
        model = type(f)(**f.init_args)
        model._fit_panel(spec, panel.take(windows.steps <= cutoffs[:, first][panel.codes] + EPS), freq, val_size)
        parts.append(score_windows(model, panel, windows, scored, "cross_validation", IN_SAMPLE))
    return backtest_result(model, _merge(parts))


def _check_training_span(f, panel, windows, cutoffs: np.ndarray, freq, val_size: int | None) -> None:
    """Each series must leave enough history before its first cutoff to train on: said in terms of
    the windows, which is what the user chose, rather than as a too-short series."""
    need = f.lookback + f.horizon + (val_size or 0)
    kept = cutoffs[:, 0] + 1  # nominal steps from the first observation to the first cutoff
    short = np.flatnonzero(kept < need - 0.5)
    if not len(short):
        return
    held_out = float(windows.steps[panel.last_rows[short[0]]] - cutoffs[short[0], 0])
    extra = f" + val_size {val_size}" if val_size else ""
    raise ValueError(
        f"cross_validation trains on each series up to its first cutoff, horizon + (n_windows - 1) * step = "
        f"{held_out:g} nominal steps of {describe(freq, panel.time_kind)} before its last observation; "
        f"series {panel.ids[short[0]]!r} keeps {kept[short[0]]:g} steps there ({len(short)} series too short), "
        f"fewer than lookback {f.lookback} + horizon {f.horizon}{extra} = {need} needed to train: use fewer "
        "windows, a smaller step or a shorter lookback" + (" or val_size" if val_size else ""))


def _merge(parts: list[ScoredWindows]) -> ScoredWindows:
    """One set of windows, ordered by series and origin; an origin scored by two folds (two cutoffs in
    one gap of an irregular series, so the same training data) is kept once."""
    if len(parts) == 1:
        return parts[0]
    fields = ("origins", "series", "predicted", "std", "actual", "matched")
    joined = {name: np.concatenate([getattr(p, name) for p in parts]) for name in fields}
    _, first = np.unique(np.stack([joined["series"], joined["origins"]]), axis=1, return_index=True)
    order = first[np.lexsort((joined["origins"][first], joined["series"][first]))]
    return ScoredWindows(parts[0].panel, **{name: value[order] for name, value in joined.items()})
