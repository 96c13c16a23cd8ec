"""What a measurement ran on and the command that ran it, recorded beside it: figures from different
machines do not compare, and a figure is only as good as the command that reproduces it."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU model ("model name" in /proc/cpuinfo on Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_facts() -> dict:
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "machine": platform.machine()}


def command(module: str, args: list[str]) -> str:
    """``python -m <module> <args>``: how a benchmark module run with ``python -m`` is recorded (its
    ``sys.argv[0]`` is the file's absolute path, which names this checkout, not the command)."""
    return " ".join(["python -m", module, *args])


def faults_and_system_time() -> tuple[int, float]:
    """Minor page faults and system CPU seconds of this process so far: what memory allocation costs,
    counted rather than timed, so a loaded machine does not move them."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_minflt, usage.ru_stime


def peak_rss_mb() -> float:
    """The largest resident set since :func:`reset_peak_rss` (or since the process started), in MB.

    Linux: the kernel's high-water mark ``VmHWM`` (KiB), which ``reset_peak_rss`` can lower; elsewhere
    ``getrusage``'s lifetime peak."""
    import resource

    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Start :func:`peak_rss_mb` again from the current resident set, so each of several runs in one
    process gets its own peak (Linux >= 4.0: writing 5 to ``/proc/self/clear_refs``). False where the
    system cannot: the peak then stays the process's lifetime peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as uptime prints them: how shared the machine was."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
