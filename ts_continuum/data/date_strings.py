"""Date strings that read both day-first and month-first.

pandas reads a column of date strings with one layout guessed from the first string, month-first
when that string allows it. When no day in the column is above 12, the day-first layout parses every
string too and nothing tells which was meant: hourly data from 1 to 7 January read month-first lands
on the first of seven months, silently. Of two such readings, the one that spaces the times
regularly is the data's; when both or neither do, the column is refused with the fix.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

try:
    from pandas.tseries.api import guess_datetime_format
except ImportError:  # pandas < 2.2 keeps it private
    from pandas._libs.tslibs.parsing import guess_datetime_format

# A regular reading's largest gap is at most this many times its median gap: weekends in business days
# (3) or a missing week of daily data pass; a misread day boundary in sub-daily data is a jump of about
# a month (56 steps of 12 hours, 720 of an hour).
REGULAR = 7

__all__ = ["guess_datetime_format", "day_month_reading"]


def day_month_reading(raw: pd.Series, parsed: pd.DatetimeIndex, layout: str | None, what: str,
                      fix: str) -> pd.DatetimeIndex:
    """``parsed`` (``raw`` read with ``layout``), or the reading with day and month exchanged when
    that one parses every string too and alone gives regularly spaced times.

    Ambiguous columns that both or neither reading space regularly are a ValueError: ``what`` names
    the column, and ``fix`` says how to mend it, with ``{day_first}`` and ``{month_first}`` standing
    for the two layouts.
    """
    swapped = _swapped(layout)
    if swapped is None:
        return parsed
    try:
        other = pd.DatetimeIndex(pd.to_datetime(raw, format=swapped))
    except (ValueError, TypeError):  # some day is above 12: only one reading exists
        return parsed
    differ = np.flatnonzero((parsed != other) & ~parsed.isna())
    if not len(differ):  # every date has its day equal to its month
        return parsed
    regular = _regular(parsed), _regular(other)
    if regular == (True, False):
        return parsed
    if regular == (False, True):
        return other
    month_first, day_first = (layout, swapped) if layout.startswith("%m") else (swapped, layout)
    by_layout = {layout: parsed, swapped: other}
    i = differ[0]
    example = f"{raw.iloc[i]!r} is {by_layout[month_first][i]} month-first and {by_layout[day_first][i]} day-first"
    spacing = ("both readings space the times regularly" if all(regular) else
               f"neither reading spaces the times regularly (no gap above {REGULAR} times the typical one)")
    raise ValueError(f"{what} holds date strings that read both month-first and day-first, since no day is above "
                     f"12 ({example}), and {spacing}, so which is meant cannot be told; "
                     + fix.format(day_first=day_first, month_first=month_first))


def _swapped(layout: str | None) -> str | None:
    """``layout`` with day and month exchanged when they lead it ('%m/%d/%Y' <-> '%d/%m/%Y'), else
    None: year-first layouts are ISO 8601's order, which nobody writes day-first."""
    match = re.match(r"%([dm])([^%]+)%([dm])", layout or "")
    if match is None or match.group(1) == match.group(3):
        return None
    return f"%{match.group(3)}{match.group(2)}%{match.group(1)}{layout[match.end():]}"


def _regular(index: pd.DatetimeIndex) -> bool:
    """Whether the distinct times' gaps are all within ``REGULAR`` times their median."""
    times = np.unique(index[~index.isna()].asi8)
    gaps = np.diff(times)
    return len(gaps) > 0 and gaps.max() <= REGULAR * np.median(gaps)
