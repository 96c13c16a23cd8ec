"""The synthetic control: does continuous attention pay off where the sampling itself is informative?

    python -m benchmarks.synthetic [--out benchmarks/results/synthetic_control] [--seeds 0 1 2]

Smooth series sampled informatively, at random or completely; both attentions fitted through the
Forecaster API on the observations or on interpolated inputs, scored on every future step. The
design, its predictions and their amendments, each written before its runs:
``benchmarks/results/synthetic_control_design.md``.

Writes results.csv (one row per run, appended as runs finish; finished runs are skipped on a
rerun), summary.md (paired continuous - softmax per sampling; with ``--compare-with``, this folder's
runs against another folder's, pair by pair), synthetic_control.png (test MSE per run),
validation_curves.png (validation MSE after every epoch) and validation_gap.png.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import pandas as pd
import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from benchmarks.machine import command, cpu_facts
from benchmarks.synthetic.plots import write_against_plot, write_curves, write_gaps, write_plot
from benchmarks.synthetic.runs import ATTENTIONS, FIELDS, INPUTS, MODELS, run_one
from benchmarks.synthetic.simulation import SAMPLINGS
from benchmarks.synthetic.summary import FILLED, write_summary

ROOT = Path(__file__).resolve().parents[2]
BEFORE_AMENDMENT_3 = dict(model="encoder", input="observed")  # what folders without these fields hold


def read_rows(path: Path) -> pd.DataFrame:
    rows = pd.read_csv(path)
    return rows.assign(**{k: v for k, v in BEFORE_AMENDMENT_3.items() if k not in rows})


def settings_of(meta: dict | None) -> dict | None:
    return None if meta is None or "settings" not in meta else {**BEFORE_AMENDMENT_3, **meta["settings"]}


def comparison(folder: Path, settings: dict) -> tuple[pd.DataFrame, str]:
    """The runs of ``folder`` (the observations as input, otherwise this folder's settings) to pair with."""
    meta_path = folder / "meta.json"
    if not (folder / "results.csv").exists() or not meta_path.exists():
        raise SystemExit(f"--compare-with {folder}: no results.csv and meta.json there; give a folder this script "
                         "wrote")
    theirs = settings_of(json.loads(meta_path.read_text()))
    wanted = {**settings, "input": "observed"}
    if theirs != wanted:
        raise SystemExit(f"--compare-with {folder}: its runs have the settings {theirs}, not {wanted}; pairs must "
                         "differ in the input only")
    try:
        where = str(folder.resolve().relative_to(ROOT))
    except ValueError:
        where = str(folder)
    return read_rows(folder / "results.csv"), where


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.synthetic", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/synthetic_control")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--samplings", nargs="+", choices=SAMPLINGS, default=None,
                   help="default: all three, or informative and random with an interpolating --input")
    p.add_argument("--model", choices=list(MODELS), default="encoder")
    p.add_argument("--input", choices=INPUTS, default="observed",
                   help="interpolated: the observations interpolated onto every step (the conventional baseline); "
                        "inputs_interpolated: each window's inputs interpolated, targets observed")
    p.add_argument("--compare-with", type=Path, default=None,
                   help="with an interpolating --input: a folder of the same runs with the observations as input")
    p.add_argument("--max-epochs", type=int, default=6)
    p.add_argument("--series", type=int, default=8, help="series per draw")
    p.add_argument("--steps", type=int, default=1500, help="simulated steps per series")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--attention-backend", default="auto", help="the models' attention_backend (tests: torch)")
    args = p.parse_args(argv)
    interpolated = args.input in FILLED
    if args.samplings is None:
        args.samplings = [s for s in SAMPLINGS if not (interpolated and s == "complete")]
    if interpolated and "complete" in args.samplings:
        p.error(f"--input {args.input}: complete sampling has nothing to interpolate; choose informative and/or "
                "random")
    if args.compare_with is not None and not interpolated:
        p.error("--compare-with pairs runs on interpolated input with runs on the observations: add --input "
                "interpolated or inputs_interpolated")
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.csv"
    done = pd.read_csv(results) if results.exists() else pd.DataFrame(columns=FIELDS)
    meta_path = args.out / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else None
    settings = dict(model=args.model, input=args.input, max_epochs=args.max_epochs, series=args.series,
                    steps=args.steps, attention_backend=args.attention_backend)
    finished = set(zip(done["sampling"], done["attention"], done["seed"].astype(int)))
    todo = [(s, a, seed) for seed in args.seeds for s in args.samplings for a in ATTENTIONS
            if (s, a, seed) not in finished]
    if todo and list(done.columns) != FIELDS:
        raise SystemExit(f"{results} has the columns of another version of this script ({list(done.columns)}); "
                         "new rows would not line up: choose another --out")
    if todo and meta is not None and settings_of(meta) != settings:
        raise SystemExit(f"{args.out} holds runs with the settings {settings_of(meta)}, not {settings}; runs of "
                         "another model, input, budget or size must not be summarised together: choose another --out")
    if not todo and settings_of(meta) is not None:
        settings = settings_of(meta)  # only the summary is rewritten: it describes the runs recorded
    compare = None if args.compare_with is None else comparison(args.compare_with, settings)
    print(f"{len(finished)} runs recorded, {len(todo)} to run -> {args.out}", flush=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()) as progress:
        task = progress.add_task("runs", total=len(todo))
        for sampling, attention, seed in todo:
            progress.update(task, description=f"{sampling} {attention} seed {seed}")
            row = run_one(args.model, args.input, sampling, attention, seed, args.max_epochs, args.series, args.steps,
                          args.attention_backend)
            new = not results.exists()
            with results.open("a", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=FIELDS)
                if new:
                    writer.writeheader()
                writer.writerow(row)
            progress.console.print(f"{sampling} {attention} seed {seed}: mse_all {row['mse_all']:.4f}, "
                                   f"mse_observed {row['mse_observed']:.4f} ({row['fit_s']:.0f} s)")
            progress.advance(task)
    rows = read_rows(results)
    if todo or meta is None:  # the command that ran the runs, not one that only rewrote the summary
        given = argv if argv is not None else sys.argv[1:]
        meta = dict(date=time.strftime("%Y-%m-%d %H:%M"), torch=torch.__version__, threads=torch.get_num_threads(),
                    command=command("benchmarks.synthetic", given), settings=settings,
                    **cpu_facts())
        meta_path.write_text(json.dumps(meta, indent=1))
    write_summary(rows, args.out, meta, compare)
    write_plot(rows, args.out / "synthetic_control.png")
    if compare is not None:
        write_against_plot(rows, compare[0], args.out / "against_observed.png")
    if "val_curve" in rows:  # the first (6-epoch) runs did not record it
        write_curves(rows, args.out / "validation_curves.png")
        write_gaps(rows, args.out / "validation_gap.png")
    return 0

