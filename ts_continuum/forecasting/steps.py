"""The nominal step of the grid models: parsing ``freq=``, inferring it from the data, and time in nominal steps.

The model measures time in nominal steps (one step = ``freq``). Native times are int64 nanoseconds
for datetimes (so a step is a fixed duration: calendar offsets such as month ends are refused, and
so is data spaced by calendar months, which a fixed step cannot follow) and float64 for numeric
times. Irregular spacing is kept as it is: nothing is resampled or filled.
"""

from __future__ import annotations

import calendar
import datetime as dt
import warnings

import numpy as np
import pandas as pd

from ..data.windows import SNAP, to_steps
from .forecast_errors import user_stacklevel
from .frames import Panel
from .native_times import native_to_pandas

COMMON = 0.1  # a spacing this share of the gaps have is common: an inferred step 1.5 times it or more is doubtful
DAY = pd.Timedelta(days=1).value
CALENDAR = (  # unit, spacing in days, to numbers, back to dates (first day), one unit
    ("months", 28, 31, "{t}.year * 12 + {t}.month - 1", "'year': n // 12, 'month': n % 12 + 1", "month"),
    ("quarters", 89, 92, "{t}.year * 4 + {t}.quarter - 1", "'year': n // 4, 'month': 3 * (n % 4) + 1", "quarter"),
    ("years", 365, 366, "{t}.year", "'year': n, 'month': 1", "year"),
)


def parse_freq(freq, time_kind: str) -> float | int:
    """``freq`` in native units: nanoseconds (int) for datetimes, the number itself for numeric time."""
    if time_kind == "numeric":
        if isinstance(freq, bool) or not isinstance(freq, (int, float, np.integer, np.floating)):
            raise ValueError(f"the times are numbers, so freq must be a positive number, got {freq!r}")
        if not np.isfinite(freq) or freq <= 0:
            raise ValueError(f"freq must be a positive number, got {freq!r}")
        return float(freq)
    if isinstance(freq, (bool, int, float, np.integer, np.floating)):
        raise ValueError(f"the times are datetimes, so freq must be a duration such as 'h', '15min' or "
                         f"pd.Timedelta(hours=1), got the number {freq!r}")
    try:
        if isinstance(freq, str):
            step = _offset_step(pd.tseries.frequencies.to_offset(freq), freq)
        elif isinstance(freq, (pd.Timedelta, dt.timedelta, np.timedelta64)):
            step = pd.Timedelta(freq)
        elif isinstance(freq, pd.offsets.BaseOffset):
            step = _offset_step(freq, freq)
        else:
            raise ValueError(f"unsupported type {type(freq).__name__}")
    except ValueError as exc:
        raise ValueError(f"freq={freq!r} is not a fixed duration ({exc}); use e.g. 'h', '15min', 'D' (24 hours), "
                         "'7D' (a week) or a pd.Timedelta") from None
    if step <= pd.Timedelta(0):
        raise ValueError(f"freq must be a positive duration, got {freq!r}")
    return int(step.value)


def _offset_step(offset: pd.offsets.BaseOffset, freq) -> pd.Timedelta:
    """A pandas offset as a fixed duration; a day is 24 hours.

    Times are UTC nanoseconds, so a day cannot follow a daylight-saving change; pandas 3 no longer
    counts ``Day`` as a fixed ``Tick`` for that reason, pandas 2 does.
    """
    if isinstance(offset, pd.offsets.Day):
        return pd.Timedelta(days=offset.n)
    if isinstance(offset, pd.offsets.Tick):
        return pd.Timedelta(offset)
    if isinstance(offset, pd.offsets.Week):
        if offset.weekday is None:  # pd.offsets.Week(): exactly 7 days; 'W' is anchored to Sundays
            return pd.Timedelta(weeks=offset.n)
        raise ValueError(f"{freq!r} steps to the next {calendar.day_name[offset.weekday]} ({offset.rule_code}), "
                         "not by a fixed 7 days")
    if isinstance(offset, pd.offsets.BusinessDay):
        raise ValueError(f"{freq!r} steps over weekends, so it is no fixed duration: to forecast business days, fit "
                         f"on business-day numbers ({BUSINESS_DAY_FIX.format(t='df[time]')})")
    raise ValueError(f"{freq!r} is a calendar offset of varying length")


BUSINESS_DAY_FIX = ("start = {t}.min().to_datetime64().astype('datetime64[D]'); n = np.busday_count(start, "
                    "{t}.to_numpy().astype('datetime64[D]')), then map forecast numbers back to dates with "
                    "np.busday_offset(start, n)")


def local_dates_ref(time_ref: str, tz: str | None) -> str:
    """How the user reaches the times as local wall times: numpy reads tz-aware times in UTC, where
    midnight east of Greenwich falls on the previous day."""
    if tz is None:
        return time_ref
    return f"{time_ref}.dt.tz_localize(None)" if time_ref.startswith("df[") else f"{time_ref}.tz_localize(None)"


def warn_business_days(panel: Panel, freq: float | int, time_ref: str) -> None:
    """Warn when daily datetimes skip every weekend: a step of one calendar day then puts forecasts on
    Saturdays and Sundays (horizon 5 covers 3 business days) and shows each weekend to the model as
    two missing days. Legal, and right for some data, so a warning with the business-day fix."""
    if panel.time_kind != "datetime" or freq != DAY:
        return
    diffs, _ = _within(panel)
    slack = pd.Timedelta(hours=1).value  # a daylight-saving change within local-time data
    if not (np.abs(diffs - 3 * DAY) <= slack).any():
        return
    t = pd.DatetimeIndex(native_to_pandas(panel.times, panel.time_kind, panel.tz, panel.time_dtype))
    if (t.day_of_week >= 5).any():
        return
    warnings.warn(
        "the times look like business days (no Saturday or Sunday, three days from Friday to Monday), but the "
        "nominal step is one calendar day: forecasts fall on every day, weekends included (a horizon of 5 covers "
        "3 business days), and the model sees each weekend as two missing days. To forecast business days, fit on "
        f"business-day numbers: {BUSINESS_DAY_FIX.format(t=local_dates_ref(time_ref, panel.tz))}",
        UserWarning, stacklevel=user_stacklevel())


def _within(panel: Panel) -> tuple[np.ndarray, np.ndarray]:
    """Spacings between consecutive observations of one series, and the series of each."""
    within = panel.codes[1:] == panel.codes[:-1]
    return np.diff(panel.times)[within], panel.codes[1:][within]


def typical_spacing(panel: Panel) -> float | None:
    """The median spacing within series (native units), None if no series has two observations."""
    diffs, _ = _within(panel)
    return float(np.median(diffs)) if len(diffs) else None


def check_calendar(panel: Panel, explicit_freq: bool, time_ref: str) -> None:
    """Refuse (warn, if ``freq=`` was given) datetimes spaced by calendar months, quarters or years.

    A nominal step is a fixed duration, so it cannot follow months of 28-31 days: forecast dates
    would drift off the month starts and at long horizons two months would share one horizon slot.
    ``time_ref`` is how the user reaches the times (``df['ds'].dt`` or ``df.index``), for the fix.
    """
    if panel.time_kind != "datetime":
        return
    diffs, _ = _within(panel)
    if not len(diffs) or not _on_the_calendar(panel):
        return
    slack = pd.Timedelta(hours=1).value  # a daylight-saving change within local-time data
    median = np.median(diffs)
    for unit, lo, hi, number, back, one in CALENDAR:
        inside = diffs[(diffs >= lo * DAY - slack) & (diffs <= hi * DAY + slack)]
        if not (lo * DAY - slack <= median <= hi * DAY + slack) or np.ptp(inside) < DAY / 2:
            continue
        problem = (f"the times look like calendar {unit} (spacings vary between {lo} and {hi} days), but a nominal "
                   f"step is a fixed duration: it cannot follow calendar {unit}, so forecast dates would drift off "
                   f"them and at long horizons two {unit} would share one horizon slot")
        fix = (f"convert the times to {one} numbers and fit on a numeric time column, e.g. "
               f"{number.format(t=time_ref)}, then map forecast numbers n back to dates with "
               f"pd.to_datetime(pd.DataFrame({{{back}, 'day': 1}}))")
        if explicit_freq:
            warnings.warn(f"{problem}; to avoid it, {fix}", UserWarning, stacklevel=user_stacklevel())
            return
        raise ValueError(f"{problem}. To forecast by {one}, {fix}")


def _on_the_calendar(panel: Panel) -> bool:
    """Every time at one clock time and on one day of the month, or all on month starts or month
    ends: sampled by the calendar, not irregular data that happens to be about a month apart."""
    t = pd.DatetimeIndex(native_to_pandas(panel.times, panel.time_kind, panel.tz, panel.time_dtype))
    if (t - t.normalize()).nunique() > 1:
        return False
    return t.day.nunique() == 1 or bool(t.is_month_start.all()) or bool(t.is_month_end.all())


def infer_freq(panel: Panel) -> float | int:
    """The median over series of each series' median spacing; warns when series disagree, or when
    many observations are closer than that step (thinned data: its median spacing is a multiple of
    the real one, so a horizon of 6 would mean 12 real steps)."""
    diffs, codes = _within(panel)
    if not len(diffs):
        raise ValueError("cannot infer the nominal step: no series has two observations; pass freq=...")
    per_series = pd.Series(diffs).groupby(codes).median().to_numpy()
    step = float(np.median(per_series))
    off = np.abs(per_series / step - 1) > 0.25
    if off.any():
        warnings.warn(
            f"series differ in their typical spacing ({int(off.sum())} of {len(per_series)} series are more than "
            f"25% away from the median); using {describe(step, panel.time_kind)} as the nominal step. Pass freq=... "
            "to choose it", UserWarning, stacklevel=user_stacklevel())
    ratios, counts = np.unique(np.round(diffs / step, 6), return_counts=True)  # rounded: float times are noisy
    common = ratios[counts >= COMMON * len(diffs)]
    if len(common) and common[0] <= 2 / 3:
        smaller = common[0] * step
        warnings.warn(
            f"the nominal step was inferred as {describe(step, panel.time_kind)} (the median spacing), but "
            f"{counts[ratios == common[0]][0] / len(diffs):.0%} of the spacings are "
            f"{describe(smaller, panel.time_kind)}: if rows are missing from data sampled every "
            f"{describe(smaller, panel.time_kind)}, horizon and lookback count steps of "
            f"{describe(step, panel.time_kind)} instead. Pass freq=... to choose the step",
            UserWarning, stacklevel=user_stacklevel())
    step = int(round(step)) if panel.time_kind == "datetime" else step
    _warn_if_off_grid(panel, diffs, step)
    return step


def _warn_if_off_grid(panel: Panel, diffs: np.ndarray, step: float | int) -> None:
    """Times sampled in continuous time (no two gaps alike) lie on no grid: the median spacing is then
    an arbitrary duration such as 45 min 31.7 s, which horizon and lookback count and forecast times
    step by. Say so, with a round step to pass instead."""
    if len(diffs) < 10:
        return
    _, counts = np.unique(np.round(diffs / step, 6), return_counts=True)  # as in infer_freq: float times are noisy
    if counts.max() >= COMMON * len(diffs):  # a spacing many gaps share: a grid, thinned or mixed in rate
        return
    if panel.time_kind == "datetime":
        value = pd.Timedelta(step)
        unit = next((u for u in ("h", "min", "s", "ms") if value >= pd.Timedelta(1, u)), "us")
        rounded = max(value.round(unit), pd.Timedelta(1, unit))
        example = f" (e.g. freq={pd.tseries.frequencies.to_offset(rounded).freqstr!r})" if rounded != value else ""
    else:
        rounded = float(f"{step:.1g}")
        example = f" (e.g. freq={rounded:g})" if rounded != step else ""
    warnings.warn(
        f"the times lie on no regular grid (no spacing is shared by {COMMON:.0%} of the gaps), so the nominal "
        f"step was inferred as the median spacing, {describe(step, panel.time_kind)}: horizon and lookback count "
        f"steps of that length and forecast times are last + k * {describe(step, panel.time_kind)}. Pass a round "
        f"step with freq={example}", UserWarning, stacklevel=user_stacklevel())


def check_resolution(panel: Panel, freq: float | int, lookback: int) -> None:
    """Refuse observations of one series closer than the model can tell apart.

    Input times reach the model as float32 nominal steps relative to the forecast origin, up to
    ``lookback`` steps back, where float32 resolves about ``lookback * 2**-23`` steps (and
    ``to_steps`` snaps within ``SNAP`` of a whole step): closer observations would share a time,
    which the models refuse as unsorted input, blaming the wrong thing.
    """
    resolution = max(lookback * 2.0**-20, 4 * SNAP)  # 8 float32 units at the oldest input
    gaps = np.diff(series_steps(panel, freq))
    close = np.flatnonzero((panel.codes[1:] == panel.codes[:-1]) & (gaps < resolution))
    if not len(close):
        return
    i = int(close[0])

    raise ValueError(
        f"series {panel.ids[panel.codes[i]]!r} has observations at {panel.stamp(panel.times[i])} and "
        f"{panel.stamp(panel.times[i + 1])}, only "
        f"{describe(gaps[i] * freq, panel.time_kind)} apart ({len(close)} such pair(s)): closer than the model "
        f"can tell apart, {resolution:.2g} nominal steps ({describe(resolution * freq, panel.time_kind)}) at "
        f"lookback {lookback}, since times reach it as float32 steps. Merge observations this close (e.g. "
        "average them) or drop one of each pair")


def describe(freq: float | int, time_kind: str) -> str:
    """A readable nominal step for messages: '0 days 01:00:00' or '0.5'."""
    return str(pd.Timedelta(int(round(freq)), unit="ns")) if time_kind == "datetime" else f"{freq:g}"


def far_spacing(panel: Panel, freq: float | int) -> float | None:
    """The data's typical spacing when it differs from ``freq`` fourfold or more, else None."""
    spacing = typical_spacing(panel)
    return None if spacing is None or 0.25 < spacing / float(freq) < 4 else spacing


def spacing_hint(panel: Panel, freq: float | int) -> str:
    """ "; the data's typical spacing ... is far from freq ..." when they differ fourfold or more, else ""."""
    spacing = far_spacing(panel, freq)
    if spacing is None:
        return ""
    return (f"; note that the data's typical spacing ({describe(spacing, panel.time_kind)}) is far from freq "
            f"({describe(freq, panel.time_kind)}): check freq=, or leave it None to infer the spacing")


def warn_spacing_mismatch(panel: Panel, trained: float | None, freq: float | int, lookback: int, what: str) -> None:
    """Warn when data given to a fitted model is spaced fourfold or more away from the data it was
    fitted on (``trained``: that data's typical spacing; None in older saves, then the step): its
    lookback then holds a few observations (or far too many), and no error says so."""
    reference = float(freq) if trained is None else trained
    spacing = far_spacing(panel, reference)
    if spacing is None:
        return
    kind = panel.time_kind
    fitted_on = ("" if trained is None else f"data typically spaced {describe(trained, kind)} apart, with ") + (
        f"a nominal step of {describe(freq, kind)}")
    warnings.warn(
        f"{what} is typically spaced {describe(spacing, kind)} apart, but the model was fitted on {fitted_on}: its "
        f"lookback of {lookback} steps sees about {lookback * float(freq) / spacing:.3g} observations of this data "
        f"per series, against about {lookback * float(freq) / reference:.3g} in training, and it forecasts steps of "
        f"{describe(freq, kind)}. Resample the data like the training data, or fit a model on data spaced like this",
        UserWarning, stacklevel=user_stacklevel())


def series_steps(panel: Panel, freq: float | int) -> np.ndarray:
    """Every row's time in nominal steps since its series' first observation."""
    first = np.repeat(panel.times[panel.bounds[:-1]], np.diff(panel.bounds))
    return to_steps(panel.times - first, freq)


def irregularity(panel: Panel, freq: float | int) -> str | None:
    """What makes the data irregular on the nominal grid (off-grid spacing, missing values), or None."""
    steps = series_steps(panel, freq)
    within = panel.codes[1:] == panel.codes[:-1]
    off_grid = int((np.diff(steps)[within] != 1).sum())
    missing = int(np.isnan(panel.values).sum())
    parts = []
    if off_grid:
        parts.append(f"{off_grid} of {int(within.sum())} spacings differ from the nominal step "
                     f"{describe(freq, panel.time_kind)}")
    if missing:
        parts.append(f"{missing} target values are missing")
    return "; ".join(parts) or None


def future_times(last: np.ndarray, freq: float | int, horizon: int) -> np.ndarray:
    """(S, horizon) native times last + k * freq, k = 1..horizon."""
    k = np.arange(1, horizon + 1)
    if np.issubdtype(last.dtype, np.integer):
        return last[:, None] + k[None, :] * np.int64(freq)
    return last[:, None] + k[None, :] * float(freq)


def nominal_step(panel: Panel, freq, lookback: int, time_col: str | None) -> float | int:
    """The nominal step of training data in native units: ``freq`` as given, or inferred from the
    spacing, after every check of the times against it (calendar spacing, business days, times
    closer than the model resolves). The one place a training frame's times meet the grid."""
    step = None if freq is None else parse_freq(freq, panel.time_kind)
    time_ref = f"df[{time_col!r}]" if time_col else "df.index"
    check_calendar(panel, step is not None, f"{time_ref}.dt" if time_col else time_ref)
    step = infer_freq(panel) if step is None else step
    warn_business_days(panel, step, time_ref)
    check_resolution(panel, step, lookback)
    return step


def warn_if_blind(panel: Panel, freq: float | int, blind: bool, pos_encoding: str) -> None:
    """Warn when a model that places tokens by index (``blind``: softmax attention with learned or no
    positions, inputs not interpolated) is given irregular data: it treats the observations as evenly spaced."""
    if not blind:
        return
    reason = irregularity(panel, freq)
    if reason:
        warnings.warn(
            f"the data is irregular ({reason}), but softmax attention with pos_encoding={pos_encoding!r} "
            "indexes tokens by position and cannot see the time between them: it treats the observations as "
            "evenly spaced. Use attention='continuous' or pos_encoding='rope' (real timestamps)",
            UserWarning, stacklevel=user_stacklevel())
