"""One runner per results folder: a lock file naming the runner's process, host and start time."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK = ".runner.lock"  # in the results folder while a runner writes to it


@contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """One runner per results folder: two would each run every pending cell (twice the compute) and
    append both rows; the report, keeping the last, would hide it. A lock left by a runner that no
    longer exists (killed) is taken over, also when its process id now belongs to another process
    (the start time tells them apart). A lock from another host is never taken over: its runner
    cannot be checked from here."""
    lock = out / LOCK
    for _ in range(2):
        try:
            _create(lock, json.dumps(_this_process()))
        except FileExistsError:
            holder = _read(lock)
            if not holder:  # written whole or not at all (_create), so not a runner starting up
                raise SystemExit(f"{lock} cannot be read as a runner's lock; delete it if no runner is writing to "
                                 f"{out}") from None
            if holder.get("host", socket.gethostname()) != socket.gethostname():
                raise SystemExit(f"a runner on host {holder['host']} (process {holder.get('pid')}) is writing to "
                                 f"{out}; wait for it to finish, or delete {lock} if it is no longer "
                                 "running") from None
            if _running(holder):
                raise SystemExit(f"another runner (process {holder['pid']}) is writing to {out}; wait for it to "
                                 f"finish or stop it (a lock left by a killed runner is taken over: {lock})") from None
            lock.unlink(missing_ok=True)  # stale: its runner is gone
            continue
        break
    else:  # another runner took the stale lock first
        raise SystemExit(f"another runner has just started writing to {out}; wait for it to finish")
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def _create(lock: Path, text: str) -> None:
    """Create ``lock`` holding ``text`` in one step (FileExistsError if it exists): a lock created
    empty and written after could be read, half written, as a stale lock and taken over."""
    temp = lock.with_name(f"{lock.name}.{os.getpid()}.tmp")
    temp.write_text(text)
    try:
        os.link(temp, lock)
    finally:
        temp.unlink(missing_ok=True)


def _this_process() -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "started": _start_time(pid)}


def _read(lock: Path) -> dict:
    """The lock's holder; a bare process id (locks written before the host was recorded) reads too."""
    try:
        text = lock.read_text().strip()
    except OSError:
        return {}
    try:
        holder = json.loads(text or "{}")
    except ValueError:
        return {}
    return {"pid": holder} if isinstance(holder, int) else holder if isinstance(holder, dict) else {}


def _running(holder: dict) -> bool:
    """Whether the holder's process still runs here: its id is alive and, where the system says
    when processes started (Linux), it started when the lock's runner did."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0 or not _alive(pid):
        return False
    started, now = holder.get("started"), _start_time(pid)
    return started is None or now is None or started == now


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (Linux); None where /proc is absent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[19])  # field 22 of stat(5); the first two fields were cut
