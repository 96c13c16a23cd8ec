"""How much a PhysioNet test MSE moves with the test stays drawn: a bootstrap over stays.

The per-variable metric gives every variable the same weight however few queries it has, so a rare
variable's handful of test values can move the whole figure (on split 0, TroponinI: 71 test queries,
a quarter of the best model's test MSE). Resampling the test stays with replacement and recomputing
the metric from each run's per-stay error sums (a cell's ``errors.npz``) gives each run's interval
and, for runs scored on the same stays, the interval of their difference (paired: one resample for
all runs), which says whether a probe's change is larger than what the test stays alone make.

    python -m benchmarks.physionet.bootstrap BASE/errors.npz OTHER/errors.npz ... [--resamples 2000]
        [--plot intervals.png --target 5.5e-3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from ts_continuum.data.physionet import VARIABLES


def load(path: Path) -> dict[str, np.ndarray]:
    """A cell's per-stay error sums, stays sorted by record id (so runs on one split line up)."""
    errors = np.load(path)
    order = np.argsort(errors["ids"])
    return {"ids": errors["ids"][order], "sq": errors["sq"][order].astype(np.float64),
            "count": errors["count"][order].astype(np.float64)}


def metric(sq: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The per-variable MSE from error sums (..., C) and query counts (..., C): the mean over the
    variables with any query of each variable's mean squared error."""
    has = count > 0
    per = np.where(has, sq / np.where(has, count, 1.0), 0.0)
    return per.sum(-1) / has.sum(-1)


def resample_weights(n_stays: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n_stays) how often each stay is drawn in each resample of n_stays draws."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_stays, np.full(n_stays, 1.0 / n_stays), size=resamples).astype(np.float64)


def bootstrap(runs: list[dict], resamples: int = 2000, seed: int = 0) -> dict:
    """Each run's metric over its resamples, the same resamples for all (runs must share their stays)."""
    ids = runs[0]["ids"]
    for run in runs[1:]:
        if not np.array_equal(run["ids"], ids):
            raise ValueError("the runs were scored on different test stays (another split or max_stays); "
                             "compare runs of one split only")
    weights = resample_weights(len(ids), resamples, seed)
    return {"full": np.array([metric(r["sq"].sum(0), r["count"].sum(0)) for r in runs]),
            "resampled": np.stack([metric(weights @ r["sq"], weights @ r["count"]) for r in runs])}


def contributions(run: dict, top: int) -> list[tuple[str, int, float]]:
    """The ``top`` variables with the largest share of the metric: (name, test queries, share)."""
    sq, count = run["sq"].sum(0), run["count"].sum(0)
    has = count > 0
    per = np.where(has, sq / np.where(has, count, 1.0), 0.0) / has.sum()
    order = np.argsort(-per)[:top]
    return [(VARIABLES[i], int(count[i]), float(per[i] / per.sum())) for i in order]


def label(path: Path) -> str:
    """<results folder>/<cell> for a cell's errors.npz (<folder>/runs/<cell>/errors.npz), else the path."""
    parts = path.parts
    if len(parts) >= 4 and parts[-3] == "runs":
        return f"{parts[-4]}/{parts[-2]}"
    return str(path)


def plot(labels: list[str], full: np.ndarray, resampled: np.ndarray, path: Path, target: float | None) -> None:
    """Each run's test MSE with its interval (left) and its paired difference from the base (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    y = np.arange(len(labels))[::-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 0.45 * len(labels) + 1.6), sharey=True)
    lo, hi = np.percentile(resampled, [2.5, 97.5], axis=1) * 1e3
    left.errorbar(full * 1e3, y, xerr=[full * 1e3 - lo, hi - full * 1e3], fmt="o", capsize=3)
    if target is not None:
        left.axvline(target * 1e3, color="tab:red", ls="--", label=f"target {target * 1e3:g}e-3")
        left.legend(loc="lower right", fontsize=8)
    left.set_xlabel("test MSE ×1e-3, 95 % interval over test stays")
    diff = (resampled - resampled[0]) * 1e3
    dlo, dhi = np.percentile(diff, [2.5, 97.5], axis=1)
    delta = (full - full[0]) * 1e3
    right.errorbar(delta[1:], y[1:], xerr=[delta[1:] - dlo[1:], dhi[1:] - delta[1:]], fmt="o", capsize=3,
                   color="tab:green")
    right.axvline(0.0, color="grey", lw=1)
    if target is not None:
        right.axvline((target - full[0]) * 1e3, color="tab:red", ls="--")
    right.set_xlabel("minus the base ×1e-3, paired 95 % interval")
    left.set_yticks(y, [f"{labels[0]} (base)", *labels[1:]], fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("errors", nargs="+", type=Path, help="cells' errors.npz; the first is the base")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variables", type=int, default=5, help="show the base run's largest contributors")
    parser.add_argument("--plot", type=Path, default=None, help="draw the intervals to this image file")
    parser.add_argument("--target", type=float, default=None, help="a test MSE to mark on the plot")
    args = parser.parse_args(argv)
    if args.plot is not None and args.plot.exists():
        raise SystemExit(f"{args.plot} exists; remove it or choose another name (nothing is overwritten)")
    for path in args.errors:
        if not path.is_file():
            raise SystemExit(f"{path}: no such file (a cell leaves errors.npz in its run folder)")
    runs = [load(p) for p in args.errors]
    result = bootstrap(runs, args.resamples, args.seed)
    full, resampled = result["full"], result["resampled"]
    print(f"{len(runs[0]['ids'])} test stays, {args.resamples} resamples (seed {args.seed}); test MSE x1e-3:")
    print("| run | test MSE | 95 % interval | minus base | 95 % interval | resamples below base |")
    print("|---|---|---|---|---|---|")
    for i, path in enumerate(args.errors):
        lo, hi = np.percentile(resampled[i], [2.5, 97.5]) * 1e3
        row = f"| {label(path)} | {full[i] * 1e3:.3f} | [{lo:.3f}, {hi:.3f}] |"
        if i == 0:
            row += " | | |"
        else:
            diff = resampled[i] - resampled[0]
            dlo, dhi = np.percentile(diff, [2.5, 97.5]) * 1e3
            row += f" {(full[i] - full[0]) * 1e3:+.3f} | [{dlo:+.3f}, {dhi:+.3f}] | {np.mean(diff < 0):.0%} |"
        print(row)
    if args.plot is not None:
        plot([label(p) for p in args.errors], full, resampled, args.plot, args.target)
        print(f"wrote {args.plot}")
    print(f"\nlargest shares of the base run's metric ({args.errors[0]}):")
    for name, queries, share in contributions(runs[0], args.variables):
        print(f"  {name}: {share:.1%} of the metric, {queries} test queries")


if __name__ == "__main__":
    main()
