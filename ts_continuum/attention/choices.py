"""One check of a string option against its choices, so every refusal names them the same way."""

from __future__ import annotations


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError naming them: an unknown name must
    never fall back to a default without a word."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value
