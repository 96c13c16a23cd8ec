"""The C allocator setting of the library's entry points: freed memory is kept for the next call.

glibc's malloc serves a block above its mmap threshold (adjusted up to at most 32 MiB) with a fresh
mapping from the kernel, unmaps it when it is freed, and gives the top of its heap back beyond its
trim threshold. Continuous attention allocates tile-sized temporaries (tens of MB) on every call,
so a CPU training step paid for each of them again in page faults and system time, which softmax
attention's few small buffers do not (issue 47). :func:`keep_freed_memory` raises both thresholds
to 1 GiB with ``mallopt``: freed blocks stay in the process and the next call reuses them, the
effect PyTorch's CPU performance guide gets by preloading jemalloc or tcmalloc. Only where memory
comes from changes, never a result; the process keeps up to 1 GiB it freed instead of returning it.

The ``ts-continuum`` command, ``Forecaster`` training and the benchmark runners call it at start-up.
``TS_CONTINUUM_ALLOCATOR=0`` leaves the allocator alone; so does a process whose C library is not
glibc (macOS, Windows, musl), one with another malloc preloaded (jemalloc, tcmalloc, mimalloc) and
one whose malloc settings come from the environment (``GLIBC_TUNABLES``, ``MALLOC_*_``).

Kept memory can pile up where batches differ in shape (ragged series padded per batch): blocks of
ever new sizes fragment the heap, and its free part grows while the memory in use stays flat.
:func:`release_freed_memory` (``malloc_trim``) hands the free pages back; the
``ReleaseFreedMemory`` training callback calls it every so many steps.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Callable, Mapping

ENV = "TS_CONTINUUM_ALLOCATOR"
THRESHOLD = 1 << 30
# The largest mmap threshold glibc's manual promises on 64-bit systems: the versions tried here take
# 1 GiB, a version that refuses it still gets this much.
FALLBACK_MMAP_THRESHOLD = 32 << 20
# mallopt's parameter numbers (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
# environment variables through which a user sets glibc's malloc (man 3 mallopt, tunables)
GLIBC_MALLOC_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")

_outcome: str | None = None


def keep_freed_memory() -> str:
    """Keep freed memory in the process (glibc), once per process; says what was done.

    Raises ValueError if ``TS_CONTINUUM_ALLOCATOR`` holds something other than 0 or 1.
    """
    global _outcome
    if _outcome is None:
        _outcome = configure(os.environ.get(ENV), os.environ, glibc_mallopt)
    return _outcome


def describe() -> str:
    """What :func:`keep_freed_memory` did in this process, without doing it (benchmarks record it)."""
    return _outcome or "malloc left as it is (keep_freed_memory not called)"


def enabled(value: str | None) -> bool:
    """Whether ``TS_CONTINUUM_ALLOCATOR`` (unset: on) asks for the setting."""
    text = (value or "").strip().lower()
    if text in ("", "1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{ENV}={value!r} is not understood: set it to 0 to leave the C allocator as it is, or to 1 "
                     "(the default) to keep freed memory for reuse")


Mallopt = Callable[[int, int], int]


def configure(value: str | None, environ: Mapping[str, str], probe: Callable[[], tuple[Mallopt | None, str]]) -> str:
    """Apply the setting unless ``value`` (the variable's), the environment or the process rules it out."""
    if not enabled(value):
        return f"malloc left as it is ({ENV}={value})"
    given = [name for name in GLIBC_MALLOC_ENV if name in environ]
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        given.append("GLIBC_TUNABLES")
    if given:
        return f"malloc left as it is: its settings come from {', '.join(given)}"
    mallopt, why_not = probe()
    if mallopt is None:
        return f"malloc left as it is: {why_not}"
    mmap = THRESHOLD if mallopt(M_MMAP_THRESHOLD, THRESHOLD) else FALLBACK_MMAP_THRESHOLD
    if mmap != THRESHOLD and not mallopt(M_MMAP_THRESHOLD, mmap):
        return "malloc left as it is: glibc refused to raise its mmap threshold"
    mallopt(M_TRIM_THRESHOLD, THRESHOLD)
    return f"glibc malloc keeps freed memory (mmap threshold {mmap >> 20} MiB, trim threshold {THRESHOLD >> 20} MiB)"


def release_freed_memory() -> bool:
    """Hand the free pages of glibc's heap back to the system (``malloc_trim(0)``): the resident
    memory falls to what is in use. Only where memory comes from changes (a kernel whose summation
    order follows its buffers' alignment may differ in the last float digits); the next allocations
    fault their pages in again. False, doing nothing, where the process does not use glibc's malloc."""
    glibc, _ = _glibc()
    if glibc is None:
        return False
    glibc.malloc_trim.argtypes, glibc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    glibc.malloc_trim(0)
    return True


def glibc_mallopt() -> tuple[Mallopt | None, str]:
    """glibc's ``mallopt`` if this process allocates with glibc's malloc, else None and why not."""
    glibc, why_not = _glibc()
    if glibc is None:
        return None, why_not
    mallopt = glibc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt, ""


def _glibc() -> tuple[ctypes.CDLL | None, str]:
    """The C library if this process allocates with glibc's malloc, else None and why not."""
    if not sys.platform.startswith("linux"):
        return None, f"the C library is not glibc ({sys.platform})"
    try:
        process = ctypes.CDLL(None)
        _ = process.gnu_get_libc_version  # glibc's own symbol: musl and others lack it
        glibc = ctypes.CDLL("libc.so.6")
    except (OSError, AttributeError):
        return None, "the C library is not glibc"
    if _address(process.malloc) != _address(glibc.malloc):
        return None, "another allocator replaces glibc's malloc (LD_PRELOAD)"
    return glibc, ""


def _address(function) -> int | None:
    return ctypes.cast(function, ctypes.c_void_p).value
