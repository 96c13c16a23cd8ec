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
    """The process's largest resident set so far, in MB (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as uptime prints them: how shared the machine was."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
