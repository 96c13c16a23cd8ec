"""The errors the ``ts-continuum`` command reports in one line instead of a traceback."""

from __future__ import annotations

import dis
import os
from collections.abc import Iterator
from contextlib import contextmanager

TRACEBACK_VARIABLE = "TS_CONTINUUM_TRACEBACK"


class CLIError(ValueError):
    """A command line or config the CLI refuses; ``main`` prints it without a traceback."""


def raised_outside(error: BaseException) -> str | None:
    """Where ``error`` was raised, as 'module, file:line', when that is not one of ts-continuum's own
    checks (which say what to change), else None. An error raised inside compiled code (torch's C++,
    numpy) that ts-continuum called is named by the calling line, marked as compiled code."""
    tb = error.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "?")
    where = f"{module}, {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
    if not (module == "ts_continuum" or module.startswith("ts_continuum.")):
        return where
    return None if _raised_by_a_raise_statement(tb) else f"compiled code called from {where}"


def _raised_by_a_raise_statement(tb) -> bool:
    """Whether the innermost frame raised the error itself rather than in a C function it called (a
    traceback ends at the last Python frame, so both look alike there)."""
    for instruction in dis.get_instructions(tb.tb_frame.f_code):
        if instruction.offset == tb.tb_lasti:
            return instruction.opname in ("RAISE_VARARGS", "RERAISE")
    return True  # offset not found: trust the frame, as before


@contextmanager
def user_input_errors() -> Iterator[None]:
    """Constructors and the data module refuse bad options and data with ValueError or FileNotFoundError,
    whose message says what to change: reported as a CLIError instead of behind 20 frames of
    jsonargparse and Lightning. Other exception types are bugs and keep their traceback.

    A ValueError from a library (pandas reading a date, say) is usually bad input too, so it is also
    one line, but one that names where it was raised, so a bug is not hidden: with
    TS_CONTINUUM_TRACEBACK=1 every such error keeps its traceback."""
    try:
        yield
    except CLIError:
        raise
    except (ValueError, FileNotFoundError) as error:
        if os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0"):
            raise
        origin = raised_outside(error) if isinstance(error, ValueError) else None  # a missing file names itself
        if origin is None:
            raise CLIError(str(error)) from error
        raise CLIError(f"{error} (raised in {origin}; {TRACEBACK_VARIABLE}=1 shows the traceback)") from error
