"""The bundled benchmark datasets (ETTh1/2, ETTm1/2, Weather; PhysioNet 2012 in long format) and
plain CSV files as DataFrames."""

from __future__ import annotations

import functools
import hashlib
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import ts_continuum

from .date_strings import day_month_reading, guess_datetime_format

BUNDLED = {
    "etth1": "ETTh1.csv.gz",
    "etth2": "ETTh2.csv.gz",
    "ettm1": "ETTm1.csv.gz",
    "ettm2": "ETTm2.csv.gz",
    "weather": "weather.csv.gz",
}
# Irregular multivariate data: one row per observation (returned as stored, not on a time index).
LONG = {"physionet2012": "physionet2012.csv.xz"}
LONG_COLUMNS = {"physionet2012": ("set", "record_id", "time", "parameter", "value")}
# Nominal sampling step of each bundled file.
FREQUENCIES = {"etth1": "h", "etth2": "h", "ettm1": "15min", "ettm2": "15min", "weather": "10min"}


def data_dir() -> Path:
    """Where the bundled files live: inside the installed package (wheel) or the source checkout."""
    here = Path(ts_continuum.__file__).resolve().parent
    for candidate in (here / "datasets", here.parent / "datasets"):
        if (candidate / "SHA256SUMS").is_file():
            return candidate
    raise FileNotFoundError(
        f"the bundled datasets are missing (looked in {here / 'datasets'} and {here.parent / 'datasets'}); "
        "reinstall ts-continuum or pass a CSV path instead of a dataset name"
    )


def bundled_name(name: str) -> str | None:
    """The canonical key of a bundled regular dataset ('etth1', ...) or None if ``name`` is not one."""
    key = str(name).lower()
    return key if key in BUNDLED else None


def _bundled_file(filename: str, verify: bool) -> Path:
    folder = data_dir()
    path = folder / filename
    if not path.is_file():
        raise FileNotFoundError(f"bundled dataset file {path} is missing; restore it (git checkout -- datasets/)")
    if verify:
        _verify(path, _expected_checksums(folder)[filename])
    return path


@functools.lru_cache(maxsize=2)
def _read_long(key: str, verify: bool) -> pd.DataFrame:
    path = _bundled_file(LONG[key], verify)
    frame = pd.read_csv(path, dtype={"set": "category", "parameter": "category"})
    expected = list(LONG_COLUMNS[key])
    if list(frame.columns) != expected:
        raise ValueError(f"{path} has columns {list(frame.columns)}, expected {expected}; restore the file "
                         "(git checkout -- datasets/)")
    return frame


def load_long_dataset(name: str, verify: bool = True) -> pd.DataFrame:
    """A bundled irregular dataset as its long frame, one row per observation, as stored.

    ``"physionet2012"``: columns ``set`` (a/b/c), ``record_id``, ``time`` (minutes since ICU
    admission, 0-2880), ``parameter`` (41 names) and ``value`` (datasets/README.md). Parsed once per
    process; each call returns a copy.
    """
    key = str(name).lower()
    if key not in LONG:
        raise ValueError(f"{name!r} is not a bundled long-format dataset; choose one of {', '.join(LONG)}")
    return _read_long(key, bool(verify)).copy()


def _expected_checksums(folder: Path) -> dict[str, str]:
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            digest, filename = line.split()
            sums[filename.lstrip("*")] = digest
    return sums


def _verify(path: Path, expected: str) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        raise ValueError(
            f"checksum mismatch for {path}: expected sha256 {expected}, got {digest}. The file is corrupt "
            "or was modified; restore it from the repository (git checkout -- datasets/) or reinstall"
        )


def load_dataset(name: str | Path, verify: bool = True, columns: list[str] | None = None) -> pd.DataFrame:
    """A benchmark dataset as a DataFrame with a DatetimeIndex and one numeric column per variable.

    ``name``: "ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather" (case-insensitive), or the path of a
    CSV file. The time column of a CSV is the one named like a time (``date``, ``ds``, ``time``,
    ``timestamp``, ``datetime``, ``Date Time``, ... in any case) or else the first datetime-like
    column (text that parses as datetimes; numbers are never taken as times). Rows are returned
    in file order: sorting, duplicates and spacing are the caller's to check.
    Bundled files are checked against ``datasets/SHA256SUMS`` unless ``verify=False``. ``columns``
    selects variables (in that order) before the check that they are numeric, so a text column can
    be left out.

    ``"physionet2012"`` (irregular, every variable at its own times) has no time index: it returns
    the long frame of :func:`load_long_dataset` (``columns`` does not apply).
    """
    if not isinstance(name, Path) and str(name).lower() in LONG:
        if columns is not None:
            raise ValueError(f"columns= selects the columns of a wide dataset; {name!r} is a long frame "
                             "(one row per observation): select rows by its 'parameter' column instead")
        return load_long_dataset(str(name), verify)
    key = bundled_name(name) if not isinstance(name, Path) else None
    if key is not None:
        path = _bundled_file(BUNDLED[key], verify)
    else:
        path = Path(name)
        if not path.is_file():
            known = ", ".join(f.removesuffix(".csv.gz") for f in BUNDLED.values())
            raise FileNotFoundError(f"'{name}' is neither a bundled dataset ({known}) nor an existing file")
    return _read_csv(path, columns)


# Column names taken as the time, compared lower-case without spaces, '_', '-' or '.'.
TIME_NAMES = ("date", "dates", "ds", "time", "times", "timestamp", "timestamps", "datetime", "datetimes")


def _is_time_name(column: object) -> bool:
    key = str(column).strip().lower()
    for sep in (" ", "_", "-", "."):
        key = key.replace(sep, "")
    return key in TIME_NAMES


def _parses_as_datetimes(values: pd.Series) -> bool:
    """True for a text column whose every non-empty value parses as a datetime (numbers never do)."""
    if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas warns while it tries formats on non-date text
        try:
            return bool(pd.to_datetime(values.dropna()).notna().any())
        except (ValueError, TypeError, OverflowError):
            return False


def _time_column(df: pd.DataFrame, path: Path) -> str:
    """The time column: the one named like a time, else the first datetime-like text column."""
    unnamed = [c for c in df.columns if re.fullmatch(r"Unnamed: \d+", str(c))]
    if unnamed:
        raise ValueError(
            f"{path}: column {unnamed[0]!r} has no name in the header; it is usually the index that "
            "DataFrame.to_csv() writes. Save the file with to_csv(..., index=False), or drop the column "
            f"(df.drop(columns={unnamed[0]!r})); if it holds the timestamps, give it a name such as 'date'"
        )
    named = [c for c in df.columns if _is_time_name(c)]
    if len(named) > 1:
        raise ValueError(
            f"{path}: columns {named} all look like time columns; keep one column of full timestamps "
            "(combine a date and a time of day with pd.to_datetime(df[date] + ' ' + df[time]))"
        )
    if named:
        if pd.api.types.is_numeric_dtype(df[named[0]]):
            raise ValueError(
                f"{path}: time column {named[0]!r} holds numbers, not datetimes; write timestamps such as "
                "2020-01-31 13:00 (numbers would be read as nanoseconds since 1970)"
            )
        return named[0]
    for c in df.columns:
        if _parses_as_datetimes(df[c]):
            return c
    raise ValueError(
        f"{path} has no time column: no column is named like a time ({', '.join(TIME_NAMES)}; any case) and no "
        f"column holds datetime text (columns: {list(df.columns)}). Add a column of timestamps, e.g. 'date' "
        "with values such as 2020-01-31 13:00, one per row"
    )


def _read_csv(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    try:
        try:
            df = pd.read_csv(path)
        except UnicodeDecodeError:  # headers written in Latin-1 by some exporters
            df = pd.read_csv(path, encoding="latin-1")
    except Exception as exc:  # gzip or parser failure: say which file
        raise ValueError(f"could not read {path} as CSV: {exc}") from exc
    time_col = _time_column(df, path)
    try:
        index = pd.DatetimeIndex(pd.to_datetime(df[time_col]), name="date")
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"{path}: could not parse column {time_col!r} as timestamps ({exc}); write them in one format, "
            "preferably ISO 8601 (2020-01-31 13:00)"
        ) from exc
    first = df[time_col].dropna()
    if len(first) and isinstance(first.iloc[0], str):  # pandas read them with the layout of the first string
        fix = ("rewrite them in ISO 8601 (2020-01-31 13:00), which reads one way only, e.g. with "
               "pd.to_datetime(df[time], format={day_first!r}) for day-first dates ({month_first!r} for "
               "month-first ones) and to_csv")
        index = day_month_reading(df[time_col], index, guess_datetime_format(first.iloc[0]),
                                  f"{path}: time column {time_col!r}", fix).rename("date")
    if index.hasnans:
        rows = np.flatnonzero(index.isna())
        raise ValueError(
            f"{path}: time column {time_col!r} is empty in {len(rows)} rows (first at row {rows[0]}, counting "
            "data rows from 0); every row needs a timestamp: fill them in or drop those rows"
        )
    values = df.drop(columns=[time_col])
    if columns is not None:
        missing = [c for c in columns if c not in values.columns]
        if missing:
            raise ValueError(f"columns {missing} are not in {path}; available: {list(values.columns)}")
        values = values[list(columns)]
    non_numeric = [c for c in values.columns if not pd.api.types.is_numeric_dtype(values[c])]
    if non_numeric:
        raise ValueError(f"{path}: columns {non_numeric} are not numeric; every variable used must be (leave the "
                         "others out with columns=[...])")
    if values.shape[1] == 0:
        raise ValueError(f"{path} holds no variable besides its time column {time_col!r}")
    infinite = np.isinf(values.to_numpy(dtype=np.float64, na_value=np.nan))
    if infinite.any():
        row, col = np.argwhere(infinite)[0]
        raise ValueError(f"{path}: column {values.columns[col]!r} holds {int(infinite[:, col].sum())} infinite "
                         f"values (first at row {row}, counting data rows from 0); replace them (with NaN they "
                         "count as missing)")
    values.index = index
    return values.astype("float64")
