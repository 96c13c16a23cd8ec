"""The figures of a study summary: validation curves, their paired differences, test MSE bars."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from benchmarks.paired_stats import paired_stats  # noqa: E402
from benchmarks.study.paired_comparison import paired_runs  # noqa: E402


def panel_grid(n: int) -> tuple[Figure, np.ndarray]:
    """A figure of n epoch panels, four to a row."""
    cols = min(4, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, axes.flat[:n]


def save_panels(fig: Figure, path: Path) -> None:
    """Write the figure to ``path`` and free it (a report draws several)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def label_epoch_panel(ax: Axes, setting: tuple, ylabel: str) -> None:
    """Title, axis labels and legend of a per-epoch panel, so panels of one figure read alike."""
    ax.set_title(" ".join(map(str, setting)), fontsize=8)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)


def plot_curves(df: pd.DataFrame, path: Path) -> bool:
    """Validation MSE per epoch, every run, one panel per setting: how each attention trained.
    True if drawn (a report names only the figures it drew)."""
    groups = list(df.groupby(["model", "dataset", "horizon", "regime", "pos_encoding"]))
    if not groups:
        return False
    fig, axes = panel_grid(len(groups))
    for ax, (key, grp) in zip(axes, groups):
        for attention, colour in (("softmax", "tab:blue"), ("continuous", "tab:red")):
            for i, (_, r) in enumerate(grp[grp["attention"] == attention].iterrows()):
                curve = json.loads(r["val_curve"])
                ax.plot(range(1, len(curve) + 1), curve, color=colour, alpha=0.6, label=attention if i == 0 else None)
        label_epoch_panel(ax, key, "val MSE")
    save_panels(fig, path)
    return True


def plot_paired_deltas(df: pd.DataFrame, path: Path) -> bool:
    """Validation MSE of continuous minus softmax per epoch, one thin line per seed, the mean with
    its 95 % t-band: an early-training advantage shows as a band below zero in the first epochs.
    True if drawn."""
    by_setting: dict[tuple, list[np.ndarray]] = {}
    for key, soft, cont in paired_runs(df, ["val_curve"]):
        c, s = json.loads(cont["val_curve"]), json.loads(soft["val_curve"])
        n = min(len(c), len(s))
        by_setting.setdefault(key[:-1], []).append(np.array(c[:n]) - np.array(s[:n]))
    if not by_setting:
        return False
    fig, axes = panel_grid(len(by_setting))
    for ax, (setting, deltas) in zip(axes, by_setting.items()):
        for d in deltas:
            ax.plot(range(1, len(d) + 1), d, color="grey", alpha=0.4, lw=0.8)
        epochs = max(map(len, deltas))
        mean, lo, hi = [], [], []
        for e in range(epochs):
            st = paired_stats(np.array([d[e] for d in deltas if len(d) > e]))
            mean.append(st["mean"])
            lo.append(st["lo"])
            hi.append(st["hi"])
        x = range(1, epochs + 1)
        ax.plot(x, mean, color="tab:red", lw=2, label=f"mean of {len(deltas)} pairs")
        ax.fill_between(x, lo, hi, color="tab:red", alpha=0.2, label="95 % CI")
        ax.axhline(0.0, color="black", lw=0.8)
        label_epoch_panel(ax, setting, "val MSE, continuous − softmax")
    save_panels(fig, path)
    return True


def plot_bars(df: pd.DataFrame, path: Path) -> bool:
    """Test MSE per regime and attention (mean ± std over seeds), one panel per model, dataset,
    horizon and positional encoding: what dropping inputs costs each attention. True if drawn."""
    groups = list(df.groupby(["model", "dataset", "horizon", "pos_encoding"]))
    if not groups:
        return False
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.5), squeeze=False)
    for ax, (key, grp) in zip(axes.flat, groups):
        regimes = sorted(grp["regime"].unique(), key=lambda r: (len(r), r))
        x = np.arange(len(regimes))
        for j, (attention, colour) in enumerate((("softmax", "tab:blue"), ("continuous", "tab:red"))):
            sub = grp[grp["attention"] == attention].groupby("regime")["test_mse"]
            mean, sd = sub.mean().reindex(regimes), sub.std().reindex(regimes)
            ax.bar(x + (j - 0.5) * 0.38, mean, 0.38, yerr=sd, color=colour, label=attention, capsize=3)
        ax.set_xticks(x, regimes, rotation=30, fontsize=8)
        lo = grp["test_mse"].min()
        ax.set_ylim(lo * 0.9, grp["test_mse"].max() * 1.03)
        ax.set_title(" ".join(map(str, key)), fontsize=9)
        ax.set_ylabel("test MSE")
        ax.legend(fontsize=7)
    save_panels(fig, path)
    return True
