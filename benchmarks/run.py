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
import csv
import difflib
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
from benchmarks.provenance import software
from benchmarks.run_lock import run_lock
from benchmarks.study_cell import KEY_FIELDS, OPTIONAL, PCT_START, REGIMES, REQUIRED, cell_id, run_cell
from ts_continuum.models import MODELS
from ts_continuum.models.layers import ATTENTIONS, POS_ENCODINGS

# The values an axis takes (datasets: the bundled ones in their published spelling, or a CSV path).
AXIS_VALUES = {"model": tuple(MODELS), "attention": ATTENTIONS, "pos_encoding": POS_ENCODINGS,
               "regime": tuple(REGIMES)}
DATASETS = ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather")

ROOT = Path(__file__).resolve().parents[1]
GRIDS = ROOT / "benchmarks" / "grids"
# the order cells run in: both attentions of one setting side by side, horizons outermost
LOOP_ORDER = ("horizon", "dataset", "seed", "regime", "pos_encoding", "model", "attention")
RESULT_FIELDS = list(KEY_FIELDS) + [
    "status", "test_mse", "test_mae", "best_val_mse", "epochs", "best_epoch", "train_s_per_epoch",
    "first_epoch_s", "fit_s", "wall_s", "peak_rss_mb", "threads", "n_params", "val_curve", "cell_id",
    "block", "config", "error", "finished_at", "test_curve", "software",
]
# What a grid may hold: a block names itself, gives the axes and may override settings; defaults
# and overrides hold only the settings run_cell reads.
GRID_KEYS = ("name", "out", "defaults", "blocks")
BLOCK_KEYS = ("name", *LOOP_ORDER, "overrides")
SETTINGS = (*REQUIRED, *OPTIONAL)


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
        "eval_batch_size": cfg["data"].get("eval_batch_size", OPTIONAL["eval_batch_size"]),
        "max_epochs": cfg["trainer"]["max_epochs"],
        "patience": next(c["init_args"]["patience"] for c in cfg["trainer"]["callbacks"]
                         if "EarlyStopping" in c["class_path"]),
    }


def unknown_key(key, allowed: tuple, where: str, misplaced: dict[tuple, str]) -> str:
    """Why ``key`` has no place here: where it belongs instead, or the nearest allowed key."""
    for keys, advice in misplaced.items():
        if key in keys:
            return f"{where}: {key!r} {advice}"
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"allowed here: {', '.join(allowed)}"
    return f"{where}: unknown key {key!r}, which the runner would ignore; {hint}"


def bad_value(where: str, axis_name: str, value) -> str:
    """Why ``value`` is refused on an axis: a near spelling would fail later, or (names read in any
    case) run as a setting of its own that pairs with nothing and misses the published row."""
    allowed = AXIS_VALUES[axis_name]
    same = [a for a in allowed if str(a).lower() == str(value).lower()]
    close = same or difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(map(str, allowed))}"
    return f"{where}: {axis_name} {value!r} is not one the runner knows; {hint}"


def check_keys(grid: dict) -> None:
    """Refuse any key the runner would not use: run_cell reads only its settings, so a typo such as
    ``limit_train_batch`` (or an unsupported ``weight_decay``) would silently run something else."""
    if not isinstance(grid, dict) or not isinstance(grid.get("blocks"), list):
        raise ValueError("a grid is a mapping with a list of 'blocks'")
    axis = {LOOP_ORDER: "is an axis: give it as a key of each block"}
    setting = {SETTINGS: "is a setting: put it under 'defaults' or a block's 'overrides'"}
    errors = [unknown_key(k, GRID_KEYS, "grid", setting) for k in grid if k not in GRID_KEYS]
    errors += [unknown_key(k, SETTINGS, "defaults", axis) for k in grid.get("defaults") or {} if k not in SETTINGS]
    for i, block in enumerate(grid["blocks"]):
        if not isinstance(block, dict):
            errors.append(f"block {i + 1}: not a mapping of keys {BLOCK_KEYS}")
            continue
        name = f"block {block.get('name', i + 1)!r}"
        errors += [unknown_key(k, BLOCK_KEYS, name, {SETTINGS: "is a setting: put it under the block's 'overrides'"})
                   for k in block if k not in BLOCK_KEYS]
        errors += [unknown_key(k, SETTINGS, f"{name} overrides", axis)
                   for k in block.get("overrides") or {} if k not in SETTINGS]
        missing = [k for k in BLOCK_KEYS[:-1] if k not in block]
        if missing:
            errors.append(f"{name} lacks {missing}: every block has a name and gives each axis {LOOP_ORDER}")
        errors += [bad_value(name, axis_name, value) for axis_name in AXIS_VALUES if axis_name in block
                   for value in (block[axis_name] if isinstance(block[axis_name], list) else [block[axis_name]])
                   if value not in AXIS_VALUES[axis_name]]
        datasets = block.get("dataset", [])
        errors += [f"{name}: dataset {d!r} is spelled {canonical!r} in the study (its configs, published rows "
                   "and pairs use that name)" for d in (datasets if isinstance(datasets, list) else [datasets])
                   for canonical in DATASETS if str(d).lower() == canonical.lower() and d != canonical]
    if errors:
        raise ValueError("\n".join(errors))


def expand(grid: dict) -> list[dict]:
    """All cells of a grid, in run order: published settings, then grid defaults, then block overrides."""
    check_keys(grid)
    cells, seen = [], {}
    for block in grid["blocks"]:
        axes = {k: block[k] if isinstance(block[k], list) else [block[k]] for k in LOOP_ORDER}
        for values in itertools.product(*(axes[k] for k in LOOP_ORDER)):
            key = dict(zip(LOOP_ORDER, values))
            cell = {**published_settings(key["model"], key["dataset"]), **(grid.get("defaults") or {}),
                    **(block.get("overrides") or {}), **key, "block": block["name"]}
            missing = [k for k in REQUIRED if k not in cell]
            if missing:
                raise ValueError(f"block {block['name']!r}: cell {key} lacks {missing}; "
                                 "give them in defaults or overrides")
            cid = cell_id(cell)
            first = seen.get(cid)
            if first is None:
                seen[cid] = cell
                cells.append(cell)
                continue
            was, now = experiment(first), experiment(cell)  # an optional setting left out is its default
            differ = sorted(k for k in SETTINGS if was[k] != now[k])
            if differ:  # it would be dropped, and its partner paired with a run of other settings
                detail = ", ".join(f"{k} {now[k]} (block {first['block']!r}: {was[k]})" for k in differ)
                raise ValueError(f"block {block['name']!r} repeats cell {cid} of block {first['block']!r} with other "
                                 f"settings: {detail}. A cell runs once per results folder; run other settings "
                                 "of the same cells into another --out")
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


def recorded(path: Path, retry_failed: bool) -> dict[str, list[dict]]:
    """Cell id -> the rows that stand as its result, so the runner skips it: its finished rows, or
    for a cell that never finished its failures, unless they are to be retried."""
    if not path.exists():
        return {}
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    ok = {r["cell_id"] for r in rows if r["status"] == "ok"}
    done: dict[str, list[dict]] = {}
    for r in rows:
        if r["status"] == "ok" or (r["cell_id"] not in ok and not retry_failed):
            done.setdefault(r["cell_id"], []).append(r)
    return done


def experiment(cell: dict) -> dict[str, str]:
    """The settings that decide a cell's result, as JSON: those run_cell reads, a missing optional
    one at run_cell's default (so a config recorded before a default was written out still
    matches). JSON keeps 1 and 1.0 apart: Lightning reads them as one batch and all batches. The
    block's name is left out: renaming a block changes no result."""
    full = {**OPTIONAL, **cell}
    return {k: json.dumps(full[k], sort_keys=True) if k in full else "not recorded" for k in SETTINGS}


def conflicts(cells: list[dict], done: dict[str, list[dict]]) -> list[str]:
    """Recorded results the grid does not describe: cells it gives other settings than they ran
    with (reusing them would pass off one experiment as another) and finished cells it lacks (its
    grid.yaml would no longer describe them)."""
    now = {cell_id(c): experiment(c) for c in cells}
    problems = []
    for cid, rows in done.items():
        if cid not in now:
            if any(r["status"] == "ok" for r in rows):
                problems.append(f"{cid}: recorded, but not in this grid")
            continue
        for r in rows:
            try:
                then = experiment(json.loads(r["config"]))
            except (TypeError, ValueError):  # no config column, or a blank one
                then = dict.fromkeys(SETTINGS, "not recorded")
            diff = [f"{k} {then[k]} recorded, {now[cid][k]} now" for k in SETTINGS if then[k] != now[cid][k]]
            if diff:
                how = "recorded as failed" if r["status"] != "ok" else "finished"
                problems.append(f"{cid} ({how}): " + "; ".join(diff))
                break
    return problems


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
    p = argparse.ArgumentParser(description="Run a grid of study cells (resumable).")
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


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
