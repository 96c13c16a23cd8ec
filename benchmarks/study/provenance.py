"""What a result row records of the code and libraries that produced it."""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def commit() -> str:
    """The checkout's git commit, marked '+changes' when the library or benchmark code differed from
    it; 'unknown' outside a git checkout."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    found = git("rev-parse", "--short=12", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no", "--", "ts_continuum", "kernels", "benchmarks",
           ":!benchmarks/results"):  # results the runner writes are not code
        found += "+changes"
    return found


@functools.cache
def software(code: str | None = None) -> str:
    """The code and libraries a cell ran with: the commit (``code``, or this checkout's ``commit()``)
    the versions of torch, lightning and triton imported here, and the C allocator's setting (CPU
    timings depend on it)."""
    import lightning
    import torch

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    from ts_continuum import allocator

    return (f"commit {code or commit()}; torch {torch.__version__}; lightning {lightning.__version__}; "
            f"triton {triton_version}; {allocator.describe()}")


@functools.cache
def library_digest() -> str:
    """A hash of the ts_continuum source this process imports (kernels included), by module path, so
    an editable install and a wheel of the same code agree: tells whether two machines run the same
    library whatever their install paths."""
    import ts_continuum
    import ts_continuum.kernels

    digest = hashlib.sha256()
    for package in (ts_continuum, ts_continuum.kernels):
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root)
            if package is ts_continuum and relative.parts[0] == "kernels":
                continue  # a wheel's kernels/ lies inside the package: hashed once, as ts_continuum.kernels
            digest.update(f"{package.__name__}/{relative.as_posix()}\n".encode() + path.read_bytes())
    return digest.hexdigest()[:16]
