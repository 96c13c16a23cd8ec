"""What a result row records of the code and libraries that produced it."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def software() -> str:
    """The code and libraries a cell ran with: the git commit (marked '+changes' when the library or
    benchmark code differed from it) and the versions of torch, lightning and triton."""
    import lightning
    import torch

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no", "--", "ts_continuum", "kernels", "benchmarks",
           ":!benchmarks/results"):  # results the runner writes are not code
        commit += "+changes"
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    return f"commit {commit}; torch {torch.__version__}; lightning {lightning.__version__}; triton {triton_version}"
