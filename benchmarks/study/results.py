"""A study folder's ``results.csv``: which cells it holds, whether the grid still describes them, and
appending a row. One writer per folder (``lock.py``) appends; readers take the last row of a cell.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from benchmarks.study.cell import KEY_FIELDS, cell_id
from benchmarks.study.grid import SETTINGS, experiment

RESULT_FIELDS = list(KEY_FIELDS) + [
    "status", "test_mse", "test_mae", "best_val_mse", "epochs", "best_epoch", "train_s_per_epoch",
    "first_epoch_s", "fit_s", "wall_s", "peak_rss_mb", "threads", "n_params", "val_curve", "cell_id",
    "block", "config", "error", "finished_at", "test_curve", "software", "host",
]


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


