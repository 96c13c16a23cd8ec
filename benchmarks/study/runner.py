"""The study runner: a YAML grid of cells, run one after another or on Ray, resumable, with a progress bar.

    python -m benchmarks.run --profile quick            # minutes on a CPU (CI runs it)
    python -m benchmarks.run --profile cpu              # about two hours on two cores
    python -m benchmarks.run --grid benchmarks/grids/study.yaml --dry-run   # the study's cells still to run
    python -m benchmarks.run --grid benchmarks/grids/study.yaml --out /tmp/study --max-cells 2
    python -m benchmarks.run --grid benchmarks/grids/full.yaml --executor ray --address head:6379 --gpus-per-cell 1

``<out>`` is the grid's ``out`` folder unless ``--out`` names another. Every finished cell appends
one row to ``<out>/results.csv`` (failed cells too, with the error), so an interrupted run resumes
where it stopped. Per-cell logs, epoch metrics and the exact cell config are under
``<out>/runs/<cell id>/``. After the grid, ``<out>/summary.md`` and plots are written by
``benchmarks.report``. With ``--executor ray`` the cells run as Ray tasks (``ray_executor.py``),
finishing in any order; the runner still appends every row itself, so either executor resumes a
folder the other left.

A grid may grow (new blocks, renamed blocks), but a recorded result is never reused for settings it
was not run with: a grid that gives a recorded cell other settings, or lacks one, is refused before
anything runs, and ``<out>/grid.yaml`` keeps describing the results.
"""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path

import yaml
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from benchmarks.study import report
from benchmarks.study.cell import OPTIONAL, cell_id, run_cell
from benchmarks.study.execute import CellFunction, serial
from benchmarks.study.grid import GRIDS, ROOT, expand, study_grids, warmup_warnings
from benchmarks.study.lock import run_lock
from benchmarks.study.ray_executor import RayOptions, require_ray, run_cells
from benchmarks.study.results import append, conflicts, recorded
from ts_continuum import allocator


def positive_int(text: str) -> int:
    """--max-cells: 0 or a negative count would run nothing, or slice off cells from the end."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number of cells, not {text!r}")
    return n


def cpus(text: str) -> float:
    """--cpus-per-cell: a cell needs some CPU to run."""
    try:
        n = float(text)
    except ValueError:
        n = 0.0
    if not n > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of CPUs, not {text!r}")
    return n


def gpus(text: str) -> float:
    """--gpus-per-cell: 0 (no GPU), a fraction (cells sharing a GPU) or a whole number."""
    try:
        n = float(text)
    except ValueError:
        n = -1.0
    if not n >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or a positive number of GPUs, not {text!r}")
    return n


def main(argv: list[str] | None = None, cell_fn: CellFunction | None = None) -> None:
    """The command line; ``cell_fn`` replaces the study's cell (``cell.run_cell``) for another study."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description="Run a grid of study cells (resumable).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--profile", choices=[f.stem for f in study_grids()],
                     help="a grid in benchmarks/grids/")
    src.add_argument("--grid", type=Path, help="a grid YAML file")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: the grid's 'out')")
    p.add_argument("--max-cells", type=positive_int, default=None, help="stop after this many new cells")
    p.add_argument("--retry-failed", action="store_true", help="run cells recorded as failed again")
    p.add_argument("--dry-run", action="store_true", help="list the cells that would run")
    p.add_argument("--executor", choices=("serial", "ray"), default="serial",
                   help="serial: one cell after another in this process (default); ray: every pending cell as a "
                        "Ray task, side by side (needs Ray: pip install -e '.[cluster]')")
    ray_options = p.add_argument_group("--executor ray")
    ray_options.add_argument("--address", default=None,
                             help="the Ray cluster's address (e.g. ray://head:10001 or head:6379); absent: a local "
                                  "Ray instance on this machine")
    ray_options.add_argument("--cpus-per-cell", type=cpus, default=None, help="CPUs a cell reserves (default 1); "
                             "also its torch threads")
    ray_options.add_argument("--gpus-per-cell", type=gpus, default=None,
                             help="GPUs a cell reserves (default 0; a fraction shares a GPU); give the grid "
                                  "accelerator: gpu")
    args = p.parse_args(argv)
    try:
        allocator.keep_freed_memory()  # as the ts-continuum command: cells train as users' runs do
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    given = [f"--{k.replace('_', '-')}" for k in ("address", "cpus_per_cell", "gpus_per_cell")
             if getattr(args, k) is not None]
    if given and args.executor != "ray":
        p.error(f"{', '.join(given)} apply to --executor ray only")
    options = None
    if args.executor == "ray":
        require_ray()
        options = RayOptions(args.address, args.cpus_per_cell or 1.0, args.gpus_per_cell or 0.0)
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
    cell_fn = cell_fn or run_cell  # looked up now, so a test may replace the module's run_cell
    if args.dry_run:
        _run_grid(args, grid_path, grid, cells, out, results, cell_fn, options)
        return
    out.mkdir(parents=True, exist_ok=True)
    with run_lock(out):
        _run_grid(args, grid_path, grid, cells, out, results, cell_fn, options)


def gpu_mismatch(cells: list[dict], options: RayOptions) -> str | None:
    """Why Ray would run these cells on the wrong devices: a cell reserving GPUs that trains on the CPU
    wastes them, Ray hides every GPU from a task that reserves none, and a cell's Trainer given several
    GPUs would start DDP processes inside a Ray worker."""
    if options.gpus_per_cell > 1:
        return (f"--gpus-per-cell {options.gpus_per_cell:g}: a cell trains on one device; give 1, or a fraction "
                "(0.5: two cells share a GPU)")
    accelerators = sorted({str(c.get("accelerator", OPTIONAL["accelerator"])) for c in cells})
    if options.gpus_per_cell > 0 and "cpu" in accelerators:
        return (f"--gpus-per-cell {options.gpus_per_cell:g} reserves GPUs, but cells train with accelerator 'cpu'; "
                "give accelerator: gpu in the grid's defaults (a setting of its own: another --out), or no GPUs")
    if options.gpus_per_cell == 0 and {"gpu", "cuda"} & set(accelerators):
        return ("cells train with accelerator 'gpu', but Ray hides GPUs from tasks that reserve none: give "
                "--gpus-per-cell (1 for a GPU per cell)")
    return None


def _run_grid(args, grid_path: Path, grid: dict, cells: list[dict], out: Path, results: Path,
              cell_fn: CellFunction, options: RayOptions | None) -> None:
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
    mismatch = options and gpu_mismatch(todo, options)
    if mismatch:
        raise SystemExit(f"{grid_path}: {mismatch}")
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
        if options is None:
            rows = serial(todo, out, cell_fn, lambda cell: progress.update(task, description=cell_id(cell)))
        else:
            rows = run_cells(todo, out, cell_fn, options)
        with closing(rows):
            for row in rows:
                append(results, row)
                status = row["status"] if row["status"] != "ok" else f"test mse {row['test_mse']:.4f}"
                progress.console.print(f"{row['cell_id']}: {status} ({row.get('wall_s', 0):.0f} s)")
                progress.advance(task)
    report.write(out)
