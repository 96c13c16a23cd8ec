"""The errors the ``ts-continuum`` command reports in one line instead of a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class CLIError(ValueError):
    """A command line or config the CLI refuses; ``main`` prints it without a traceback."""


@contextmanager
def user_input_errors() -> Iterator[None]:
    """Constructors and the data module refuse bad options and data with ValueError or FileNotFoundError,
    whose message says what to change: reported as a CLIError instead of behind 20 frames of
    jsonargparse and Lightning. Other exception types are bugs and keep their traceback."""
    try:
        yield
    except CLIError:
        raise
    except (ValueError, FileNotFoundError) as error:
        raise CLIError(str(error)) from error
