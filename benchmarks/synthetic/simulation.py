"""The synthetic control's data: smooth series thinned by a sampling, and the interpolated grid.

The design and why: ``benchmarks/results/synthetic_control_design.md``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SAMPLINGS = ("informative", "random", "complete")
OBSERVED = {"random": 0.55, "complete": 1.0}  # probability that a step is observed (informative: 0.9 / 0.2)
HORIZON, LOOKBACK, HELD_OUT, N_WINDOWS = 24, 48, 240, 10


def simulate(sampling: str, seed: int, n_series: int = 8, n_steps: int = 1500) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(observed rows, every simulated step) as long frames with columns unique_id, ds, y; the
    second also has ``crest`` (s(t) > 0)."""
    if sampling not in SAMPLINGS:
        raise ValueError(f"unknown sampling {sampling!r}; choose one of {', '.join(SAMPLINGS)}")
    rng = np.random.default_rng(seed)
    t = np.arange(n_steps, dtype=float)
    frames = []
    for i in range(n_series):
        p1, p2 = rng.uniform(300, 700), rng.uniform(120, 300)
        phase1, phase2, phase3 = rng.uniform(0, 2 * np.pi, 3)
        level = np.sin(2 * np.pi * t / p1 + phase1) + 0.7 * np.sin(2 * np.pi * t / p2 + phase2)
        cycle = np.sin(2 * np.pi * t / 24 + phase3)
        y = level + cycle + 0.1 * rng.standard_normal(n_steps)
        p = np.where(cycle > 0, 0.9, 0.2) if sampling == "informative" else np.full(n_steps, OBSERVED[sampling])
        observed = rng.random(n_steps) < p
        frames.append(pd.DataFrame({"unique_id": i, "ds": t, "y": y, "crest": cycle > 0, "observed": observed}))
    full = pd.concat(frames, ignore_index=True)
    return full.loc[full["observed"], ["unique_id", "ds", "y"]].reset_index(drop=True), full


def frame_on_grid(observed: pd.DataFrame) -> pd.DataFrame:
    """Each series' observations linearly interpolated onto every step from its first to its last
    observation: the conventional way to hand irregular data to a model built for regular steps."""
    parts = []
    for uid, g in observed.groupby("unique_id", sort=True):
        steps = np.arange(g["ds"].iloc[0], g["ds"].iloc[-1] + 1)
        parts.append(pd.DataFrame({"unique_id": uid, "ds": steps, "y": np.interp(steps, g["ds"], g["y"])}))
    return pd.concat(parts, ignore_index=True)


def window_origins(observed: pd.DataFrame) -> pd.DataFrame:
    """The forecast origins ``backtest(n_windows=N_WINDOWS, step=HORIZON)`` uses on ``observed``: per
    series, the last observation at or before each cutoff, the last cutoff HORIZON steps before the
    series' last observation (columns unique_id, rank, cutoff; a shared origin is listed once)."""
    rows = []
    for uid, g in observed.groupby("unique_id", sort=True):
        times = g["ds"].to_numpy()
        cutoffs = times[-1] - HORIZON - HORIZON * np.arange(N_WINDOWS - 1, -1, -1)
        origins = np.unique(times[np.searchsorted(times, cutoffs, side="right") - 1])
        rows += [dict(unique_id=uid, rank=k, cutoff=t) for k, t in enumerate(origins)]
    return pd.DataFrame(rows)


def grid_error(sampling: str, seed: int, n_series: int, n_steps: int) -> dict:
    """How far the interpolated grid lies from the simulated series at the steps it fills, in the
    cycle's troughs and on its crests (error = interpolated - simulated, noise included)."""
    observed, full = simulate(sampling, seed, n_series, n_steps)
    g = frame_on_grid(observed).merge(full, on=["unique_id", "ds"], suffixes=("_grid", ""))
    filled, err = ~g["observed"], g["y_grid"] - g["y"]
    out = dict(filled=float(filled.mean()), mse=float((err[filled] ** 2).mean()))
    for part, on_crest in (("trough", False), ("crest", True)):
        at = filled & (g["crest"] == on_crest)
        out[f"{part}_filled"] = float(at.sum() / (g["crest"] == on_crest).sum())
        out[f"{part}_bias"] = float(err[at].mean())
    return out
