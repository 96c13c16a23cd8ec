"""The figure of RESULTS.md's one-screen answer, drawn from the committed results.csv files.

    python -m benchmarks.answer_figure        # answer.png and answer_figure.md in benchmarks/results/
    python -m benchmarks.answer_figure --results DIR --out DIR

One row per dataset, as RESULTS.md's table. Left: continuous − softmax test MSE, each pair's
difference as a share of its softmax run's MSE, mean with its 95 % t-interval; regular inputs and
inputs with 60 % of the observations dropped (PatchTST at horizon 96, learned positions, CPU and GPU
seeds pooled as in ``pooled/``), or, for the synthetic control's encoder, complete series and 55 % of
the steps observed (informative and random sampling together). Right: the conventional alternative,
each window's inputs interpolated onto every step, against the same attention and seed on the inputs
left dropped, relative to the latter; the two attentions are averaged per seed (they share the dropped
inputs), so the interval is over seeds, as in ``pooled/summary.md``. PhysioNet 2012 has no regular
inputs: its left point is the AsyncTransformer with RoPE on real time, on the observations as
recorded; its alternative is the history interpolated onto an hourly grid for PatchTST, against the
AsyncTransformer of the same attention and seed. A point too far right for the panel is drawn at its
edge with its value. ``answer_figure.md`` lists every figure drawn.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.paired_stats import paired_stats  # noqa: E402
from benchmarks.study.paired_comparison import pairs  # noqa: E402
from benchmarks.study.report import load_pooled  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
COMMAND = "python -m benchmarks.answer_figure"
# (label, marker, colour) of the two inputs each row compares on the left; the right panel has one
REGIMES = (("regular inputs (synthetic: complete)", "o", "tab:blue"),
           ("60 % dropped (synthetic: 45 % unobserved; PhysioNet: as recorded)", "s", "tab:red"))
SOURCES = ("study", "study_gpu", "synthetic_control_long", "synthetic_control_inputs_interpolated", "physionet2012")
ALTERNATIVE = {"PhysioNet 2012": "hourly grid + PatchTST − AsyncTransformer on the observations (per seed)"}
ALTERNATIVE_DEFAULT = "interpolated − dropped inputs (per seed)"
RIGHT_LIMIT = 40.0  # % : the right panel's widest reach; a point beyond it is drawn at the edge
Shares = dict[str, np.ndarray]  # what a row draws: key -> the units' relative differences, in %


def study_runs(results: Path) -> pd.DataFrame:
    """Finished runs of the CPU study and the GPU replicate, seeds labelled by folder as pooled."""
    return load_pooled([results / "study", results / "study_gpu"])[0]


def benchmark_row(runs: pd.DataFrame, dataset: str) -> Shares:
    """PatchTST at horizon 96 with learned positions on one dataset: the paired differences on
    regular and 60 %-dropped inputs, and interpolated − dropped inputs per seed."""
    runs = runs[(runs["model"] == "patchtst") & (runs["pos_encoding"] == "learned") & (runs["horizon"] == 96)
                & (runs["dataset"] == dataset)]
    p = pairs(runs)
    out = {}
    for (name, *_), regime in zip(REGIMES, ("regular", "drop60")):
        grp = p[p["regime"] == regime]
        out[name] = 100 * (grp["d_test_mse"] / grp["test_mse_softmax"]).to_numpy()
    key = ["seed", "attention"]
    both = runs[runs["regime"] == "drop60"].merge(runs[runs["regime"] == "drop60-interp"], on=key,
                                                 suffixes=("_irr", "_itp"))
    share = 100 * (both["test_mse_itp"] / both["test_mse_irr"] - 1)
    out["interpolated"] = share.groupby(both["seed"]).mean().to_numpy()
    return out


def synthetic_row(results: Path) -> Shares:
    """The synthetic control's encoder to convergence: complete series, the two irregular samplings
    together, and each window's inputs interpolated against the observations (same draw and seed)."""
    obs = pd.read_csv(results / "synthetic_control_long" / "results.csv")
    itp = pd.read_csv(results / "synthetic_control_inputs_interpolated" / "results.csv")
    wide = obs.pivot_table(index=["sampling", "seed"], columns="attention", values="mse_all")
    share = 100 * (wide["continuous"] / wide["softmax"] - 1)
    irregular = share.index.get_level_values("sampling") != "complete"
    key = ["sampling", "seed", "attention"]
    both = obs.merge(itp, on=key, suffixes=("_obs", "_itp"))
    per_run = 100 * (both["mse_all_itp"] / both["mse_all_obs"] - 1)
    return {REGIMES[0][0]: share[~irregular].to_numpy(), REGIMES[1][0]: share[irregular].to_numpy(),
            "interpolated": per_run.groupby([both["sampling"], both["seed"]]).mean().to_numpy()}


def physionet_row(results: Path) -> Shares:
    """PhysioNet 2012: continuous − softmax of the AsyncTransformer with RoPE on complete histories,
    paired by seed, and the hourly-grid PatchTST against that model (same attention and seed),
    averaged over the attentions per seed."""
    runs = pd.read_csv(results / "physionet2012" / "results.csv")
    runs = runs[(runs["status"] == "ok") & runs["switch"].fillna("none").eq("none") & (runs["history_keep"] == 1.0)]
    main = runs[(runs["model"] == "async") & (runs["pos_encoding"] == "rope")]
    wide = main.pivot_table(index="seed", columns="attention", values="test_mse").dropna()
    grid = runs[runs["model"] == "grid-patchtst"].merge(main, on=["seed", "attention"], suffixes=("_grid", "_async"))
    share = 100 * (grid["test_mse_grid"] / grid["test_mse_async"] - 1)
    return {REGIMES[1][0]: 100 * (wide["continuous"] / wide["softmax"] - 1).to_numpy(),
            "interpolated": share.groupby(grid["seed"]).mean().to_numpy()}


def rows(results: Path) -> list[tuple[str, Callable[[], Shares]]]:
    """(label, loader) per row of RESULTS.md's table."""
    runs = study_runs(results)
    benchmark = [(name, lambda d=dataset: benchmark_row(runs, d)) for name, dataset in
                 (("ETTh1", "ETTh1"), ("ETTh2", "ETTh2"), ("ETTm1", "ETTm1"), ("ETTm2", "ETTm2"),
                  ("Weather", "weather"))]
    return benchmark + [("Synthetic (encoder)", lambda: synthetic_row(results)),
                        ("PhysioNet 2012", lambda: physionet_row(results))]


def point(ax: plt.Axes, values: np.ndarray, row: float, marker: str, colour: str, label: str | None = None) -> None:
    """Mean with its 95 % interval (none from a single unit) at height ``row``."""
    st = paired_stats(values)
    err = [[st["mean"] - st["lo"]], [st["hi"] - st["mean"]]] if np.isfinite(st["lo"]) else None
    ax.errorbar(st["mean"], row, xerr=err, fmt=marker, color=colour, capsize=3, label=label)


def draw(table: list[tuple[str, Shares]], path: Path) -> None:
    """Two panels of means with 95 % intervals, one row per dataset, zero marked."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 0.45 * len(table) + 2.0), sharey=True)
    y = np.arange(len(table))[::-1]
    for row, (_label, shares) in zip(y, table):
        for (name, marker, colour), offset in zip(REGIMES, (0.15, -0.15)):
            if name in shares:
                point(left, shares[name], row + offset, marker, colour, name if row == y[0] else None)
        mean = float(np.mean(shares["interpolated"]))
        if mean > RIGHT_LIMIT:
            right.text(0.98, row, f"{mean:+.0f} % →", transform=right.get_yaxis_transform(), ha="right",
                       va="center", color="tab:green")
        else:
            point(right, shares["interpolated"], row, "D", "tab:green")
    for ax in (left, right):
        ax.axvline(0.0, color="black", lw=0.8)
        ax.grid(axis="x", alpha=0.3)
    left.set_ylim(-0.6, len(table) - 0.4)
    left.set_yticks(y, [label for label, _ in table])
    left.set_xlabel("continuous − softmax test MSE, % of softmax's")
    left.set_title("the attention: same inputs, same seed", fontsize=10)
    right.set_xlabel("interpolated − dropped inputs, % of the latter's")
    right.set_title("the alternative: inputs interpolated", fontsize=10)
    fig.suptitle("Below zero: lower test MSE. Means with 95 % t-intervals.", fontsize=9)
    fig.legend(loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def numbers(table: list[tuple[str, Shares]]) -> str:
    """The figures drawn, as a markdown table, so every point of the plot can be read and checked."""
    sources = ", ".join(f"`{name}/`" for name in SOURCES)
    lines = ["# The one-screen answer's figure: what it draws", "",
             f"`{COMMAND}`, from the `results.csv` of {sources}. Relative differences in %: mean and 95 % "
             "t-interval over the units counted (pairs on the left of the figure; on the right seeds, for the "
             "synthetic "
             "series each sampling's seeds).", "",
             "| data | comparison | units | mean | 95 % CI |", "|---|---|---|---|---|"]
    for label, shares in table:
        for name, what in ((REGIMES[0][0], f"continuous − softmax, {REGIMES[0][0]}"),
                           (REGIMES[1][0], f"continuous − softmax, {REGIMES[1][0]}"),
                           ("interpolated", ALTERNATIVE.get(label, ALTERNATIVE_DEFAULT))):
            if name not in shares:
                lines.append(f"| {label} | {what} | 0 | — | — |")
                continue
            st = paired_stats(shares[name])
            ci = f"[{st['lo']:+.1f} %, {st['hi']:+.1f} %]" if np.isfinite(st["lo"]) else "— (one unit)"
            lines.append(f"| {label} | {what} | {st['n']} | {st['mean']:+.1f} % | {ci} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the folder holding study/, study_gpu/, "
                        "physionet2012/ and the synthetic control's folders (default: benchmarks/results)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where answer.png and answer_figure.md go "
                        "(default: benchmarks/results)")
    args = parser.parse_args(argv)
    missing = [str(args.results / name / "results.csv") for name in SOURCES
               if not (args.results / name / "results.csv").is_file()]
    if missing:
        parser.error(f"no {', '.join(missing)}: pass --results the benchmarks/results folder")
    table = [(label, loader()) for label, loader in rows(args.results)]
    args.out.mkdir(parents=True, exist_ok=True)
    draw(table, args.out / "answer.png")
    (args.out / "answer_figure.md").write_text(numbers(table))
    print(args.out / "answer.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
