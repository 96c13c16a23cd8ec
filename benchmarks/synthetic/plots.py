"""The synthetic control's figures: test MSE per run, validation curves, same-epoch gaps, and both
inputs side by side."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.synthetic.runs import ATTENTIONS  # noqa: E402
from benchmarks.synthetic.simulation import SAMPLINGS  # noqa: E402
from benchmarks.synthetic.summary import FILLED, present, validation_gaps  # noqa: E402


def save(fig, path: Path) -> None:
    """Write a figure and free it (one run of the script draws three)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

def write_gaps(rows: pd.DataFrame, path: Path) -> None:
    """The same-epoch validation gap of every pair: early-training lead or lasting one?"""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    colors = dict(zip(SAMPLINGS, ("tab:red", "tab:green", "tab:purple")))
    for (sampling, seed), g in sorted(validation_gaps(rows).items()):
        ax.plot(range(1, len(g) + 1), [100 * x for x in g], "-", color=colors[sampling], lw=1,
                label=sampling if seed == rows["seed"].min() else None)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation MSE, continuous / softmax - 1 (%)")
    ax.set_title("same-epoch gap of each pair (below 0: continuous attention ahead)", fontsize=9)
    ax.legend(fontsize=8)
    save(fig, path)

def write_plot(rows: pd.DataFrame, path: Path) -> None:
    samplings = present(rows)
    fig, axes = plt.subplots(1, 2, figsize=(4 + 2 * len(samplings), 3.4), sharey=True)
    for ax, metric in zip(axes, ("mse_all", "mse_observed")):
        for i, sampling in enumerate(samplings):
            for j, attention in enumerate(ATTENTIONS):
                v = rows[(rows["sampling"] == sampling) & (rows["attention"] == attention)][metric]
                x = i + (j - 0.5) * 0.3
                ax.bar(x, v.mean() if len(v) else 0, 0.28, color=("tab:blue", "tab:orange")[j],
                       label=attention if i == 0 else None)
                ax.plot([x] * len(v), v, "k.", ms=4)
        ax.set_xticks(range(len(samplings)), samplings)
        ax.set_title(metric, fontsize=9)
    axes[0].set_ylabel("test MSE (bars: mean; dots: seeds)")
    axes[0].legend(fontsize=8)
    save(fig, path)


def write_against_plot(rows: pd.DataFrame, other: pd.DataFrame, path: Path) -> None:
    """Test MSE of each attention on the observations and on the interpolated grid, per sampling: the
    four ways a practitioner could feed these series to the model, side by side."""
    samplings = present(rows)
    fig, ax = plt.subplots(figsize=(3 + 2.5 * len(samplings), 3.6))
    filled = FILLED[rows["input"].iloc[0]]
    kinds = [(other, "observed", "softmax"), (other, "observed", "continuous"), (rows, filled, "softmax"),
             (rows, filled, "continuous")]
    colors = ("tab:blue", "tab:orange", "lightsteelblue", "navajowhite")
    for i, sampling in enumerate(samplings):
        for j, ((frame, input_, attention), color) in enumerate(zip(kinds, colors)):
            v = frame[(frame["sampling"] == sampling) & (frame["attention"] == attention)]["mse_all"]
            x = i + (j - 1.5) * 0.2
            ax.bar(x, v.mean() if len(v) else 0, 0.19, color=color, edgecolor="grey",
                   label=f"{attention}, {input_}" if i == 0 else None)
            ax.plot([x] * len(v), v, "k.", ms=4)
    ax.set_xticks(range(len(samplings)), samplings)
    ax.set_ylabel("test MSE, every future step\n(bars: mean; dots: seeds)")
    ax.legend(fontsize=8)
    save(fig, path)


def write_curves(rows: pd.DataFrame, path: Path) -> None:
    """Validation MSE after every epoch, one line per run, a panel per sampling."""
    samplings = present(rows)
    fig, axes = plt.subplots(1, len(samplings), figsize=(4 * len(samplings), 3.4), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, sampling in zip(axes, samplings):
        for r in rows[rows["sampling"] == sampling].itertuples():
            values = json.loads(r.val_curve)
            color = ("tab:blue", "tab:orange")[ATTENTIONS.index(r.attention)]
            ax.plot(range(1, len(values) + 1), values, "-", color=color, lw=1,
                    label=f"{r.attention}" if r.seed == rows["seed"].min() else None)
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_title(f"{sampling} sampling", fontsize=9)
    axes[0].set_ylabel("validation MSE (one line per run)")
    axes[0].legend(fontsize=8)
    save(fig, path)
