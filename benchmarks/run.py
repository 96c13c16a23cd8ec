"""The study runner: a YAML grid of cells, run one after another, resumable, with a progress bar.

    python -m benchmarks.run --profile quick            # minutes on a CPU (CI runs it)
    python -m benchmarks.run --profile cpu              # about two hours on two cores
    python -m benchmarks.run --grid benchmarks/grids/study-etth.yaml --out benchmarks/results/study

Every finished cell appends one row to ``<out>/results.csv`` (failed cells too, with the error), so
an interrupted run resumes where it stopped. Per-cell logs, epoch metrics and the exact cell config
are under ``<out>/runs/<cell id>/``. After the grid, ``<out>/summary.md`` and plots are written by
``benchmarks.report``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import logging
import os
import time
import traceback
from pathlib import Path

import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from benchmarks import report
from benchmarks.study_cell import KEY_FIELDS, PCT_START, cell_id, run_cell

ROOT = Path(__file__).resolve().parents[1]
GRIDS = ROOT / "benchmarks" / "grids"
# the order cells run in: both attentions of one setting side by side, horizons outermost
LOOP_ORDER = ("horizon", "dataset", "seed", "regime", "pos_encoding", "model", "attention")
RESULT_FIELDS = list(KEY_FIELDS) + [
    "status", "test_mse", "test_mae", "best_val_mse", "epochs", "best_epoch", "train_s_per_epoch",
    "first_epoch_s", "fit_s", "wall_s", "peak_rss_mb", "threads", "n_params", "val_curve", "cell_id",
    "block", "config", "error", "finished_at", "test_curve",
]


REQUIRED = ("model_args", "lr", "lr_schedule", "lookback", "batch_size", "max_epochs", "patience")


def published_settings(model: str, dataset: str) -> dict:
    """Model arguments and training settings from ``configs/<model>/<dataset>.yaml`` (empty for a
    dataset without a config: the grid must then give them)."""
    path = ROOT / "configs" / model / f"{dataset}.yaml"
    if not path.exists():
        return {}
    cfg = yaml.safe_load(path.read_text())
    init = dict(cfg["model"]["model"]["init_args"])
    for key in ("attention", "pos_encoding"):
        init.pop(key, None)
    return {
        "model_args": init,
        "lr": cfg["model"]["lr"],
        "lr_schedule": cfg["model"]["lr_schedule"],
        "pct_start": cfg["model"].get("pct_start", PCT_START),
        "lookback": cfg["data"]["lookback"],
        "batch_size": cfg["data"]["batch_size"],
        "eval_batch_size": cfg["data"].get("eval_batch_size", 256),
        "max_epochs": cfg["trainer"]["max_epochs"],
        "patience": next(c["init_args"]["patience"] for c in cfg["trainer"]["callbacks"] if "EarlyStopping" in c["class_path"]),
    }


def expand(grid: dict) -> list[dict]:
    """All cells of a grid, in run order: published settings, then grid defaults, then block overrides."""
    cells, seen = [], set()
    for block in grid["blocks"]:
        axes = {k: block[k] if isinstance(block[k], list) else [block[k]] for k in LOOP_ORDER}
        for values in itertools.product(*(axes[k] for k in LOOP_ORDER)):
            key = dict(zip(LOOP_ORDER, values))
            cell = {**published_settings(key["model"], key["dataset"]), **grid.get("defaults", {}),
                    **block.get("overrides", {}), **key, "block": block["name"]}
            missing = [k for k in REQUIRED if k not in cell]
            if missing:
                raise ValueError(f"block {block['name']!r}: cell {key} lacks {missing}; give them in defaults or overrides")
            cid = cell_id(cell)
            if cid not in seen:
                seen.add(cid)
                cells.append(cell)
    return cells


def warmup_warnings(cells: list[dict]) -> list[str]:
    """Cells whose early stopping can end training during OneCycle's warm-up. OneCycle's length
    follows max_epochs, and validation MSE may rise while the learning rate climbs, so a patience
    shorter than the warm-up can stop a run before the peak (the budget probe's first design:
    patience 2 against a 3.2-epoch warm-up stopped it at epoch 3, keeping epoch 1). One line per
    block and setting; a warning, since the published ETTm recipe (patience 20, warm-up 40) does it."""
    found: dict[tuple, float] = {}
    for c in cells:
        if c.get("lr_schedule") == "onecycle":
            warmup = c.get("pct_start", PCT_START) * c["max_epochs"]
            if c["patience"] < warmup:
                found[(c["block"], c["dataset"], c["patience"], c["max_epochs"])] = warmup
    return [f"warning: block {block!r}, {dataset}: early-stopping patience {patience} is shorter than OneCycle's "
            f"{warmup:g}-epoch warm-up (of {epochs} epochs); a run can stop before the learning rate peaks. "
            f"Give patience >= {warmup:g} to run the schedule through."
            for (block, dataset, patience, epochs), warmup in found.items()]


def finished(path: Path, retry_failed: bool) -> set[str]:
    if not path.exists():
        return set()
    with path.open() as f:
        return {r["cell_id"] for r in csv.DictReader(f) if r["status"] == "ok" or not retry_failed}


def append(path: Path, row: dict) -> None:
    """Add a result row. A file written before a column was added (RESULT_FIELDS grows only at the
    end) is first rewritten with the new header and every old row kept, blank in the new columns,
    through a temporary file, so an interruption leaves the old file whole."""
    new = not path.exists()
    if not new:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            header, old_rows = reader.fieldnames or [], list(reader)
        if header != RESULT_FIELDS:
            if header != RESULT_FIELDS[:len(header)]:
                raise ValueError(f"{path} has columns {header}, not a prefix of {RESULT_FIELDS}; "
                                 "write this grid to a new folder (--out)")
            tmp = path.with_suffix(".csv.tmp")
            with tmp.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=RESULT_FIELDS)
                writer.writeheader()
                writer.writerows(old_rows)
            tmp.replace(path)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RESULT_FIELDS, extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def run_one(cell: dict, out: Path) -> dict:
    cid = cell_id(cell)
    cell_dir = out / "runs" / cid
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "cell.json").write_text(json.dumps(cell, indent=2))
    handler = logging.FileHandler(cell_dir / "log.txt", mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric", "lightning")]
    for lg in loggers:
        lg.addHandler(handler)
    row = {k: cell[k] for k in KEY_FIELDS}
    row.update(cell_id=cid, block=cell["block"], config=json.dumps(cell, sort_keys=True))
    try:
        row.update(run_cell(cell, cell_dir), status="ok")
    except Exception as exc:  # a failed cell is a result: record it and go on
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        (cell_dir / "error.txt").write_text(traceback.format_exc())
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        handler.close()
    row["finished_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    return row


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Run a grid of study cells (resumable).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--profile", choices=sorted(f.stem for f in GRIDS.glob("*.yaml")), help="a grid in benchmarks/grids/")
    src.add_argument("--grid", type=Path, help="a grid YAML file")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: the grid's 'out')")
    p.add_argument("--max-cells", type=int, default=None, help="stop after this many new cells")
    p.add_argument("--retry-failed", action="store_true", help="run cells recorded as failed again")
    p.add_argument("--dry-run", action="store_true", help="list the cells that would run")
    args = p.parse_args(argv)
    grid_path = args.grid or GRIDS / f"{args.profile}.yaml"
    grid = yaml.safe_load(grid_path.read_text())
    out = args.out or ROOT / grid["out"]
    results = out / "results.csv"
    cells = expand(grid)
    done = finished(results, args.retry_failed)
    todo = [c for c in cells if cell_id(c) not in done][: args.max_cells]
    print(f"{grid_path.name}: {len(cells)} cells, {len(cells) - len(todo)} already recorded, {len(todo)} to run -> {out}")
    for line in warmup_warnings(todo):
        print(line)
    if args.dry_run:
        for c in todo:
            print(" ", cell_id(c))
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "grid.yaml").write_text(grid_path.read_text())
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns) as progress:
        task = progress.add_task("cells", total=len(todo))
        for cell in todo:
            progress.update(task, description=cell_id(cell))
            row = run_one(cell, out)
            append(results, row)
            status = row["status"] if row["status"] != "ok" else f"test mse {row['test_mse']:.4f}"
            progress.console.print(f"{cell_id(cell)}: {status} ({row.get('wall_s', 0):.0f} s)")
            progress.advance(task)
    report.write(out)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
