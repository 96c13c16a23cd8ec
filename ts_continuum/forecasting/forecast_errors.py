"""Errors of the forecast API and the helpers that make their messages useful."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Iterable

import numpy as np

PACKAGE = str(Path(__file__).resolve().parents[1])  # ts_continuum/


class NotFittedError(ValueError):
    """A method needs a fitted forecaster: call ``fit`` (or ``Forecaster.load``) first."""


class TrainingDivergedError(RuntimeError):
    """``fit`` ended with weights that are not finite, which would forecast only NaN."""


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning point at the first caller outside ts_continuum (the
    user's line), however deep inside the package it is raised; call it in the ``warnings.warn`` call."""
    frame, level = sys._getframe(1), 1
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def did_you_mean(name: str, options: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the closest option, or "" when nothing is close."""
    close = difflib.get_close_matches(str(name), [str(o) for o in options], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def listing(items: Iterable, limit: int = 5) -> str:
    """A short human list: the first ``limit`` items and how many more."""
    items = list(items)
    shown = ", ".join(repr(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def positive_int(name: str, value) -> int:
    """``value`` as an int, or a ValueError naming ``name`` (bools and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)
