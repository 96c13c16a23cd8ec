"""Summaries of a study folder: ``summary.md`` and plots from ``results.csv``.

    python -m benchmarks.report benchmarks/results/study
    python -m benchmarks.report --pool benchmarks/results/pooled benchmarks/results/study benchmarks/results/study_gpu

``--pool`` summarises several study folders together (e.g. the CPU study and a GPU replicate): a
run is identified by its folder and seed, so seed 0 on two machines makes two pairs; training
cost is left to each folder's own summary, since the machines differ.

Runs are paired and compared in ``paired_comparison``; the tables and figures are built in
``report_tables`` and ``report_plots``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from benchmarks.study.paired_comparison import SETTING, ReportError, pairs, unpaired, with_test_curves
from benchmarks.study.report_plots import plot_bars, plot_curves, plot_paired_deltas
from benchmarks.study.report_tables import (best_val_table, block_table, cell_table, cost_table, curve_agreement,
                                      early_table, horizon_span_table, input_kind, interpolation_table,
                                      lead_persistence_table, paired_table, published_table, sampling_table)


def load(folder: Path) -> pd.DataFrame:
    """Finished cells, the last record of each, under the block names of the folder's grid now."""
    df = pd.read_csv(folder / "results.csv")
    df = df[df["status"] == "ok"].drop_duplicates("cell_id", keep="last")
    blocks = grid_blocks(folder)
    if blocks and "block" in df:
        df = df.assign(block=df["cell_id"].map(blocks).fillna(df["block"]))
    return df


def grid_blocks(folder: Path) -> dict[str, str]:
    """Cell id -> the block of the folder's grid (``grid.yaml``, its latest) that first holds it, so
    a block renamed or reordered after its cells ran is reported under its current name."""
    path = Path(folder) / "grid.yaml"
    if not path.exists():
        return {}
    from benchmarks.study.cell import cell_id  # imports Lightning: only for a folder with a grid
    from benchmarks.study.grid import expand

    try:
        cells = expand(yaml.safe_load(path.read_text()))
    except (ValueError, yaml.YAMLError) as exc:  # edited by hand since: the recorded block names stand
        print(f"warning: {path} does not expand ({str(exc).splitlines()[0]}); blocks are named as recorded",
              file=sys.stderr)
        return {}
    return {cell_id(c): c["block"] for c in cells}


def load_failed(folder: Path) -> pd.DataFrame:
    """Cells whose every recorded attempt failed (a failure that ``--retry-failed`` later fixed is
    not a failure), one row each, its last error."""
    raw = pd.read_csv(folder / "results.csv")
    ok = set(raw.loc[raw["status"] == "ok", "cell_id"])
    return raw[(raw["status"] != "ok") & ~raw["cell_id"].isin(ok)].drop_duplicates("cell_id", keep="last")


def load_pooled(sources: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Finished and failed cells of several folders; seeds and cell ids become '<folder>:<seed>' and
    '<folder>:<cell id>' (the same cell id in two folders names two runs)."""
    names = [Path(s).name for s in sources]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ReportError(f"several study folders are named {clash}: pooled seeds are labelled by folder name, "
                         "so their runs would be merged; give each folder its own name")
    done, failed = [], []
    for src in map(Path, sources):
        for frame, target in ((load(src), done), (load_failed(src), failed)):
            frame = frame.copy()
            frame["seed"] = src.name + ":" + frame["seed"].astype(str)
            frame["cell_id"] = src.name + ":" + frame["cell_id"].astype(str)
            target.append(frame)
    return pd.concat(done, ignore_index=True), pd.concat(failed, ignore_index=True)


def write(folder: Path, sources: list[Path] | None = None) -> Path:
    """summary.md and plots in ``folder``, from its results.csv or from those of ``sources``."""
    folder = Path(folder)
    if sources:
        folder.mkdir(parents=True, exist_ok=True)
        df, failed = load_pooled(sources)
        origin = ", ".join(f"`{Path(s) / 'results.csv'}`" for s in sources)
        command = f"python -m benchmarks.report --pool {folder} {' '.join(map(str, sources))}"
    else:
        df, failed = load(folder), load_failed(folder)
        origin, command = f"`{folder / 'results.csv'}`", f"python -m benchmarks.report {folder}"
    p = pairs(df)
    alone = unpaired(df)
    drawn = {
        "val_curves.png": plot_curves(df, folder / "val_curves.png"),
        "val_delta.png": plot_paired_deltas(df, folder / "val_delta.png"),
        "test_mse_bars.png": plot_bars(df, folder / "test_mse_bars.png"),
    }
    parts = [
        f"# Study summary: {folder.name}",
        f"Written {time.strftime('%Y-%m-%d %H:%M')} from {origin} by `{command}`. "
        f"{len(df)} finished cells, {len(failed)} failed"
        f"{f', {len(alone)} without their partner (listed at the end)' if alone else ''}. Threads per run: "
        f"{', '.join(map(str, sorted(df['threads'].unique()))) if len(df) else '—'}.",
        "## Test metrics per setting (mean ± std over seeds; scaled data, every test window)",
        cell_table(df) if len(df) else "(no finished cells)",
    ]
    if len(p):
        parts += [
            "## Paired differences, continuous − softmax (negative = continuous better)",
            "Per regime, over all settings and seeds:",
            paired_table(p, ["regime"]),
            "Per model, pooled over horizons (every dataset, regime and positional encoding):",
            horizon_span_table(p),
            "The same per kind of input (regular; irregular: inputs dropped, timestamps given; "
            "interpolated: the dropped inputs interpolated back onto the grid):",
            horizon_span_table(p.assign(input=p["regime"].map(input_kind)), by=("model", "input")),
            "Per model, dataset and horizon, over every regime and positional encoding:",
            paired_table(p, ["model", "dataset", "horizon"]),
            "Per model, horizon and sampling step, over every regime and positional encoding (a grouping "
            "chosen after the ETTm1/ETTm2 results were seen: read its tests as exploratory):",
            sampling_table(p),
            "Per setting:",
            paired_table(p, SETTING),
            "Per block of the grid (test gaps: mean continuous − softmax test MSE at the same epoch, "
            "pairs in brackets; blocks without per-epoch test MSE show —):",
            block_table(df),
            "Early training: validation MSE after each of the first epochs, paired as above:",
            early_table(df),
            "The same per horizon (every model, regime and positional encoding):",
            early_table(df, by="horizon"),
            "Best validation MSE (the epoch early stopping kept), paired as above:",
            best_val_table(df),
        ]
        tested = with_test_curves(df)
        if len(pairs(tested)):
            parts += [
                "Test MSE after every epoch, paired as above, for the runs that recorded it (no decision "
                "used it): the attentions compared epoch by epoch, without the effect of the epoch "
                "early stopping picked for each run:",
                early_table(tested, epochs=int(tested["epochs"].max()), column="test_curve", label="test"),
                "The same per horizon:",
                early_table(tested, epochs=3, column="test_curve", label="test", by="horizon"),
                curve_agreement(tested),
                "Does a lead after epoch 3 last? Test MSE after epoch 3 against the checkpoint early "
                "stopping kept (gaps relative to softmax; a run that stopped at epoch 3 kept it):",
                lead_persistence_table(tested),
            ]
    interpolation = interpolation_table(df)
    if interpolation:
        parts += ["## Irregular input against the interpolation baseline",
                  "Test MSE, mean over the runs (paired by seed and attention across the two regimes; "
                  "regular data: every run of that setting). A seed's two attentions share the dropped "
                  "inputs, so the interval is over seeds, each the mean of its attentions. "
                  "'Recovered' is the share of the cost of dropping inputs (irregular − regular data) that "
                  "interpolating them back onto the grid wins back.",
                  interpolation]
    parts += ["## Against the published PatchTST/42 (MSE)", published_table(df)]
    if not sources:
        parts += ["## Training cost (same machine, same run)", cost_table(df)]
    figures = {"val_curves.png": "validation MSE per epoch, every seed",
               "val_delta.png": "paired difference continuous − softmax per epoch, mean and 95 % band",
               "test_mse_bars.png": "mean ± std"}
    if any(drawn.values()):
        parts += ["Plots: " + ", ".join(f"`{name}` ({what})" for name, what in figures.items() if drawn[name]) + "."]
    if alone:
        parts += ["## Finished cells left out of the paired statistics",
                  "No run of the other attention for the same setting and seed (or a test metric missing):",
                  "\n".join(f"- {c}" for c in alone)]
    if len(failed):
        parts += ["## Failed cells", "\n".join(f"- {r.cell_id}: {r.error}" for r in failed.itertuples())]
    out = folder / "summary.md"
    out.write_text("\n\n".join(parts) + "\n")
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, metavar="STUDY_FOLDER",
                        help="a folder written by python -m benchmarks.run (it holds results.csv)")
    parser.add_argument("--pool", type=Path, metavar="OUT_FOLDER",
                        help="summarise all STUDY_FOLDERs together into OUT_FOLDER")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not (f / "results.csv").is_file()]
    if missing:
        parser.error(f"no results.csv in {', '.join(missing)}: pass folders written by python -m benchmarks.run")
    if args.pool is None and len(args.folders) > 1:
        parser.error("several study folders: pass --pool OUT_FOLDER to summarise them together")
    try:
        print(write(args.pool, args.folders) if args.pool else write(args.folders[0]))
    except ReportError as err:
        parser.error(str(err))
