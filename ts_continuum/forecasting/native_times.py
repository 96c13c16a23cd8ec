"""Time columns as native numbers and back.

Native times are int64 nanoseconds since the epoch (UTC for tz-aware data) for datetimes and float64
for numbers, so windows and steps are plain array arithmetic; the dtype and time zone name are kept to
give answers in the user's kind of timestamp. Strings are parsed with one format for the whole column,
never one by one, so day-first and month-first readings cannot mix; a column that reads both ways
is taken in the reading that spaces it regularly, or refused (``data/date_strings.py``).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd

from ..data.date_strings import day_month_reading, guess_datetime_format


def period_advice(what: str, dtype: pd.PeriodDtype, fix: str) -> str:
    """Periods name spans, not instants; their start times work, and for months and longer periods
    the calendar check that follows explains the month-number fix."""
    return (f"{what} holds pandas Periods ({dtype}); the Forecaster needs datetimes or numbers: convert them to "
            f"their start times with {fix} (for periods of a month or longer, fit on month numbers instead, as "
            "the error after that conversion explains)")


def parse_times(raw: pd.Series | pd.Index, name: str) -> tuple[np.ndarray, str, str | None, str]:
    """Native times, their kind ("datetime"/"numeric"), time zone and dtype name."""
    dtype = raw.dtype
    if pd.api.types.is_bool_dtype(dtype):
        raise ValueError(f"time column {name!r} is boolean; it must hold datetimes or numbers")
    if isinstance(dtype, pd.PeriodDtype):
        fix = f"df[{name!r}] = df[{name!r}].dt.to_timestamp()"
        raise ValueError(period_advice(f"time column {name!r}", dtype, fix))
    if pd.api.types.is_numeric_dtype(dtype):
        values = pd.Series(raw).to_numpy(dtype=np.float64, na_value=np.nan)
        if not np.isfinite(values).all():
            raise ValueError(f"time column {name!r} has {int((~np.isfinite(values)).sum())} missing or infinite "
                             "values; every row needs a time")
        return values, "numeric", None, str(dtype)
    if pd.api.types.is_datetime64_any_dtype(dtype):
        index = pd.DatetimeIndex(raw)
    else:
        numbers = _object_numbers(pd.Series(raw), name)
        if numbers is not None:
            return parse_times(numbers, name)
        index = _parse_object_times(pd.Series(raw), name)
    if index.hasnans:
        raise ValueError(f"time column {name!r} has {int(index.isna().sum())} missing timestamps; "
                         "every row needs a time")
    if index.tz is None:
        return index.as_unit("ns").asi8.copy(), "datetime", None, str(index.dtype)
    tz = _tz_name(index, name)
    return index.as_unit("ns").asi8.copy(), "datetime", tz, str(pd.DatetimeTZDtype(index.unit, tz))


def native_to_pandas(times: np.ndarray, kind: str, tz: str | None, time_dtype: str) -> pd.Index:
    """Native times back to pandas, in the dtype (and time zone) the user gave."""
    if kind == "numeric":
        try:
            target = np.dtype(time_dtype)
        except TypeError:  # pandas extension dtypes (e.g. "Int64"): answer in float64
            target = np.dtype(np.float64)
        if target.kind in "iu" and np.all(times == np.round(times)):
            return pd.Index(times.astype(target))
        return pd.Index(times.astype(np.float64))
    index = pd.DatetimeIndex(times.astype("datetime64[ns]"))
    if tz is not None:
        index = index.tz_localize("UTC").tz_convert(tz)
    dtype = pd.api.types.pandas_dtype(time_dtype)
    unit = dtype.unit if isinstance(dtype, pd.DatetimeTZDtype) else np.datetime_data(dtype)[0]
    try:
        return index.as_unit(unit)
    except ValueError:  # a finer time than the user's unit holds: keep nanoseconds
        return index


def _object_numbers(raw: pd.Series, name: str) -> pd.Series | None:
    """An object column of numbers as int64/float64 (None if it holds no numbers); mixed ones are refused.

    Without this, ``pd.to_datetime`` reads integers as nanoseconds since 1970.
    """
    present = [v for v in raw if not _is_missing(v)]
    numeric = [isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
               for v in present]
    if not any(numeric):
        return None
    if not all(numeric):
        other = next(v for v, n in zip(present, numeric) if not n)
        raise ValueError(f"time column {name!r} mixes numbers and other values (e.g. {other!r}); make it one kind, "
                         "e.g. with pd.to_numeric or pd.to_datetime")
    integers = len(present) == len(raw) and all(isinstance(v, (int, np.integer)) for v in present)
    return raw.astype(np.int64 if integers else np.float64)


def _is_missing(value) -> bool:
    return pd.api.types.is_scalar(value) and bool(pd.isna(value))


def _parse_object_times(raw: pd.Series, name: str) -> pd.DatetimeIndex:
    """Date objects as they are; strings with one layout for all (guessed from the first string, as
    pandas does) or as ISO 8601. Never string by string: "02/01/2024" would be read as February 1
    and "13/01/2024" as January 13 in one column, a silent wrong order. A guessed layout whose day
    and month could be the other way round is checked against that reading."""
    stamps = [v for v in raw if isinstance(v, datetime)]
    if len({v.tzinfo is None for v in stamps}) > 1:
        raise ValueError(f"time column {name!r} mixes tz-aware and naive timestamps; make them consistent, "
                         "e.g. localize the naive ones with .tz_localize(...) or use pd.to_datetime(..., utc=True)")
    strings = [v for v in raw if isinstance(v, str)]
    layout = guess_datetime_format(strings[0]) if strings else None
    error = None
    for fmt in ([None] if not strings else [layout, "ISO8601"] if layout else ["ISO8601"]):
        try:
            parsed = pd.DatetimeIndex(pd.to_datetime(raw, format=fmt))
        except (ValueError, TypeError) as exc:
            if any(word in str(exc).lower() for word in ("zone", "tz", "offset")):
                raise ValueError(f"time column {name!r} mixes time zones or tz-aware and naive timestamps ({exc}); "
                                 "convert them to one, e.g. pd.to_datetime(df[...], utc=True)") from None
            error = error or exc
            continue
        if fmt != layout:
            return parsed
        fix = (f"parse the column before fit with its format, e.g. df[{name!r}] = pd.to_datetime(df[{name!r}], "
               "format={day_first!r}) for day-first dates (format={month_first!r} for month-first ones)")
        return day_month_reading(raw, parsed, layout, f"time column {name!r}", fix)
    parse = (f"parse the column before fit, e.g. df[{name!r}] = pd.to_datetime(df[{name!r}], format=...) with its "
             "format (such as '%d/%m/%Y'), or with dayfirst=True for day-first dates")
    if layout:
        misfit = pd.to_datetime(pd.Series(strings), format=layout, errors="coerce").isna()
        example = strings[int(misfit.to_numpy().argmax())] if misfit.any() else None
        raise ValueError(f"time column {name!r} holds date strings that do not all parse with one format: "
                         f"{strings[0]!r} reads as {layout!r}"
                         + (f" but {example!r} does not" if example is not None else "")
                         + f" (e.g. day-first dates read month-first); {parse}") from None
    if not strings:
        raise ValueError(f"time column {name!r} (dtype {raw.dtype}) holds neither datetimes nor numbers ({error}); "
                         "convert it with pd.to_datetime or pd.to_numeric") from None
    raise ValueError(f"time column {name!r} holds strings with no date format pandas can infer (e.g. "
                     f"{strings[0]!r}), and reading each on its own may mix up day and month; {parse} "
                     "(or pd.to_numeric for numbers)") from None


def _tz_name(index: pd.DatetimeIndex, name: str) -> str:
    """A name of ``index``'s time zone that gives the same local times back from a string.

    The zone is kept as a string (saved forecasters store it in JSON), and ``str(tz)`` is not
    always a name: dateutil zones print as ``tzfile('/usr/share/zoneinfo/...')``.
    """
    tz = index.tz
    wall = index.tz_localize(None)
    for candidate in _tz_candidates(tz):
        try:
            same = wall.equals(index.tz_convert(candidate).tz_localize(None))
        except (KeyError, ValueError, TypeError, OSError):  # not a zone pandas can look up
            continue
        if same:
            return candidate
    raise ValueError(f"the time zone {tz!r} of time column {name!r} cannot be stored by name; convert the times "
                     "to an IANA zone, e.g. df[time].dt.tz_convert('Europe/Berlin') or .dt.tz_convert('UTC')")


def _tz_candidates(tz) -> list[str]:
    """Names ``tz`` may go by: zoneinfo's key, pytz's zone, a dateutil file's IANA name, a fixed offset."""
    names = [getattr(tz, "key", None), getattr(tz, "zone", None)]
    path = getattr(tz, "_filename", None)  # dateutil tzfile: '/usr/share/zoneinfo/Europe/Berlin' or 'Europe/Berlin'
    if isinstance(path, str):
        names.append(path.replace("\\", "/").rsplit("zoneinfo/", 1)[-1])
    offset = tz.utcoffset(None)  # only fixed-offset zones answer without a date
    if offset is not None:
        minutes = int(offset.total_seconds()) // 60
        names.append("UTC" if minutes == 0 else
                     f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}")
    names.append(str(tz))
    return [n for n in names if isinstance(n, str) and n]
