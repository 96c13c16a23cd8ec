"""One runner per results folder: a lock file holding the runner's process id."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = ".runner.lock"  # in the results folder while a runner writes to it


@contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """One runner per results folder: two would each run every pending cell (twice the compute) and
    append both rows; the report, keeping the last, would hide it. A lock left by a runner that no
    longer exists (killed) is taken over."""
    lock = out / LOCK
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and _alive(pid):
                raise SystemExit(f"another runner (process {pid}) is writing to {out}; wait for it to finish or "
                                 f"stop it (a lock left by a killed runner is taken over: {lock})") from None
            lock.unlink(missing_ok=True)  # stale: its runner is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        break
    else:  # another runner took the stale lock first
        raise SystemExit(f"another runner has just started writing to {out}; wait for it to finish")
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
