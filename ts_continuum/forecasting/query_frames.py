"""Frames of asynchronous observations in and out: the sibling of the grid route's ``read_panel``.

Two forms, both one row per observation time (``unique_id``, ``ds`` and the values):

- **columns**: one column per variable, NaN where a variable was not measured;
- **long**: a ``variable`` column naming the variable and a ``value`` column holding its value.

Ids and times are parsed as for the grid route (``frames.read_keys``: the same checks and messages);
the values become flat observations (series, variable, time, value), sorted by series and time.
Nothing is resampled or filled. Unsorted rows are sorted (their order carries nothing once times are
known). A repeated (id, time, variable) with equal values is one observation; with different values
it is refused, unless ``duplicates="mean"`` asked to average them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from .forecast_errors import did_you_mean, listing
from .frames import (LONG_ID, as_frame, datetime_columns_hint, is_number, read_keys, require_columns,
                     require_plain_names, require_unique)
from .native_times import native_to_pandas

VARIABLE, VALUE = "variable", "value"
DUPLICATES = ("raise", "mean")


@dataclass(frozen=True)
class QuerySpec:
    """Where the observations live in a frame: fixed at ``fit`` (or ``from_model``), reused to read
    later frames in either form and to answer in the caller's names."""

    id_col: str | None  # None: a single series without ids
    time_col: str
    variables: tuple  # names in the model's order
    variable_col: str = VARIABLE
    value_col: str = VALUE
    form: str = "columns"  # the training frame's form: "columns" or "long"
    time_kind: str | None = None  # "datetime" or "numeric"; None: not known yet (from_model)
    tz_aware: bool | None = None

    def to_dict(self) -> dict:
        return {**asdict(self), "variables": list(self.variables)}

    @classmethod
    def from_dict(cls, data: dict) -> "QuerySpec":
        return cls(**{**data, "variables": tuple(data["variables"])})

    def form_of(self, df: pd.DataFrame) -> str:
        """"long" if ``df`` names its variables in a column, else "columns"."""
        return "long" if self.variable_col in df.columns else "columns"


@dataclass(frozen=True)
class Observations:
    """Observations of ``len(ids)`` series, flat, sorted by series, time and variable; series ``s``
    holds rows ``offsets[s]:offsets[s + 1]`` (possibly none). Times are native (int64 nanoseconds
    for datetimes, float64 numbers), values float64 in the data's units."""

    ids: np.ndarray
    offsets: np.ndarray
    variable: np.ndarray
    times: np.ndarray
    values: np.ndarray
    time_kind: str
    tz: str | None
    time_dtype: str
    id_dtype: pd.CategoricalDtype | None = None

    @property
    def series(self) -> np.ndarray:
        """The series index of every row."""
        return np.repeat(np.arange(len(self.ids)), np.diff(self.offsets))

    def stamp(self, t):
        """One native time as the user's kind of timestamp, for messages."""
        return native_to_pandas(np.array([t]), self.time_kind, self.tz, self.time_dtype)[0]

    def as_pandas(self, times: np.ndarray) -> pd.Index:
        return native_to_pandas(times, self.time_kind, self.tz, self.time_dtype)

    def select(self, keep: np.ndarray) -> "Observations":
        """The rows where ``keep`` is True; every series stays (perhaps with no rows)."""
        counts = np.bincount(self.series[keep], minlength=len(self.ids))
        return replace(self, offsets=np.concatenate([[0], np.cumsum(counts)]), variable=self.variable[keep],
                       times=self.times[keep], values=self.values[keep])

    def take(self, series: np.ndarray) -> "Observations":
        """The series at indices ``series`` (in that order)."""
        rows = ranges(self.offsets[series], self.offsets[np.asarray(series) + 1])
        counts = np.diff(self.offsets)[series]
        return replace(self, ids=self.ids[series], offsets=np.concatenate([[0], np.cumsum(counts)]),
                       variable=self.variable[rows], times=self.times[rows], values=self.values[rows])

    def first_times(self) -> np.ndarray:
        """(S,) each series' first time; a series without rows has the lowest time of the dtype."""
        return self._at(self.offsets[:-1])

    def last_times(self) -> np.ndarray:
        """(S,) each series' last time; a series without rows has the lowest time of the dtype."""
        return self._at(self.offsets[1:] - 1)

    def _at(self, rows: np.ndarray) -> np.ndarray:
        empty = np.diff(self.offsets) == 0
        out = np.full(len(self.ids), lowest(self.times.dtype), dtype=self.times.dtype)
        out[~empty] = self.times[rows[~empty]]
        return out


def lowest(dtype) -> int | float:
    """The lowest time of a native dtype: before every time."""
    return np.iinfo(dtype).min if np.issubdtype(dtype, np.integer) else -np.inf


def ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, e)`` for each pair, without a Python loop."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    lengths = np.maximum(ends - starts, 0)
    if not lengths.sum():
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return first + np.arange(lengths.sum())


def detect_query_spec(df: pd.DataFrame, id_col: str | None, time_col: str | None,
                      target_cols: str | list[str] | None, variable_col: str | None,
                      value_col: str | None) -> QuerySpec:
    """The layout of a training frame: long form if it has the variable column (``variable_col``,
    default ``variable``), else one column per variable (``target_cols``, default every column but
    the id and time). Without ``id_col`` and a ``unique_id`` column the frame is one series."""
    df = as_frame(df, "training data")
    columns = list(df.columns)
    id_col = id_col if id_col is not None else (LONG_ID if LONG_ID in columns else None)
    time_col = time_col or "ds"
    variable_col, value_col = variable_col or VARIABLE, value_col or VALUE
    require_columns(df, [c for c in (id_col, time_col) if c is not None], "id and time",
                    "; pass time_col=<the column holding the timestamps>" + datetime_columns_hint(df))
    if variable_col in columns:
        if target_cols is not None:
            raise ValueError(f"the frame names its variables in column {variable_col!r} (long form), so "
                             "target_cols has nothing to choose; filter the rows instead, e.g. "
                             f"df[df[{variable_col!r}].isin([...])]")
        require_columns(df, [value_col], f"the values of the long form, beside {variable_col!r}",
                        "; pass value_col=<the column holding the values>")
        names = [variable_col, value_col]
        form, variables = "long", ()
    else:
        if isinstance(target_cols, str):
            target_cols = [target_cols]
        used = {id_col, time_col}
        variables = tuple(target_cols) if target_cols is not None else tuple(c for c in columns if c not in used)
        if not variables:
            raise ValueError(f"no variable columns: give one column per variable, or the long form with columns "
                             f"{variable_col!r} and {value_col!r}")
        clash = [c for c in variables if c in used]
        if clash:
            raise ValueError(f"target_cols must not include the id or time column: {listing(clash)}")
        require_columns(df, list(variables), "variable")
        bad = [c for c in variables if not is_number(df[c])]
        if bad:
            raise ValueError(f"column(s) {listing(bad)} are not numeric; pass target_cols=[...] with the variable "
                             f"columns, or give the long form (columns {variable_col!r} and {value_col!r})")
        names, form = list(variables), "columns"
    require_unique(df, [c for c in (id_col, time_col, *names) if c is not None])
    require_plain_names([("id column", id_col), ("time column", time_col),
                         *(("variable column", v) for v in names)])
    return QuerySpec(id_col, time_col, variables, variable_col, value_col, form)


def read_observations(df: pd.DataFrame, spec: QuerySpec, what: str, duplicates: str = "raise",
                      learn_variables: bool = False) -> tuple[QuerySpec, Observations]:
    """Validate ``df`` (either form) and return its observations, with ``spec``'s variables (unknown
    ones refused) or, with ``learn_variables`` (training data), the variables it holds."""
    df = as_frame(df, what)
    if len(df) == 0:
        raise ValueError(f"{what} is empty")
    form = spec.form_of(df)
    keys_cols = [c for c in (spec.id_col, spec.time_col) if c is not None]
    require_columns(df, keys_cols, f"{what}: id and time, as at fit")
    if form == "long":
        require_columns(df, [spec.value_col], f"{what}: the values of the long form, beside {spec.variable_col!r}")
        require_unique(df, keys_cols + [spec.variable_col, spec.value_col])
        if not is_number(df[spec.value_col]):
            raise ValueError(f"value column {spec.value_col!r} is not numeric (dtype {df[spec.value_col].dtype}); "
                             f"convert it, e.g. pd.to_numeric(df[{spec.value_col!r}], errors='coerce')")
    else:
        present = [v for v in spec.variables if v in df.columns]
        if not present:
            raise ValueError(f"{what} has none of the variables {listing(spec.variables)} as columns, nor a "
                             f"{spec.variable_col!r} column (long form){did_you_mean(spec.variables[0], df.columns)}")
        require_unique(df, keys_cols + present)
        for name in present:
            if not is_number(df[name]):
                raise ValueError(f"variable column {name!r} is not numeric (dtype {df[name].dtype}); convert it, "
                                 f"e.g. pd.to_numeric(df[{name!r}], errors='coerce') to mark bad entries missing")
    keys = read_keys(df, spec.id_col, spec.time_col, what, spec.time_kind, spec.tz_aware)
    if form == "long":
        row, variable, value, spec = _long_values(df, spec, what, learn_variables)
    else:
        row, variable, value = _column_values(df, spec, present)
    bad = ~np.isfinite(value)
    if bad.any():
        raise ValueError(f"{what}: {int(bad.sum())} value(s) are infinite (first: {_row_name(df, row[bad][0], spec)}, "
                         f"variable {spec.variables[variable[bad][0]]!r}); replace them with NaN to mark them missing")
    series, times = keys.codes[row], keys.times[row]
    series, variable, times, value = _merge_duplicates(series, variable, times, value, keys, spec, duplicates, what)
    counts = np.bincount(series, minlength=len(keys.ids))
    obs = Observations(keys.ids, np.concatenate([[0], np.cumsum(counts)]), variable, times, value, keys.time_kind,
                       keys.tz, keys.time_dtype, keys.id_dtype)
    return replace(spec, time_kind=keys.time_kind, tz_aware=keys.tz is not None), obs


def _column_values(df: pd.DataFrame, spec: QuerySpec, present: list) -> tuple[np.ndarray, ...]:
    """(row, variable, value) of every non-missing cell of the variable columns."""
    codes = [spec.variables.index(v) for v in present]
    values = np.column_stack([df[v].to_numpy(dtype=np.float64, na_value=np.nan) for v in present])
    row, col = np.nonzero(~np.isnan(values))
    return row, np.asarray(codes, dtype=np.int64)[col], values[row, col]


def _long_values(df: pd.DataFrame, spec: QuerySpec, what: str,
                 learn: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, QuerySpec]:
    """(row, variable, value) of every row with a value, and the spec (with the variables, if learned)."""
    names = df[spec.variable_col]
    if names.isna().any():
        first = int(np.flatnonzero(names.isna().to_numpy())[0])
        raise ValueError(f"{what}: variable column {spec.variable_col!r} is missing in {int(names.isna().sum())} "
                         f"row(s) (first: {_row_name(df, first, spec)}); drop them or name their variable")
    value = df[spec.value_col].to_numpy(dtype=np.float64, na_value=np.nan)
    row = np.flatnonzero(~np.isnan(value))  # a missing value is no observation
    if learn:
        found = pd.unique(names.iloc[row].to_numpy(dtype=object))
        spec = replace(spec, variables=tuple(sorted(found, key=lambda v: (str(type(v)), str(v)))))
    known = {v: i for i, v in enumerate(spec.variables)}
    variable = np.array([known.get(v, -1) for v in names.to_numpy(dtype=object)[row]], dtype=np.int64)
    unknown = variable < 0
    if unknown.any():
        first = row[int(np.flatnonzero(unknown)[0])]
        names_out = list(dict.fromkeys(names.to_numpy(dtype=object)[row[unknown]]))
        raise ValueError(f"{what}: unknown variable(s) {listing(names_out)} (first: {_row_name(df, first, spec)}); "
                         f"the forecaster knows {listing(spec.variables, 12)}"
                         f"{_close_name(names_out[0], spec.variables)}: drop those rows or fit on them")
    return row, variable, value[row], spec


def _merge_duplicates(series, variable, times, value, keys, spec: QuerySpec, duplicates: str, what: str):
    """Sort by (series, time, variable); one observation per (series, time, variable): equal repeats
    are one, different ones refused (or averaged with ``duplicates="mean"``)."""
    order = np.lexsort((variable, times, series))
    series, variable, times, value = series[order], variable[order], times[order], value[order]
    same = (series[1:] == series[:-1]) & (times[1:] == times[:-1]) & (variable[1:] == variable[:-1])
    if not same.any():
        return series, variable, times, value
    start = np.concatenate([[True], ~same])
    group = np.cumsum(start) - 1
    sums = np.bincount(group, weights=value)
    counts = np.bincount(group)
    mean = sums / counts
    spread = np.maximum.reduceat(value, np.flatnonzero(start)) != np.minimum.reduceat(value, np.flatnonzero(start))
    if duplicates == "raise" and spread.any():
        g = int(np.flatnonzero(spread)[0])
        rows = np.flatnonzero(group == g)
        sid = keys.ids[series[rows[0]]]
        who = "" if sid is None else f"series {sid!r}, "
        raise ValueError(
            f"{what}: {int(spread.sum())} (id, time, variable) observation(s) are repeated with different values "
            f"(e.g. {who}{spec.variables[variable[rows[0]]]!r} at {keys.stamp(times[rows[0]])}: "
            f"{', '.join(f'{v:g}' for v in value[rows[:4]])}); which one is right cannot be guessed: drop the wrong "
            "rows, or pass Forecaster(..., duplicates='mean') to average repeated observations")
    keep = np.flatnonzero(start)
    return series[keep], variable[keep], times[keep], mean


def _row_name(df: pd.DataFrame, position: int, spec: QuerySpec) -> str:
    """A row for messages: its index label and id."""
    label = plain(df.index[position])
    sid = "" if spec.id_col is None else f", {spec.id_col} {plain(df[spec.id_col].iloc[position])!r}"
    return f"row {label!r}{sid}"


def _close_name(name, names) -> str:
    """" (did you mean 'x'?)" for the same name in another case, or a close one; else ""."""
    same = [n for n in names if str(n).lower() == str(name).lower()]
    return f" (did you mean {same[0]!r}?)" if same else did_you_mean(name, map(str, names))


def plain(value):
    """A numpy scalar as the Python value it holds, for messages (``0``, not ``np.int64(0)``)."""
    return value.item() if isinstance(value, np.generic) else value


@dataclass(frozen=True)
class Queries:
    """The rows of an ``at=`` frame as (series, variable, time) queries, one per row and variable
    (every variable of a columns-form row), in the caller's order: ``row`` is each query's position
    in the frame."""

    row: np.ndarray
    series: np.ndarray  # index into the history's ids
    variable: np.ndarray
    times: np.ndarray
    form: str
    frame: pd.DataFrame  # the caller's key columns, index kept


def read_queries(at: pd.DataFrame, spec: QuerySpec, history: Observations, what: str = "at") -> Queries:
    """The query frame ``at``: ids among ``history``'s series, variables among ``spec``'s, times of the
    history's kind. Unknown ids or variables and missing times are refused, naming the row."""
    at = as_frame(at, what)
    if len(at) == 0:
        raise ValueError(f"{what} is empty: give the (id, time{', variable' if spec.form == 'long' else ''}) rows "
                         "to forecast")
    form = spec.form_of(at)
    keys_cols = [c for c in (spec.id_col, spec.time_col) if c is not None] + ([spec.variable_col] if form == "long"
                                                                               else [])
    require_columns(at, keys_cols, f"{what}: the queries' keys")
    require_unique(at, keys_cols)
    keys = read_keys(at, spec.id_col, spec.time_col, what, history.time_kind, history.tz is not None)
    known = {sid: i for i, sid in enumerate(history.ids)}
    series_of = np.array([known.get(sid, -1) for sid in keys.ids], dtype=np.int64)
    if (series_of < 0).any():
        unknown = keys.ids[series_of < 0]
        first = int(np.flatnonzero(series_of[keys.codes] < 0)[0])
        raise ValueError(f"{what}: unknown id(s) {listing(unknown)} (first: {_row_name(at, first, spec)}): the "
                         f"history has no such series{did_you_mean(unknown[0], map(str, history.ids))}; give their "
                         f"history in df, or ask for the series it has: {listing(history.ids)}")
    series = series_of[keys.codes]
    n = len(at)
    if form == "long":
        names = at[spec.variable_col]
        lookup = {v: i for i, v in enumerate(spec.variables)}
        variable = np.array([lookup.get(v, -1) for v in names.to_numpy(dtype=object)], dtype=np.int64)
        if (variable < 0).any():
            first = int(np.flatnonzero(variable < 0)[0])
            bad = list(dict.fromkeys(names.to_numpy(dtype=object)[variable < 0]))
            raise ValueError(f"{what}: unknown variable(s) {listing(bad)} (first: {_row_name(at, first, spec)}); the "
                             f"forecaster knows {listing(spec.variables, 12)}"
                             f"{_close_name(bad[0], spec.variables)}")
        row = np.arange(n)
    else:
        C = len(spec.variables)
        row, variable = np.repeat(np.arange(n), C), np.tile(np.arange(C), n)
    frame = at[keys_cols].copy()
    return Queries(row, series[row], variable, keys.times[row], form, frame)


def answer_frame(queries: Queries, spec: QuerySpec, forecast: np.ndarray,
                 intervals: tuple | None = None) -> pd.DataFrame:
    """The forecasts (one per query) as the caller's rows: their keys and index, then the forecast in
    the value column (long form) or in each variable's column; interval columns after each."""
    from .intervals import interval_columns

    out = queries.frame.copy()
    if queries.form == "long":
        if intervals is not None:
            levels, lo, hi = intervals
            intervals = (levels, lo[..., None], hi[..., None])
        for name, column in {spec.value_col: forecast, **interval_columns(spec.value_col, intervals, 0)}.items():
            out[name] = column
        return out
    C = len(spec.variables)
    per_row = forecast.reshape(-1, C)
    for c, name in enumerate(spec.variables):
        out[name] = per_row[:, c]
        if intervals is not None:
            levels, lo, hi = intervals
            for col, values in interval_columns(name, (levels, lo.reshape(len(levels), -1, C),
                                                       hi.reshape(len(levels), -1, C)), c).items():
                out[col] = values
    return out
