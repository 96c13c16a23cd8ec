"""Cells as Ray tasks, on a Ray cluster or a local Ray instance (``--executor ray``).

Every pending cell is submitted at once as a task reserving ``cpus_per_cell`` CPUs and
``gpus_per_cell`` GPUs; Ray runs as many side by side as the cluster has room for, and rows come
back in the order cells finish. A worker runs its cell in a temporary folder and sends the cell's
files back with the row, so no file system is shared with the driver; the driver writes them into
``<out>/runs/<cell id>/`` and alone appends rows (the runner), so a killed driver leaves a folder any
executor resumes. A cell that raises is a failed row, as in the serial executor; a worker that dies
mid-cell (killed, out of memory, its node lost) is retried once, then recorded as failed.

The benchmarks package is shipped to the workers with each task (Ray's ``py_modules``); the library
and its dependencies must be installed on every node (``pip install -e ".[cluster]"`` of the same
commit). A worker whose ts_continuum differs from the driver's refuses the cell, so no row claims
code it did not run.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from benchmarks.study.cell import cell_id
from benchmarks.study.execute import CellFunction, cell_row, finished, run_one
from benchmarks.study.provenance import commit, library_digest, software

INSTALL = 'pip install -e ".[cluster]"'
PACKAGE = Path(__file__).resolve().parents[1]  # benchmarks/
NOT_SHIPPED = ["results/", "grids/", "__pycache__/"]  # data the workers do not read


@dataclass(frozen=True)
class RayOptions:
    """Where and with what resources cells run: ``address`` None starts a local Ray instance."""

    address: str | None = None
    cpus_per_cell: float = 1.0
    gpus_per_cell: float = 0.0

    @property
    def threads(self) -> int:
        """Torch threads in a cell: its CPUs (at least one), so side-by-side cells do not oversubscribe."""
        return max(1, int(self.cpus_per_cell))


def require_ray() -> None:
    """Stop at once, saying how to install it, where Ray is missing."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise SystemExit(f"--executor ray needs Ray, an optional dependency: install it with {INSTALL}") from None


def connect(address: str | None, num_cpus: int | None = None) -> None:
    """Join the Ray cluster at ``address``, or start a local instance (of ``num_cpus`` CPUs, default all),
    shipping the benchmarks package to the workers. Worker output stays in Ray's logs: each cell's
    log and traceback come back in its folder."""
    import ray

    local = {} if address else {"include_dashboard": False, "num_cpus": num_cpus}
    ray.init(address=address or "local", log_to_driver=False,
             runtime_env={"py_modules": [str(PACKAGE)], "excludes": NOT_SHIPPED}, **local)


def run_cells(cells: Iterable[dict], out: Path, cell_fn: CellFunction, options: RayOptions) -> Iterator[dict]:
    """Run ``cells`` as Ray tasks and yield their rows as they finish, after writing each cell's files
    into ``out``. Reuses a Ray session this process started with ``connect`` (its resources stand);
    otherwise connects to ``options.address`` or starts a local instance, and shuts it down after."""
    import ray

    own = not ray.is_initialized()
    if own:
        connect(options.address)
    driver = {"commit": commit(), "library": library_digest()}
    task = ray.remote(_run_remote).options(num_cpus=options.cpus_per_cell, num_gpus=options.gpus_per_cell,
                                           max_retries=1, retry_exceptions=False)
    pending = {}
    try:
        pending = {task.remote(cell, cell_fn, options.threads, driver): cell for cell in cells}
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(ref)
            try:
                row, files = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the worker died twice, or the task could not run
                died = isinstance(exc, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                                        ray.exceptions.OutOfMemoryError))
                row, files = _lost(cell, exc, died, software(driver["commit"]))
            write_files(out / "runs" / cell_id(cell), files)
            yield row
    finally:  # interrupted: nobody will record the cells still running
        for ref in pending:
            ray.cancel(ref, force=True)
        if own:
            ray.shutdown()


def _run_remote(cell: dict, cell_fn: CellFunction, threads: int, driver: dict) -> tuple[dict, dict[str, bytes]]:
    """On a worker: the cell's row and its files (path in the cell's folder -> content)."""
    import torch

    if library_digest() != driver["library"]:
        import ts_continuum

        raise RuntimeError(f"this worker's ts_continuum ({Path(ts_continuum.__file__).parent}) is not the driver's "
                           f"code (commit {driver['commit']}); install that commit on every node with {INSTALL}")
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory(prefix="ts-continuum-cell-") as tmp:
        row = run_one(cell, Path(tmp), cell_fn)
        folder = Path(tmp) / "runs" / cell_id(cell)
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    # the code is the driver's (checked above; the shipped package has no git history), the libraries this node's
    return {**row, "software": software(driver["commit"])}, files


def _lost(cell: dict, exc: Exception, died: bool, software_text: str) -> tuple[dict, dict[str, bytes]]:
    """The failed row of a cell whose task ended without a row (its worker died on both tries, or it
    refused the cell), the error's first line in the row and all of it in ``error.txt``."""
    cause = getattr(exc, "cause", None) or exc  # an exception raised in the task, unwrapped
    first = (str(cause).strip().splitlines() or [""])[0]
    retried = " (its worker died on the first try and on the retry)" if died else ""
    row = finished({**cell_row(cell), "status": "failed", "error": f"{type(cause).__name__}: {first}{retried}"},
                   software_text)
    return {**row, "host": ""}, {"error.txt": str(exc).encode()}  # the worker's host is not known here


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """A cell's files from its worker, replacing what an earlier attempt left there."""
    shutil.rmtree(folder, ignore_errors=True)
    for name, content in files.items():
        relative = PurePosixPath(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(f"a worker sent the file {name!r}, outside its cell's folder")
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
