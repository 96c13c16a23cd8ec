"""DataFrames in and out: format detection, validation, and the per-series arrays behind them.

Long format (one row per series and time, as neuralforecast): an id column, a time column and one
or more target columns. Wide format: a single series with a time column or a ``DatetimeIndex`` and
one column per variable. Times are datetimes (all naive or all tz-aware) or numbers. A NaN target
is a missing observation; rows where every target is NaN carry nothing and are dropped.

Every problem a user can fix is a ``ValueError`` that names the column or series and says what to
do. Unsorted timestamps within a series are sorted, with a ``UserWarning``: data from databases and
concatenated files is often out of order, and the order carries no information once times are
known; duplicates within a series are refused, since which value is right cannot be guessed.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd

from .forecast_errors import did_you_mean, listing, user_stacklevel
from .intervals import interval_columns
from .native_times import native_to_pandas, parse_times, period_advice

LONG_ID = "unique_id"


@dataclass(frozen=True)
class FrameSpec:
    """Where the series live in a DataFrame; fixed at ``fit`` and reused to read later frames."""

    kind: str  # "long" or "wide"
    id_col: str | None
    time_col: str | None  # None: the time is the index
    index_name: str | None  # name of the time index (wide format without a time column)
    target_cols: tuple[str, ...]
    time_kind: str | None = None  # "datetime" or "numeric", known once data was read
    tz_aware: bool | None = None

    def with_time(self, panel: "Panel") -> "FrameSpec":
        return replace(self, time_kind=panel.time_kind, tz_aware=panel.tz is not None)

    def to_dict(self) -> dict:
        return {**asdict(self), "target_cols": list(self.target_cols)}

    @classmethod
    def from_dict(cls, data: dict) -> "FrameSpec":
        # JSON has no tuples: names saved before fit refused them (MultiIndex columns) come back as lists
        return cls(**{k: _tuples(v) for k, v in data.items()})


def _tuples(value):
    """JSON lists back as tuples, nested ones too."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@dataclass
class Panel:
    """Validated series, rows sorted by series then time, every row with >= 1 observed target.

    ``times`` are native: int64 nanoseconds since the epoch (UTC for tz-aware data) or float64.
    """

    ids: np.ndarray  # (S,) object
    bounds: np.ndarray  # (S + 1,) row offsets of each series
    times: np.ndarray  # (N,)
    values: np.ndarray  # (N, C) float64, NaN = missing
    time_kind: str
    tz: str | None
    time_dtype: str  # dtype of the time column, for answers in the same dtype
    id_dtype: pd.CategoricalDtype | None = None  # categorical ids answer as the same categorical

    @property
    def n_series(self) -> int:
        return len(self.ids)

    @property
    def codes(self) -> np.ndarray:
        """Series index of every row."""
        return np.repeat(np.arange(self.n_series), np.diff(self.bounds))

    def stamp(self, t):
        """One native time as the user's kind of timestamp, for messages."""
        return native_to_pandas(np.array([t]), self.time_kind, self.tz, self.time_dtype)[0]

    @property
    def last_rows(self) -> np.ndarray:
        return self.bounds[1:] - 1

    def take(self, keep: np.ndarray) -> "Panel":
        """The rows where ``keep`` is True (every series must keep at least one)."""
        counts = np.bincount(self.codes[keep], minlength=self.n_series)
        bounds = np.concatenate([[0], np.cumsum(counts)])
        return replace(self, bounds=bounds, times=self.times[keep], values=self.values[keep])


SERIES_NAME = "y"  # the column of a pandas Series without a name


def as_frame(data, what: str = "data", reserved: dict | None = None) -> pd.DataFrame:
    """A DataFrame as given; a Series (one variable over a DatetimeIndex, as sktime and darts users
    hold it) as the one-column wide frame it stands for, named after the Series or ``y``. A Series
    named like a ``reserved`` column (name -> "id" or "time") would be read as that column, not as
    the variable, so it is refused with the rename to make."""
    if isinstance(data, pd.Series):
        role = (reserved or {}).get(data.name) if data.name is not None else None
        if role:
            raise ValueError(f"{what} is a Series named {data.name!r}, the name of the {role} column, so it "
                             f"would not be read as the variable to forecast; rename it, e.g. "
                             f"series.rename({SERIES_NAME!r})")
        return data.to_frame(SERIES_NAME if data.name is None else data.name)
    if not isinstance(data, pd.DataFrame):
        raise ValueError(f"expected a pandas DataFrame for {what} (or a Series with a DatetimeIndex), got "
                         f"{type(data).__name__}")
    return data


def detect_spec(df: pd.DataFrame, id_col: str | None = None, time_col: str | None = "ds",
                target_cols: str | list[str] | None = None) -> FrameSpec:
    """Long format if ``id_col`` is given or a ``unique_id`` column exists, else wide."""
    # time_col=None: the time is the index, so a Series may be named "ds"
    reserved = {name: role for name, role in ((time_col, "time"), (LONG_ID, "id"), (id_col, "id")) if name is not None}
    df = as_frame(df, "training data", reserved=reserved)
    if isinstance(target_cols, str):
        target_cols = [target_cols]
    columns = list(df.columns)
    long = id_col is not None or LONG_ID in columns
    index_name = None
    if long:
        id_col, time_col = id_col or LONG_ID, time_col or "ds"
        require_columns(df, [id_col], "long format")
        require_columns(df, [time_col], "long format", "; pass time_col=<the column holding the timestamps>"
                         + datetime_columns_hint(df))
        targets = list(target_cols) if target_cols is not None else ["y"]
    else:
        if time_col is None or time_col not in columns:
            if isinstance(df.index, pd.PeriodIndex):
                raise ValueError(period_advice("the index", df.index.dtype, "df.index = df.index.to_timestamp()"))
            if not (isinstance(df.index, pd.DatetimeIndex) or (time_col is not None and df.index.name == time_col)):
                raise ValueError(
                    f"no time column {time_col!r}{did_you_mean(time_col, columns)} and the index is not a "
                    "DatetimeIndex; pass time_col=<the column holding the timestamps>" + datetime_columns_hint(df)
                    + ", or id_col=... for long format"
                    + _index_hint(df, [time_col, LONG_ID])
                )
            index_name, time_col = df.index.name, None  # the time is the index
        default = list(dict.fromkeys(c for c in columns if c != time_col))  # a repeated name is reported below
        targets = list(target_cols) if target_cols is not None else default
        require_unique(df, [c for c in (time_col, *targets) if c is not None])
        bad = [c for c in targets if target_cols is None and not is_number(df[c])]
        if bad:
            raise ValueError(
                f"column(s) {listing(bad)} are not numeric; pass target_cols=[...] to choose the variables to "
                f"forecast, or id_col={bad[0]!r} if {'it names' if len(bad) == 1 else 'one of them names'} the "
                "series of a long frame (one row per series and time)"
            )
    if not targets:
        raise ValueError("no target columns: pass target_cols=[...] with the variables to forecast")
    if len(set(targets)) != len(targets):
        raise ValueError(f"target_cols has repeated names: {targets}")
    clash = [c for c in targets if c in (id_col, time_col)]
    if clash:
        raise ValueError(f"target_cols must not include the id or time column: {listing(clash)}")
    require_columns(df, targets, "target")
    require_unique(df, [c for c in (id_col, time_col, *targets) if c is not None])
    require_plain_names([("id column", id_col), ("time column", time_col), ("time index", index_name),
                          *(("target column", t) for t in targets)])
    return FrameSpec("long" if long else "wide", id_col, time_col, index_name, tuple(targets))


def read_panel(df: pd.DataFrame, spec: FrameSpec, what: str = "data") -> Panel:
    """Validate ``df`` against ``spec`` and return its series; ``what`` names the frame in messages."""
    df = as_frame(df, what)
    needed = [c for c in (spec.id_col, spec.time_col) if c is not None] + list(spec.target_cols)
    require_columns(df, needed, f"{what} ({spec.kind} format, as at fit)")
    require_unique(df, needed)
    if spec.time_col is None and isinstance(df.index, pd.PeriodIndex):
        raise ValueError(f"{what}: " + period_advice("the index", df.index.dtype, "df.index = df.index.to_timestamp()"))
    if spec.time_col is None and not (isinstance(df.index, pd.DatetimeIndex) or df.index.name == spec.index_name):
        raise ValueError(f"{what}: the model was fitted on a frame with the time in its index; "
                         "give a frame with the same kind of index")
    if len(df) == 0:
        raise ValueError(f"{what} is empty")
    for c in spec.target_cols:
        if not is_number(df[c]):
            raise ValueError(f"target column {c!r} is not numeric (dtype {df[c].dtype}); convert it, "
                             f"e.g. pd.to_numeric(df[{c!r}], errors='coerce') to turn bad entries into missing values")
    keys = read_keys(df, spec.id_col, spec.time_col, what, spec.time_kind, spec.tz_aware)
    codes, ids, times = keys.codes, keys.ids, keys.times
    values = np.column_stack([df[c].to_numpy(dtype=np.float64, na_value=np.nan) for c in spec.target_cols])
    fix = (lambda: _long_frame_advice(df, spec)) if spec.kind == "wide" else _drop_duplicates_advice
    order = _time_order(codes, times, ids, what, keys.stamp, fix)
    codes, times, values = codes[order], times[order], values[order]
    if np.isinf(values).any():
        col = spec.target_cols[int(np.isinf(values).any(0).argmax())]
        raise ValueError(f"target column {col!r} holds infinite values; replace them with NaN to mark them missing")
    keep = ~np.isnan(values).all(1)
    codes, times, values = codes[keep], times[keep], values[keep]
    counts = np.bincount(codes, minlength=len(ids))
    empty = ids[counts == 0]
    if len(empty):
        raise ValueError(f"{what}: series {listing(empty)} have no observed value (all targets NaN); drop them")
    seen = np.stack([np.bincount(codes, weights=~np.isnan(values[:, c]), minlength=len(ids))
                     for c in range(values.shape[1])], axis=1)
    if (seen == 0).any():
        s, c = np.argwhere(seen == 0)[0]
        raise ValueError(f"{what}: series {ids[s]!r} has no observed value of {spec.target_cols[c]!r}; "
                         "every series needs observations of every target (drop the series or the column)")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return Panel(ids, bounds, times, values, keys.time_kind, keys.tz, keys.time_dtype, keys.id_dtype)


@dataclass(frozen=True)
class Keys:
    """The series and time of every row of a frame, in the frame's row order: what the grid's
    ``Panel`` and the asynchronous route's observations are both read from."""

    codes: np.ndarray  # (N,) index into ids
    ids: np.ndarray  # (S,) object, in order of first appearance
    id_dtype: pd.CategoricalDtype | None
    times: np.ndarray  # (N,) native
    time_kind: str
    tz: str | None
    time_dtype: str

    def stamp(self, t):
        """One native time as the user's kind of timestamp, for messages."""
        return native_to_pandas(np.array([t]), self.time_kind, self.tz, self.time_dtype)[0]


def read_keys(df: pd.DataFrame, id_col: str | None, time_col: str | None, what: str,
              fitted_kind: str | None = None, fitted_tz_aware: bool | None = None) -> Keys:
    """Parse the time column (the index if ``time_col`` is None) and the ids of ``df``; times of
    another kind than at fit (``fitted_kind``, ``fitted_tz_aware``; None: not fitted yet) are refused."""
    raw_time = df.index if time_col is None else df[time_col]
    times, kind, tz, time_dtype = parse_times(raw_time, time_col or "index")
    if fitted_kind is not None and (kind, tz is not None) != (fitted_kind, fitted_tz_aware):
        fitted = "numbers" if fitted_kind == "numeric" else ("tz-aware" if fitted_tz_aware else "naive") + " datetimes"
        given = "numbers" if kind == "numeric" else ("tz-aware" if tz else "naive") + " datetimes"
        raise ValueError(f"{what} has {given} as times but the forecaster was fitted on {fitted}; "
                         + _conversion_hint(kind, fitted_kind))
    id_dtype = None
    if id_col is None:
        codes, ids = np.zeros(len(df), dtype=np.int64), np.array([None], dtype=object)
    else:
        id_values = df[id_col]
        if id_values.isna().any():
            raise ValueError(f"id column {id_col!r} has {int(id_values.isna().sum())} missing ids; "
                             "drop or fill them")
        codes, uniques = pd.factorize(id_values, sort=False)
        ids = np.asarray(uniques, dtype=object)
        if isinstance(id_values.dtype, pd.CategoricalDtype):
            id_dtype = id_values.dtype
    return Keys(np.asarray(codes, dtype=np.int64), ids, id_dtype, times, kind, tz, time_dtype)


def forecast_frame(spec: FrameSpec, ids: np.ndarray, times: np.ndarray, values: np.ndarray,
                   time_dtype: str, tz: str | None, intervals: tuple | None = None,
                   id_dtype: pd.CategoricalDtype | None = None) -> pd.DataFrame:
    """(S, H) times and (S, H, C) values as a frame in the user's format and column names; with
    ``intervals`` (levels, lower and upper bounds (L, S, H, C)) each target's interval columns follow it."""
    S, H, C = values.shape
    when = native_to_pandas(times.reshape(-1), spec.time_kind, tz, time_dtype)
    data = {}
    for c, name in enumerate(spec.target_cols):
        data.update({name: values[:, :, c].reshape(-1), **interval_columns(name, intervals, c)})
    if spec.kind == "long":
        return pd.DataFrame({spec.id_col: id_column(np.repeat(ids, H), id_dtype), spec.time_col: when, **data})
    if spec.time_col is None:
        return pd.DataFrame(data, index=when.rename(spec.index_name))
    return pd.DataFrame({spec.time_col: when, **data})


def id_column(ids: np.ndarray, dtype: pd.CategoricalDtype | None = None) -> pd.Series:
    """Series ids (an object array) as a column of their natural dtype (int64 for integer ids), or
    of the categorical dtype they came in."""
    column = pd.Series(ids, dtype=object).infer_objects()
    return column if dtype is None else column.astype(dtype)


def require_columns(df: pd.DataFrame, names: list[str], role: str, hint: str = "") -> None:
    columns = [str(c) for c in df.columns]
    for name in names:
        if name not in df.columns:
            raise ValueError(
                f"column {name!r} ({role}) is not in the frame{did_you_mean(name, columns)}; "
                f"columns: {listing(columns, 12)}" + _index_hint(df, names) + hint
            )


def require_plain_names(names: list[tuple[str, object]]) -> None:
    """Names must be strings or numbers: answers carry them, and ``save`` stores them as JSON, which
    turns a tuple (a MultiIndex column) into a list that no frame has, so a loaded forecaster failed."""
    for role, name in names:
        if name is None or _is_plain_name(name):
            continue
        if isinstance(name, tuple):
            what = "a tuple (a MultiIndex column)"
            fix = "flatten the columns, e.g. df.columns = ['_'.join(map(str, c)) for c in df.columns]"
        else:
            what = f"a {type(name).__name__}"
            fix = ("name the index with a string, e.g. df.index.name = 'ds'" if role == "time index" else
                   "rename the columns to strings, e.g. df = df.rename(columns=str)")
        raise ValueError(f"the name of the {role}, {name!r}, is {what}; names must be strings or numbers (forecasts "
                         f"and saved forecasters keep them): {fix}")


def _is_plain_name(name) -> bool:
    if isinstance(name, (str, bool, np.bool_, int, np.integer)):
        return True
    return isinstance(name, (float, np.floating)) and bool(np.isfinite(name))


def datetime_columns_hint(df: pd.DataFrame) -> str:
    names = [c for c in df.columns if _is_datetime_column(df, c)]
    return f" (datetime columns: {listing(names)})" if names else ""


def _conversion_hint(given: str, fitted: str) -> str:
    """How to turn times of kind ``given`` into those of kind ``fitted`` (both "datetime" or "numeric")."""
    if given == fitted:
        return "convert them (e.g. .dt.tz_localize(...) / .dt.tz_convert(...)) to match"
    if fitted == "numeric":
        return "give the times as the same numbers as at fit (e.g. step counts), or fit on datetimes"
    return "convert them with pd.to_datetime(...) to match, or fit on numbers"


def _index_hint(df: pd.DataFrame, names: list) -> str:
    """How to fix columns that are missing because they sit in the (Multi)Index, or ""."""
    in_index = [n for n in names if n is not None and n not in df.columns and n in df.index.names]
    if not in_index:
        return ""
    return (f"; {listing(in_index)} {'is an index level' if len(in_index) == 1 else 'are index levels'}: "
            "call df.reset_index() to make them columns")


def require_unique(df: pd.DataFrame, names: list[str]) -> None:
    """Refuse a repeated name among the columns used: ``df[name]`` would be a frame, not a column."""
    repeated = set(df.columns[df.columns.duplicated()])
    bad = [n for n in dict.fromkeys(names) if n in repeated]
    if bad:
        raise ValueError(f"column(s) {listing(bad)} appear more than once in the frame (e.g. after "
                         "pd.concat(..., axis=1)); drop or rename the repeats, e.g. "
                         "df.loc[:, ~df.columns.duplicated()]")


def _is_datetime_column(df: pd.DataFrame, name) -> bool:
    column = df[name]
    return isinstance(column, pd.Series) and pd.api.types.is_datetime64_any_dtype(column)


def is_number(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_complex_dtype(column.dtype)


def _time_order(codes: np.ndarray, times: np.ndarray, ids: np.ndarray, what: str, show,
                fix: Callable[[], str]) -> np.ndarray:
    """Row order by series then time; refuses duplicate times (``fix`` says how to mend them, asked
    only when there are some), then sorts with a warning: a refused frame gets no sorting advice."""
    order = np.argsort(codes, kind="stable")
    c, t = codes[order], times[order]
    same = c[1:] == c[:-1]
    backwards = same & (t[1:] < t[:-1])
    unsorted = ids[np.unique(c[1:][backwards])]
    if backwards.any():
        order = np.lexsort((times, codes))
        c, t = codes[order], times[order]
        same = c[1:] == c[:-1]
    dup = same & (t[1:] == t[:-1])
    if dup.any():
        rows = np.flatnonzero(dup)
        examples = [f"{'' if ids[c[r]] is None else f'{ids[c[r]]!r} at '}{show(t[r])}" for r in rows[:3]]
        raise ValueError(f"{what}: {len(rows)} duplicate timestamp(s) within a series ({'; '.join(examples)}); "
                         + fix())
    if len(unsorted):
        warnings.warn(f"{what}: timestamps of series {listing(unsorted)} are not in increasing order; sorting them "
                      "(sort the frame by id and time to silence this)", UserWarning, stacklevel=user_stacklevel())
    return order


def _drop_duplicates_advice() -> str:
    return "keep one row per series and time, e.g. df.drop_duplicates([id, time]) or aggregate them"


def _long_frame_advice(df: pd.DataFrame, spec: FrameSpec) -> str:
    """Repeated times in a frame read as wide (one series): most likely a long frame without ``unique_id``."""
    time = pd.Series(df.index if spec.time_col is None else df[spec.time_col].to_numpy())
    candidates = []
    for c in df.columns:
        if c == spec.time_col or not isinstance(df[c], pd.Series):
            continue
        column = df[c].reset_index(drop=True)
        repeats = column.nunique(dropna=False) < len(column)  # ids repeat over time ...
        if repeats and not pd.DataFrame({"t": time, "c": column}).duplicated().any():  # ... but not within one
            candidates.append(c)
    names = f" (candidates: {listing(candidates)})" if candidates else ""
    dedupe = "df[~df.index.duplicated()]" if spec.time_col is None else f"df.drop_duplicates([{spec.time_col!r}])"
    return (f"the frame was read as wide format (one series, no id column) since it has no {LONG_ID!r} column, but "
            "repeated timestamps suggest a long frame holding several series: pass id_col=<the column naming the "
            f"series>{names} to fit. Only if it really is one series with repeated rows, keep one row per time, "
            f"e.g. {dedupe}, or aggregate them")


def warn_constant_targets(panel: Panel, spec: FrameSpec) -> None:
    """Warn about a target that never changes: often an id column read as a variable of a wide frame."""
    for c, name in enumerate(spec.target_cols):
        seen = panel.values[~np.isnan(panel.values[:, c]), c]
        if len(seen) > 1 and (seen == seen[0]).all():
            fix = (f"if it identifies the series, pass id_col={name!r} (long format)" if spec.kind == "wide" else
                   "if it is not a variable to forecast, leave it out with target_cols=[...]")
            warnings.warn(f"target column {name!r} is constant ({seen[0]:g}) in the training data, so there is "
                          f"nothing to learn from it; {fix}", UserWarning, stacklevel=user_stacklevel())
