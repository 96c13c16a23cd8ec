"""Pairing the study's continuous and softmax runs.

A pair is one run of each attention that agree on everything else (model, positions, dataset,
horizon, regime, seed, and the rest of the recorded config: budget, sizes, learning rate); its
difference is continuous - softmax, summarised by ``benchmarks/paired_stats.py``. ``ReportError``
is the report's refusal of runs it cannot pair honestly (two runs of one pair, two pooled folders
of one name).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pandas as pd

SETTING = ["model", "pos_encoding", "dataset", "horizon", "regime"]


class ReportError(ValueError):
    """Recorded results that cannot be summarised as they are; the message says how to fix them."""


def check_unique_runs(df: pd.DataFrame) -> None:
    """Two runs of one (setting, seed, attention) would be averaged into one pair: refuse."""
    twice = df[df.duplicated(SETTING + ["seed", "attention"], keep=False)]
    if len(twice):
        raise ReportError(f"{len(twice)} finished runs share a setting, seed and attention with another "
                         f"(cells {sorted(twice['cell_id'].astype(str))[:6]}): a pair must be one run of "
                         "each attention; remove the extra rows from results.csv")


def _recipe(config: object) -> str:
    """A run's recorded config without its attention, block and seed: what its partner (same seed)
    must share, and what the seeds of one setting should. An optional setting left out counts as
    its default, as the runner reads it (a config recorded without limit_train_batches ran all
    batches, as one recorded with 1.0 did)."""
    from benchmarks.study.cell import OPTIONAL  # imports Lightning: only once configs are read

    try:
        cell = json.loads(config)
    except (TypeError, ValueError):  # rows written before configs were recorded
        return ""
    if not isinstance(cell, dict):
        return ""
    cell = {**OPTIONAL, **cell}
    return json.dumps({k: v for k, v in cell.items() if k not in ("attention", "block", "seed")}, sort_keys=True)


def with_recipe(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``recipe`` column, so that runs of one setting and seed pair only if they were
    run alike (a block at another budget would otherwise pair with the first one's runs)."""
    recipes = df["config"].map(_recipe) if "config" in df else pd.Series("", index=df.index)
    return df.assign(recipe=recipes)


def paired_runs(df: pd.DataFrame, columns: list[str]) -> Iterator[tuple[tuple, pd.Series, pd.Series]]:
    """Yield (setting + seed, softmax row, continuous row) for every run that has its partner."""
    runs = with_recipe(df).set_index(SETTING + ["seed", "recipe", "attention"])[columns]
    for key in sorted({k[:-1] for k in runs.index}, key=str):
        if key + ("softmax",) in runs.index and key + ("continuous",) in runs.index:
            yield key[:-1], runs.loc[key + ("softmax",)], runs.loc[key + ("continuous",)]


def pairs(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, seed) holding both attentions' test metrics; runs without their
    partner are left out (``unpaired`` names them)."""
    if set(df["attention"]) < {"softmax", "continuous"}:
        return pd.DataFrame()
    check_unique_runs(df)
    wide = with_recipe(df).pivot(index=SETTING + ["seed", "recipe"], columns="attention",
                                 values=["test_mse", "test_mae"])
    wide = wide.dropna()
    if wide.empty:
        return pd.DataFrame()
    out = pd.DataFrame(index=wide.index)
    for m in ("test_mse", "test_mae"):
        out[f"{m}_softmax"] = wide[(m, "softmax")]
        out[f"{m}_continuous"] = wide[(m, "continuous")]
        out[f"d_{m}"] = out[f"{m}_continuous"] - out[f"{m}_softmax"]
    return out.reset_index().drop(columns="recipe")


def unpaired(df: pd.DataFrame) -> list[str]:
    """Cell ids of finished runs left out of the paired statistics: no run of the other attention
    for the same setting and seed run alike (same recorded config), or a missing test metric on
    either side."""
    if set(df["attention"]) < {"softmax", "continuous"}:
        return []
    complete = with_recipe(df.dropna(subset=["test_mse", "test_mae"]))
    both = complete.groupby(SETTING + ["seed", "recipe"])["attention"].transform("nunique") == 2
    paired = set(complete.loc[both, "cell_id"])
    return sorted(c for c in df["cell_id"].astype(str) if c not in paired)


def with_test_curves(df: pd.DataFrame) -> pd.DataFrame:
    """Runs that recorded their test MSE after every epoch (cell.TestCurve; later cells only)."""
    if "test_curve" not in df:
        return df.iloc[:0]
    return df[df["test_curve"].astype(str).str.startswith("[")]  # NaN reads "nan"
