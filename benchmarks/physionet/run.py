"""The PhysioNet 2012 study runner: a YAML grid of cells, run one after another, resumable.

    python -m benchmarks.physionet.run                       # benchmarks/grids/physionet2012.yaml
    python -m benchmarks.physionet.run --dry-run             # the cells still to run, in order
    python -m benchmarks.physionet.run --blocks main-rope --max-cells 2
    python -m benchmarks.physionet.report                    # summary.md and plots from results.csv

Every finished cell appends one row to ``<out>/results.csv`` (a failed cell too, with its error),
so an interrupted run resumes at the next cell; ``--retry-failed`` runs failed cells again. A cell's
curves, logs and per-stay errors are under ``<out>/runs/<cell id>/``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import time
import traceback
from pathlib import Path

import pandas as pd
import torch
import yaml

from benchmarks.physionet.cell import KEY_FIELDS, MODELS, SETTINGS, cell_id, run_cell
from benchmarks.study.provenance import software
from benchmarks.study.lock import run_lock
from ts_continuum import allocator

ROOT = Path(__file__).resolve().parents[2]
GRID = ROOT / "benchmarks" / "grids" / "physionet2012.yaml"
RESULT_FIELDS = ["cell_id", "block", *KEY_FIELDS, "status", "test_mse", "test_mae", "best_val_mse", "epochs",
                 "best_epoch", "s_per_epoch", "first_epoch_s", "fit_s", "peak_rss_mb", "threads", "n_params",
                 "val_curve", "val_mae_curve", "train_curve", "val_after_switch", "config", "error", "finished_at",
                 "software"]
BLOCK_KEYS = ("name", *KEY_FIELDS, "settings")


def expand(grid: dict) -> list[dict]:
    """Every cell of the grid, in order: blocks in turn, seeds outermost, both attentions side by side."""
    defaults = grid.get("defaults") or {}
    cells, seen = [], {}
    for block in grid["blocks"]:
        unknown = set(block) - set(BLOCK_KEYS)
        if unknown:
            raise ValueError(f"block {block.get('name')!r}: unknown keys {sorted(unknown)}; a block takes "
                             f"{', '.join(BLOCK_KEYS)}")
        settings = {**defaults, **(block.get("settings") or {})}
        bad = set(settings) - set(SETTINGS)
        if bad:
            raise ValueError(f"block {block['name']!r}: unknown settings {sorted(bad)}; known: {', '.join(SETTINGS)}")
        axes = {k: block[k] if isinstance(block[k], list) else [block[k]] for k in KEY_FIELDS}
        bad_models = set(axes["model"]) - set(MODELS)
        if bad_models:
            raise ValueError(f"block {block['name']!r}: unknown models {sorted(bad_models)}; "
                             f"known: {', '.join(MODELS)}")
        order = ("seed", "history_keep", "switch", "pos_encoding", "model", "attention")
        for values in itertools.product(*(axes[k] for k in order)):
            cell = {**settings, **dict(zip(order, values)), "block": block["name"]}
            cid = cell_id(cell)
            if cid in seen:
                if {k: v for k, v in seen[cid].items() if k != "block"} != {k: v for k, v in cell.items()
                                                                            if k != "block"}:
                    raise ValueError(f"cell {cid} appears in blocks {seen[cid]['block']!r} and {block['name']!r} with "
                                     "other settings; give it one set of settings")
                continue
            seen[cid] = cell
            cells.append(cell)
    return cells


def recorded(out: Path) -> pd.DataFrame:
    path = out / "results.csv"
    return pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=RESULT_FIELDS)


def pending(cells: list[dict], done: pd.DataFrame, retry_failed: bool) -> list[dict]:
    ok = set(done.loc[done["status"] == "ok", "cell_id"]) if len(done) else set()
    failed = set(done.loc[done["status"] != "ok", "cell_id"]) if len(done) else set()
    return [c for c in cells if cell_id(c) not in ok and (retry_failed or cell_id(c) not in failed)]


def append(out: Path, row: dict) -> None:
    path = out / "results.csv"
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RESULT_FIELDS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, default=GRID)
    parser.add_argument("--out", type=Path, default=None, help="results folder (default: the grid's out)")
    parser.add_argument("--blocks", nargs="*", default=None, help="run only these blocks")
    parser.add_argument("--max-cells", type=int, default=None)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--retry-failed", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    try:
        allocator.keep_freed_memory()  # as the ts-continuum command: cells train as users' runs do
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    grid = yaml.safe_load(args.grid.read_text())
    out = args.out or ROOT / grid["out"]
    cells = expand(grid)
    if args.blocks:
        unknown = set(args.blocks) - {c["block"] for c in cells}
        if unknown:
            raise SystemExit(f"unknown blocks {sorted(unknown)}; the grid has {sorted({c['block'] for c in cells})}")
        cells = [c for c in cells if c["block"] in args.blocks]
    todo = pending(cells, recorded(out), args.retry_failed)[: args.max_cells]
    if args.dry_run:
        for c in todo:
            print(c["block"], cell_id(c))
        print(f"{len(todo)} of {len(cells)} cells to run")
        return
    if args.threads:
        torch.set_num_threads(args.threads)
    out.mkdir(parents=True, exist_ok=True)
    (out / "grid.yaml").write_text(args.grid.read_text())
    with run_lock(out):
        for i, cell in enumerate(todo, 1):
            cid = cell_id(cell)
            print(f"[{i}/{len(todo)}] {cid} ({cell['block']}) ...", flush=True)
            row = {"cell_id": cid, "block": cell["block"], **{k: cell[k] for k in KEY_FIELDS},
                   "config": json.dumps({k: v for k, v in cell.items() if k != "block"}, sort_keys=True),
                   "software": software()}
            start = time.perf_counter()
            try:
                row.update(run_cell(cell, out / "runs" / cid), status="ok", error="")
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # recorded, and the grid goes on
                row.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:500])
                traceback.print_exc()
            row["finished_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
            append(out, row)
            print(f"    {row['status']} test_mse {row.get('test_mse', float('nan')):.5f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
