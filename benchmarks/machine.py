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
