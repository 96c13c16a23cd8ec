"""Running cells: one cell into its folder, its failure recorded as a result, and the serial executor.

A cell function takes the cell (a flat dict) and the folder for its files and returns the metrics of
its result row (``cell.run_cell`` for the study); it is an argument, so another study can plug in
its own. An executor takes the cells and yields their rows as they finish; the runner alone appends
them to ``results.csv``.
"""

from __future__ import annotations

import json
import logging
import socket
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from benchmarks.study.cell import KEY_FIELDS, cell_id
from benchmarks.study.provenance import software

CellFunction = Callable[[dict, Path], dict]


def cell_row(cell: dict) -> dict:
    """The columns that name a cell and its settings, which every row of it holds."""
    row = {k: cell[k] for k in KEY_FIELDS}
    row.update(cell_id=cell_id(cell), block=cell["block"], config=json.dumps(cell, sort_keys=True))
    return row


def finished(row: dict, software_text: str) -> dict:
    """``row`` stamped with when and where it finished and the code it ran."""
    return {**row, "finished_at": time.strftime("%Y-%m-%d %H:%M:%S"), "software": software_text,
            "host": socket.gethostname()}


def run_one(cell: dict, out: Path, cell_fn: CellFunction) -> dict:
    """Run one cell into ``out/runs/<cell id>/`` (its config, Lightning's log, and the traceback of a
    failure) and return its row; a cell that raises is a result too, recorded as failed."""
    cell_dir = out / "runs" / cell_id(cell)
    cell_dir.mkdir(parents=True, exist_ok=True)
    (cell_dir / "cell.json").write_text(json.dumps(cell, indent=2))
    handler = logging.FileHandler(cell_dir / "log.txt", mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric", "lightning")]
    for lg in loggers:
        lg.addHandler(handler)
    row = cell_row(cell)
    try:
        row.update(cell_fn(cell, cell_dir), status="ok")
    except Exception as exc:  # a failed cell is a result: record it and go on
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        (cell_dir / "error.txt").write_text(traceback.format_exc())
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
        handler.close()
    return finished(row, software())


def serial(cells: Iterable[dict], out: Path, cell_fn: CellFunction,
           started: Callable[[dict], None] = lambda cell: None) -> Iterator[dict]:
    """The cells one after another in this process, in grid order."""
    for cell in cells:
        started(cell)
        yield run_one(cell, out, cell_fn)
