"""Continuous against softmax attention on the best recipe, paired by seed: the test and validation
differences with 95 % t-intervals, and both attentions' validation curves (val_curves.png).

    PYTHONPATH=. python benchmarks/results/physionet2012-wide-continuous/pairs.py
"""

from pathlib import Path

import pandas as pd

from benchmarks.paired_stats import paired_stats
from benchmarks.physionet.report import plot_curves

HERE = Path(__file__).parent
runs = pd.concat([pd.read_csv(HERE.parent / "physionet2012-weighting" / "wide" / "results.csv"),
                  pd.read_csv(HERE / "results.csv")], ignore_index=True)
runs = runs[runs["status"] == "ok"].assign(switch=lambda r: r["switch"].fillna("none"))
wide = runs.pivot_table(index="seed", columns="attention", values=["test_mse", "best_val_mse", "s_per_epoch",
                                                                  "peak_rss_mb"]).dropna()
print("| seed | test softmax | test continuous | Δ test | val softmax | val continuous | Δ val | s/epoch (s, c) |")
print("|---|---|---|---|---|---|---|---|")
for seed, r in wide.iterrows():
    t, v = r["test_mse"] * 1e3, r["best_val_mse"] * 1e3
    print(f"| {seed} | {t['softmax']:.3f} | {t['continuous']:.3f} | {t['continuous'] - t['softmax']:+.3f} "
          f"| {v['softmax']:.3f} | {v['continuous']:.3f} | {v['continuous'] - v['softmax']:+.3f} "
          f"| {r['s_per_epoch']['softmax']:.0f}, {r['s_per_epoch']['continuous']:.0f} |")
for name in ("test_mse", "best_val_mse"):
    d = (wide[name]["continuous"] - wide[name]["softmax"]).to_numpy()
    s = paired_stats(d)
    rel = 100 * s["mean"] / wide[name]["softmax"].mean()
    print(f"{name}: continuous - softmax {s['mean'] * 1e3:+.3f}e-3 [{s['lo'] * 1e3:+.3f}, {s['hi'] * 1e3:+.3f}] "
          f"({rel:+.1f} %, {len(d)} seeds, continuous lower in {(d < 0).sum()})")
plot_curves(runs, HERE / "val_curves.png")
print(f"wrote {HERE / 'val_curves.png'}")
