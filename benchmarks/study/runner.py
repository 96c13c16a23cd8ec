"""The study runner: a YAML grid of cells, run one after another, resumable, with a progress bar.

    python -m benchmarks.run --profile quick            # minutes on a CPU (CI runs it)
    python -m benchmarks.run --profile cpu              # about two hours on two cores
    python -m benchmarks.run --grid benchmarks/grids/study.yaml --dry-run   # the study's cells still to run
    python -m benchmarks.run --grid benchmarks/grids/study.yaml --out /tmp/study --max-cells 2

``<out>`` is the grid's ``out`` folder unless ``--out`` names another. Every finished cell appends
one row to ``<out>/results.csv`` (failed cells too, with the error), so an interrupted run resumes
where it stopped. Per-cell logs, epoch metrics and the exact cell config are under
``<out>/runs/<cell id>/``. After the grid, ``<out>/summary.md`` and plots are written by
``benchmarks.report``.

A grid may grow (new blocks, renamed blocks), but a recorded result is never reused for settings it
was not run with: a grid that gives a recorded cell other settings, or lacks one, is refused before
anything runs, and ``<out>/grid.yaml`` keeps describing the results.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import traceback
from pathlib import Path

import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from benchmarks.study import report
from benchmarks.study.cell import KEY_FIELDS, cell_id, run_cell
from benchmarks.study.grid import GRIDS, ROOT, expand, warmup_warnings
from benchmarks.study.lock import run_lock
from benchmarks.study.provenance import software
from benchmarks.study.results import append, conflicts, recorded


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
    row["software"] = software()
    return row


def positive_int(text: str) -> int:
    """--max-cells: 0 or a negative count would run nothing, or slice off cells from the end."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number of cells, not {text!r}")
    return n


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description="Run a grid of study cells (resumable).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--profile", choices=sorted(f.stem for f in GRIDS.glob("*.yaml")),
                     help="a grid in benchmarks/grids/")
    src.add_argument("--grid", type=Path, help="a grid YAML file")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: the grid's 'out')")
    p.add_argument("--max-cells", type=positive_int, default=None, help="stop after this many new cells")
    p.add_argument("--retry-failed", action="store_true", help="run cells recorded as failed again")
    p.add_argument("--dry-run", action="store_true", help="list the cells that would run")
    args = p.parse_args(argv)
    grid_path = args.grid or GRIDS / f"{args.profile}.yaml"
    grid = yaml.safe_load(grid_path.read_text())
    if args.out is None and "out" not in grid:
        raise SystemExit(f"{grid_path} names no 'out' folder: give one with --out")
    out = args.out or ROOT / grid["out"]
    results = out / "results.csv"
    try:
        cells = expand(grid)
    except ValueError as exc:
        raise SystemExit(f"{grid_path}: {exc}") from None
    if args.dry_run:
        _run_grid(args, grid_path, grid, cells, out, results)
        return
    out.mkdir(parents=True, exist_ok=True)
    with run_lock(out):
        _run_grid(args, grid_path, grid, cells, out, results)


def _run_grid(args, grid_path: Path, grid: dict, cells: list[dict], out: Path, results: Path) -> None:
    done = recorded(results, args.retry_failed)
    problems = conflicts(cells, done)
    if problems:
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise SystemExit(
            f"{results} holds results that {grid_path} does not describe (settings as the row's config "
            "column and the grid give them):\n  " + "\n  ".join(problems[:10]) + more + "\n"
            f"Nothing was run or overwritten. Write this grid to another folder (--out), or change it back to "
            f"give these cells the settings they ran with ({out / 'grid.yaml'} is the grid that ran them); "
            "a failed cell can also be rerun with --retry-failed.")
    pending = [c for c in cells if cell_id(c) not in done]
    todo = pending[: args.max_cells]
    later = (f", {len(pending) - len(todo)} left for later (--max-cells {args.max_cells})"
             if len(todo) < len(pending) else "")
    print(f"{grid_path.name}: {len(cells)} cells, {len(cells) - len(pending)} already recorded, "
          f"{len(todo)} to run{later} -> {out}")
    for line in warmup_warnings(todo):
        print(line)
    saved, text = out / "grid.yaml", grid_path.read_text()
    if saved.exists() and saved.read_text() != text:
        print(f"{'a run would replace' if args.dry_run else 'replacing'} {saved} with {grid_path.name}: it gives "
              "every recorded cell the settings it ran with")
    if args.dry_run:
        for c in todo:
            print(" ", cell_id(c))
        return
    saved.write_text(text)
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn()]
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

