"""Bad input to the Forecaster: a ValueError that says what is wrong and how to fix it."""

from __future__ import annotations

import datetime as dt
import io
import json
import warnings
from pathlib import Path

import dateutil.tz
import numpy as np
import pandas as pd
import pytest
import torch
from forecaster_data import LB, TINY, H, long_frame, wide_frame

from ts_continuum import Forecaster
from ts_continuum.forecasting import NotFittedError
from ts_continuum.forecasting.frames import detect_spec, read_panel
from ts_continuum.forecasting.native_times import parse_times
from ts_continuum.forecasting.steps import check_calendar, parse_freq


@pytest.fixture(scope="module")
def fitted():
    return Forecaster(**TINY).fit(long_frame(), target_cols=["y", "z"])


# --- constructor ------------------------------------------------------------------------------
@pytest.mark.parametrize("name, value", [("horizon", 0), ("horizon", 2.5), ("lookback", -3), ("lookback", True),
                                         ("horizon", "6")])
def test_horizon_and_lookback_must_be_positive_integers(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
        Forecaster(**{**TINY, name: value})


@pytest.mark.parametrize("args,largest", [(dict(horizon=10**12), r"head.0.weight, of shape \(1000000000000, "),
                                          (dict(model="encoder", lookback=10**12, d_model=8), "")])
def test_a_model_larger_than_the_machines_memory_is_refused_before_it_is_allocated(args, largest):
    """torch's allocator failed in __init__ asking for hundreds of gigabytes (or, overcommitted, the
    process was killed while the weights were initialised)."""
    with pytest.raises(ValueError, match=rf"Forecaster\(horizon=\d+, lookback=\d+.*\) with 1 target\(s\): the "
                                         rf"\w+ model would hold .* GiB of weights \(the largest, {largest}.*more than "
                                         r"this machine's .* GiB of memory.*Use a smaller horizon or lookback"):
        Forecaster(**args)


def test_unknown_option_lists_valid_names_and_suggests_one():
    with pytest.raises(ValueError, match=r"unknown argument 'max_epoch' \(did you mean 'max_epochs'\?\).*d_model.*lr"):
        Forecaster(max_epoch=3)
    with pytest.raises(ValueError, match="number of target columns"):
        Forecaster(n_channels=3)


def test_bad_model_name_and_bad_model_arguments_fail_at_construction():
    with pytest.raises(ValueError, match="unknown model 'lstm'"):
        Forecaster("lstm")
    with pytest.raises(ValueError, match="d_model .* divisible by n_heads"):
        Forecaster(**{**TINY, "d_model": 10, "n_heads": 4})
    with pytest.raises(ValueError, match="loss must be one of"):
        Forecaster(**TINY, loss="l3")


# --- columns and values -----------------------------------------------------------------------
def test_misspelled_columns_get_a_suggestion():
    df = long_frame()
    with pytest.raises(ValueError, match=r"column 'yy' \(target\) is not in the frame \(did you mean 'y'\?\)"):
        Forecaster(**TINY).fit(df, target_cols=["yy"])
    with pytest.raises(ValueError, match=r"'dss' .*did you mean 'ds'"):
        Forecaster(**TINY).fit(df, time_col="dss")
    with pytest.raises(ValueError, match=r"'series' \(long format\) is not in the frame \(did you mean 'series_id'"):
        Forecaster(**TINY).fit(df.rename(columns={"unique_id": "series_id"}), id_col="series")


def test_long_format_needs_a_y_column_or_target_cols():
    df = long_frame().rename(columns={"y": "sales"})
    with pytest.raises(ValueError, match="column 'y'"):
        Forecaster(**TINY).fit(df)


def test_wide_frame_without_a_time_column_or_datetime_index():
    df = wide_frame().reset_index()
    with pytest.raises(ValueError, match=r"no time column 'ds'.*time_col=.*datetime columns: 'date'"):
        Forecaster(**TINY).fit(df)


def test_long_time_column_with_another_name_gets_a_time_col_hint():
    df = long_frame().rename(columns={"ds": "date"})
    with pytest.raises(ValueError, match=r"column 'ds' \(long format\) is not in the frame.*"
                                         r"pass time_col=.*\(datetime columns: 'date'\)"):
        Forecaster(**TINY).fit(df)


def store_frame(ids) -> pd.DataFrame:
    """A long frame whose id column is 'store', not unique_id: detected as wide."""
    return long_frame().drop(columns="z").assign(unique_id=lambda d: d["unique_id"].map(ids)).rename(
        columns={"unique_id": "store"})


def test_long_frame_without_unique_id_is_named_as_such():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no advice to sort a frame that is refused
        with pytest.raises(ValueError, match=r"duplicate timestamp.*suggest a long frame holding several series: "
                                             r"pass id_col=<the column naming the series> \(candidates: 'store'\)"
                                             r".*Only if.*drop_duplicates"):
            Forecaster(**TINY).fit(store_frame({"a": 1, "b": 2, "c": 3}))
    with pytest.raises(ValueError, match=r"'store' are not numeric; pass target_cols=.*or id_col='store'"):
        Forecaster(**TINY).fit(store_frame({"a": "x", "b": "y", "c": "z"}))
    one = store_frame({"a": 7, "b": 8, "c": 9}).query("store == 7")
    with pytest.warns(UserWarning, match=r"target column 'store' is constant \(7\).*pass id_col='store'"):
        f = Forecaster(**TINY, limit_train_batches=2).fit(one)
    assert f.spec_.target_cols == ("store", "y")  # only a warning: a constant target can be legitimate


def test_non_numeric_targets():
    df = long_frame().assign(y=lambda d: d["y"].round(2).astype(str))
    with pytest.raises(ValueError, match="target column 'y' is not numeric.*pd.to_numeric"):
        Forecaster(**TINY).fit(df, target_cols=["y", "z"])
    wide = wide_frame().assign(label="x")
    with pytest.raises(ValueError, match="'label' are not numeric; pass target_cols"):
        Forecaster(**TINY).fit(wide)


def test_infinite_values_are_not_missing_values():
    df = long_frame()
    df.loc[5, "z"] = np.inf
    with pytest.raises(ValueError, match="'z' holds infinite values; replace them with NaN"):
        Forecaster(**TINY).fit(df, target_cols=["y", "z"])


def test_all_nan_series_and_all_nan_variable():
    df = long_frame()
    df.loc[df["unique_id"] == "b", ["y", "z"]] = np.nan
    with pytest.raises(ValueError, match="series 'b' have no observed value"):
        Forecaster(**TINY).fit(df, target_cols=["y", "z"])
    df = long_frame()
    df.loc[df["unique_id"] == "c", "z"] = np.nan
    with pytest.raises(ValueError, match="series 'c' has no observed value of 'z'"):
        Forecaster(**TINY).fit(df, target_cols=["y", "z"])


def test_missing_ids_and_missing_timestamps():
    df = long_frame().astype({"unique_id": object})
    df.loc[3, "unique_id"] = None
    with pytest.raises(ValueError, match="missing ids"):
        Forecaster(**TINY).fit(df)
    df = long_frame()
    df.loc[3, "ds"] = pd.NaT
    with pytest.raises(ValueError, match="1 missing timestamps"):
        Forecaster(**TINY).fit(df)


def test_repeated_column_names_are_named_with_the_fix(fitted):
    df = long_frame()
    with pytest.raises(ValueError, match=r"column\(s\) 'y' appear more than once.*drop or rename"):
        Forecaster(**TINY).fit(pd.concat([df, df[["y"]]], axis=1))
    with pytest.raises(ValueError, match=r"column\(s\) 'unique_id', 'ds' appear more than once"):
        Forecaster(**TINY).fit(pd.concat([df, df[["ds", "unique_id"]]], axis=1))
    with pytest.raises(ValueError, match=r"'z' appear more than once"):
        fitted.predict(pd.concat([df, df[["z"]]], axis=1))
    with pytest.raises(ValueError, match=r"'unique_id' appear more than once"):
        fitted.predict(pd.concat([df, df[["unique_id"]]], axis=1))
    wide = wide_frame()
    with pytest.raises(ValueError, match=r"'b' appear more than once"):
        Forecaster(**TINY).fit(pd.concat([wide, wide[["b"]]], axis=1))
    # repeats of a column that is not used: fine
    Forecaster(**TINY, limit_train_batches=2).fit(pd.concat([df, df[["z"]]], axis=1), target_cols="y")


def test_names_that_are_not_strings_or_numbers_are_refused_at_fit_with_the_rename():
    """A saved forecaster stores names as JSON, where a tuple (a MultiIndex column) became a list that
    the loaded forecaster then failed on in predict (unhashable type: 'list'); backtest failed too."""
    wide = wide_frame()
    wide.columns = pd.MultiIndex.from_tuples([("y", "a"), ("y", "b")])
    with pytest.raises(ValueError, match=r"the name of the target column, \('y', 'a'\), is a tuple \(a MultiIndex "
                                         r"column\).*df.columns = \['_'.join\(map\(str, c\)\) for c in df.columns\]"):
        Forecaster(**TINY).fit(wide)
    long = long_frame().rename(columns={"y": ("y", "a")})
    with pytest.raises(ValueError, match=r"target column, \('y', 'a'\), is a tuple"):
        Forecaster(**TINY).fit(long, target_cols=[("y", "a")])
    dated = wide_frame().set_axis([pd.Timestamp("2024-01-01"), "b"], axis=1)
    with pytest.raises(ValueError, match=r"is a Timestamp.*df.rename\(columns=str\)"):
        Forecaster(**TINY).fit(dated)


def test_ids_and_times_in_the_index_get_a_reset_index_hint(fitted):
    df = long_frame()
    with pytest.raises(ValueError, match=r"'unique_id' .*is not in the frame.*index level.*reset_index\(\)"):
        fitted.predict(df.set_index(["unique_id", "ds"]))
    with pytest.raises(ValueError, match=r"'unique_id' .*index level.*reset_index\(\)"):
        fitted.predict(df.set_index("unique_id"))
    with pytest.raises(ValueError, match=r"index level.*reset_index\(\)"):
        Forecaster(**TINY).fit(df.set_index(["unique_id", "ds"]))


# --- time -------------------------------------------------------------------------------------
def test_duplicate_timestamps_within_a_series():
    df = long_frame()
    df = pd.concat([df.iloc[:11], df.iloc[[10]], df.iloc[11:]], ignore_index=True)  # sorted, one repeat
    with pytest.raises(ValueError, match=r"1 duplicate timestamp\(s\) within a series \('a' at 2021-01-01 10:00:00\)"):
        Forecaster(**TINY).fit(df)


def test_unsorted_timestamps_are_sorted_with_a_warning(fitted):
    df = long_frame()
    shuffled = df.sample(frac=1.0, random_state=0)
    with pytest.warns(UserWarning, match="not in increasing order; sorting them"):
        got = fitted.predict(shuffled)
    assert list(got["unique_id"].unique()) == list(shuffled["unique_id"].unique())  # order of first appearance
    pd.testing.assert_frame_equal(got.sort_values(["unique_id", "ds"], ignore_index=True), fitted.predict(df))


def test_mixed_tz_aware_and_naive_timestamps():
    df = long_frame()
    stamps = list(df["ds"])
    stamps[0] = stamps[0].tz_localize("UTC")
    df["ds"] = pd.Series(stamps, dtype=object)
    with pytest.raises(ValueError, match="mixes tz-aware and naive timestamps"):
        Forecaster(**TINY).fit(df)
    strings = long_frame().assign(ds=lambda d: d["ds"].astype(str))
    strings.loc[0, "ds"] = "2021-01-01 00:00:00+05:00"
    with pytest.raises(ValueError, match="mixes time zones or tz-aware and naive"):
        Forecaster(**TINY).fit(strings)


def test_timestamps_must_match_the_kind_seen_at_fit(fitted):
    df = long_frame(tz="UTC")
    with pytest.raises(ValueError, match="tz-aware datetimes as times but the forecaster was fitted on naive.*"
                                         "tz_localize"):
        fitted.predict(df)
    numeric = long_frame().assign(ds=lambda d: np.arange(len(d), dtype=float))
    with pytest.raises(ValueError, match="numbers as times but the forecaster was fitted on naive datetimes; "
                                         "convert them with pd.to_datetime"):
        fitted.predict(numeric)
    on_numbers = Forecaster(**TINY, limit_train_batches=2).fit(numeric)
    with pytest.raises(ValueError, match="naive datetimes as times but the forecaster was fitted on numbers; "
                                         "give the times as the same numbers as at fit") as error:
        on_numbers.predict(long_frame())
    assert "tz_" not in str(error.value)


@pytest.mark.parametrize("freq, match", [("MS", "not a fixed duration"), (3, "must be a duration"),
                                         ("-1h", "positive duration"), ("W", r"next Sunday.*'7D' \(a week\)")])
def test_bad_freq_for_datetimes(freq, match):
    with pytest.raises(ValueError, match=match):
        Forecaster(**TINY, freq=freq).fit(long_frame())


def test_bad_freq_for_numeric_times():
    df = wide_frame().reset_index(drop=True).rename_axis("t").reset_index()
    with pytest.raises(ValueError, match="times are numbers, so freq must be a positive number"):
        Forecaster(**TINY, freq="h").fit(df, time_col="t")


ZONEFILE = Path("/usr/share/zoneinfo/America/New_York")  # a dateutil zone known by its file only (key None)


@pytest.mark.parametrize("tz", [
    "dateutil/Europe/Berlin", dateutil.tz.gettz("America/New_York"), dateutil.tz.tzoffset(None, 5400),
    dt.timezone(dt.timedelta(hours=-3)),
    pytest.param(str(ZONEFILE), marks=pytest.mark.skipif(not ZONEFILE.is_file(), reason="no system zoneinfo")),
])
def test_time_zones_of_any_library_survive_predict_backtest_and_save(tz, tmp_path):
    df = long_frame(tz="UTC")
    df["ds"] = df["ds"].dt.tz_convert(dateutil.tz.tzfile(tz) if tz == str(ZONEFILE) else tz)
    f = Forecaster(**TINY, limit_train_batches=2).fit(df)
    pred = f.predict()
    last = df.groupby("unique_id")["ds"].max()
    assert (pred.groupby("unique_id")["ds"].min() == last + pd.Timedelta(hours=1)).all()
    assert pred["ds"].dt.tz.utcoffset(pred["ds"][0]) == df["ds"].dt.tz.utcoffset(pred["ds"][0])
    pd.testing.assert_frame_equal(Forecaster.load(f.save(tmp_path / "m")).predict(), pred)
    with pytest.warns(UserWarning, match="in-sample"):
        assert len(f.backtest(df).forecasts) == 3 * H
    repeat = pd.concat([df.iloc[:11], df.iloc[[10]], df.iloc[11:]], ignore_index=True)
    with pytest.raises(ValueError, match=r"1 duplicate timestamp\(s\) within a series \('a' at 2021-01-01"):
        f.predict(repeat)


def test_a_time_zone_without_a_storable_name_is_refused_with_the_fix():
    df = long_frame(tz="UTC")
    data = (ZONEFILE if ZONEFILE.is_file() else Path(dateutil.tz.gettz("Europe/Berlin")._filename)).read_bytes()
    df["ds"] = df["ds"].dt.tz_convert(dateutil.tz.tzfile(io.BytesIO(data)))  # a zone without any name
    with pytest.raises(ValueError, match=r"time zone .*BytesIO.* cannot be stored by name; convert .*tz_convert"):
        Forecaster(**TINY).fit(df)


def test_calendar_months_are_refused_with_the_way_to_forecast_them():
    months = wide_frame(n=60)
    months.index = pd.date_range("2015-01-01", periods=60, freq="MS", name="date")
    with pytest.raises(ValueError, match=r"calendar months \(spacings vary between 28 and 31 days\).*drift.*"
                                         r"df.index.year \* 12 \+ df.index.month - 1"):
        Forecaster(**TINY).fit(months)
    quarters = months.reset_index().assign(date=pd.date_range("2000-01-01", periods=60, freq="QS"))
    with pytest.raises(ValueError, match=r"calendar quarters.*df\['date'\].dt.year \* 4"):
        Forecaster(**TINY).fit(quarters, time_col="date")
    with pytest.warns(UserWarning, match="calendar months.*drift"):  # a fixed step chosen on purpose: a warning
        f = Forecaster(**TINY, freq="30D", limit_train_batches=2).fit(months)
    assert f.freq_ == pd.Timedelta(days=30).value
    ends = months.copy()
    ends.index = pd.date_range("2015-01-31", periods=60, freq="ME", name="date")
    with pytest.raises(ValueError, match="calendar months"):
        Forecaster(**TINY).fit(ends)


def test_irregular_data_about_a_month_apart_is_not_taken_for_calendar_months():
    """Visits every 25-35 days at any time of day are irregular data, the library's use case."""
    visits = wide_frame(n=60)
    gaps = np.random.default_rng(0).uniform(25, 35, 60).cumsum()
    visits.index = pd.DatetimeIndex(pd.Timestamp("2020-01-01") + pd.to_timedelta(gaps, unit="D"), name="date")
    check_calendar(read_panel(visits, detect_spec(visits)), False, "df.index")  # no error
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        check_calendar(read_panel(visits, detect_spec(visits)), True, "df.index")  # no warning either


def test_weeks_are_a_fixed_step():
    weeks = wide_frame(n=60)
    weeks.index = pd.date_range("2015-01-04", periods=60, freq="W", name="date")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no calendar warning: a week is always 7 days
        f = Forecaster(**TINY, freq=pd.offsets.Week(), limit_train_batches=2).fit(weeks)
    assert f.freq_ == pd.Timedelta(days=7).value
    assert parse_freq(pd.offsets.Week(2), "datetime") == pd.Timedelta(days=14).value
    check_calendar(read_panel(weeks, detect_spec(weeks)), False, "df.index")  # inferred weeks are fine too


def test_business_days_are_warned_about_with_a_fix_that_works():
    days = pd.bdate_range("2021-01-04", periods=120)
    df = pd.DataFrame({"unique_id": "a", "ds": days, "y": np.sin(np.arange(120) / 3)})
    with pytest.warns(UserWarning, match=r"look like business days.*forecasts fall on every day.*np.busday_count"
                                         r"\(start, df\['ds'\]"):
        Forecaster(**TINY, limit_train_batches=1).fit(df)
    start = days.min().to_datetime64().astype("datetime64[D]")  # the fix, as the warning words it
    numbered = df.assign(ds=np.busday_count(start, df["ds"].to_numpy().astype("datetime64[D]")))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        forecast = Forecaster(**TINY, limit_train_batches=1).fit(numbered).predict()
    dates = pd.DatetimeIndex(np.busday_offset(start, forecast["ds"].to_numpy()))
    assert (dates.day_of_week < 5).all() and dates[0] == days[-1] + pd.offsets.BDay(1) and len(dates) == H
    with pytest.raises(ValueError, match="'B' steps over weekends.*np.busday_count"):
        Forecaster(**TINY, freq="B").fit(df)


def test_the_business_day_fix_reads_local_dates_of_tz_aware_times():
    days = pd.bdate_range("2021-01-04", periods=120, tz="Europe/Berlin")  # midnight is 23:00 UTC the day before
    df = pd.DataFrame({"unique_id": "a", "ds": days, "y": np.sin(np.arange(120) / 3)})
    with pytest.warns(UserWarning, match=r"look like business days.*df\['ds'\].dt.tz_localize\(None\).min\(\)"):
        Forecaster(**TINY, limit_train_batches=1).fit(df)
    local = df["ds"].dt.tz_localize(None)  # the fix, as the warning words it
    start = local.min().to_datetime64().astype("datetime64[D]")
    n = np.busday_count(start, local.to_numpy().astype("datetime64[D]"))
    assert (np.diff(n) == 1).all()


def test_daily_data_with_a_weekend_day_is_not_taken_for_business_days():
    days = pd.date_range("2021-01-04", periods=120, freq="D")
    df = pd.DataFrame({"unique_id": "a", "ds": days, "y": np.sin(np.arange(120) / 3)})
    df = df[(df.ds.dt.day_of_week < 5) | (df.ds == "2021-02-06")]  # one Saturday observed
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        Forecaster(**TINY, limit_train_batches=1).fit(df)
    assert not any("business days" in str(w.message) for w in record)


def test_daily_data_with_an_hourly_freq_says_the_spacing_is_far_from_freq():
    daily = wide_frame(n=90)
    daily.index = pd.date_range("2022-03-01", periods=90, freq="D", name="date")
    with pytest.raises(ValueError, match=r"too sparse.*typical spacing \(1 days 00:00:00\) is far from freq "
                                         r"\(0 days 01:00:00\)"):
        Forecaster(**TINY, freq="h").fit(daily)


def test_day_first_date_strings_are_refused_not_misread():
    days = pd.date_range("2024-01-01", periods=40, freq="D")
    df = wide_frame(n=40).reset_index(drop=True).assign(ds=days.strftime("%d/%m/%Y"))
    with pytest.raises(ValueError, match=r"do not all parse with one format: '01/01/2024' reads as '%m/%d/%Y' but "
                                         r"'13/01/2024' does not.*pd.to_datetime\(df\['ds'\], format=.*dayfirst=True"):
        Forecaster(**TINY).fit(df)
    with pytest.raises(ValueError, match=r"no date format pandas can infer \(e.g. '01/01/2024 12AM'\).*format="):
        parse_times(pd.Series(days.strftime("%d/%m/%Y %I%p")), "ds")  # would be parsed string by string


def native(times) -> np.ndarray:
    return pd.DatetimeIndex(times).as_unit("ns").asi8


@pytest.mark.parametrize("times,layout", [
    (pd.date_range("2024-01-01", periods=150, freq="h"), "%d/%m/%Y %H:%M"),  # misread as Jan 1 to Jul 1
    (pd.date_range("2024-01-01", periods=150, freq="h"), "%m/%d/%Y %H:%M"),
    (pd.date_range("2023-01-01", periods=24, freq="MS"), "%d/%m/%Y"),  # month starts, not Jan 1 to 12 twice
])
def test_date_strings_that_read_both_ways_take_the_reading_that_spaces_them_regularly(times, layout):
    """With no day above 12 both layouts parse every string; the misreading of day-first strings
    turned each new day into a new month without a word."""
    assert (times.day <= 12).all()
    got, *_ = parse_times(pd.Series(times.strftime(layout)), "ds")
    np.testing.assert_array_equal(got, native(times))


def test_day_first_hourly_strings_forecast_from_the_right_day():
    ds = pd.date_range("2024-01-01", periods=80, freq="h")
    df = pd.DataFrame({"unique_id": "a", "ds": ds.strftime("%d/%m/%Y %H:%M"), "y": np.sin(np.arange(80) / 4)})
    pred = Forecaster(**TINY).fit(df).predict()
    assert pd.Timestamp(pred["ds"].iloc[0]) == ds[-1] + pd.Timedelta("1h")


@pytest.mark.parametrize("times,why", [
    (pd.date_range("2024-01-01", periods=10, freq="D"), "both readings space the times regularly"),  # or monthly
    (pd.DatetimeIndex(["2024-01-01 00:00", "2024-01-01 01:00", "2024-01-01 02:00", "2024-01-02 00:00"]),
     "neither reading spaces the times regularly"),  # hourly with a gap of 22 hours
])
def test_date_strings_that_read_both_ways_alike_are_refused_with_both_formats(times, why):
    strings = pd.Series(times.strftime("%d/%m/%Y %H:%M"))
    with pytest.raises(ValueError, match=rf"time column 'ds' holds date strings that read both month-first and "
                                         rf"day-first.*\('02/01/2024 00:00' is 2024-02-01 00:00:00 month-first and "
                                         rf"2024-01-02 00:00:00 day-first\), and {why}.*pd.to_datetime\(df\['ds'\], "
                                         r"format='%d/%m/%Y %H:%M'\) for day-first dates \(format='%m/%d/%Y %H:%M'"):
        parse_times(strings, "ds")


@pytest.mark.parametrize("values", [
    ["2024-01-01", "2024-01-01 05:00", "2024-01-02 05:00:00.5"],  # ISO 8601 of several precisions
    ["13/01/2024", "14/01/2024", "01/02/2024"],  # day-first from the first string on: one format
    [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 2, 1)],
    [dt.datetime(2024, 1, 1, 5), "2024-01-02", None],
    ["Jan 01 2024", "Jan 02 2024", "Feb 01 2024"],
])
def test_time_strings_and_objects_in_one_layout_are_read(values):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pandas notes a day-first guess
        expected = pd.to_datetime(pd.Series(values), dayfirst=isinstance(values[0], str) and "/" in values[0],
                                  format="ISO8601" if values[0] == "2024-01-01" else None)
        series = pd.Series(values, dtype=object)
        if values[-1] is None:
            with pytest.raises(ValueError, match="1 missing timestamps"):
                parse_times(series, "ds")
            series, expected = series[:-1], expected[:-1]
        times, kind, tz, _ = parse_times(series, "ds")
    assert (kind, tz) == ("datetime", None)
    np.testing.assert_array_equal(times, expected.dt.as_unit("ns").astype("int64").to_numpy())


def test_day_frequencies_are_24_hours():
    day = pd.Timedelta(days=1).value
    for freq in ("D", "1D", pd.offsets.Day(), "2D", pd.offsets.Day(3)):
        assert parse_freq(freq, "datetime") == day * pd.tseries.frequencies.to_offset(freq).n
    with pytest.raises(ValueError, match="positive duration"):
        parse_freq("-1D", "datetime")
    with pytest.raises(ValueError, match=r"not a fixed duration.*'D' \(24 hours\)"):
        parse_freq("MS", "datetime")


def test_object_columns_of_numbers_are_numeric_times():
    times, kind, tz, dtype = parse_times(pd.Series([3, 1, 2, None], dtype=object).iloc[:3], "t")
    assert (kind, tz, dtype, times.tolist()) == ("numeric", None, "int64", [3.0, 1.0, 2.0])
    assert parse_times(pd.Series([0.5, 1, np.int64(2)], dtype=object), "t")[1:] == ("numeric", None, "float64")
    df = wide_frame().reset_index(drop=True)
    df["t"] = pd.Series(range(len(df)), dtype=object)
    pred = Forecaster(**TINY, limit_train_batches=2).fit(df, time_col="t").predict()
    assert pred["t"].tolist() == list(range(len(df), len(df) + H))
    df["t"] = pd.Series([*range(len(df) - 1), "2022-01-01"], dtype=object)
    with pytest.raises(ValueError, match="time column 't' mixes numbers and other values"):
        Forecaster(**TINY).fit(df, time_col="t")
    with pytest.raises(ValueError, match="missing"):
        parse_times(pd.Series([1, None, 3], dtype=object), "t")


# --- too little data --------------------------------------------------------------------------
def test_too_short_series_say_how_many_steps_are_needed():
    df = long_frame()
    df = df[(df["unique_id"] != "b") | (df["ds"] < "2021-01-03 07:00")]  # b keeps 26 hourly steps
    with pytest.raises(ValueError, match=rf"lookback {LB} \+ horizon {H} = {LB + H} nominal steps.*'b': 26"):
        Forecaster(**TINY).fit(df)
    with pytest.raises(ValueError, match=rf"\+ val_size 40 = {LB + H + 40}.*or a smaller val_size"):
        Forecaster(**TINY).fit(long_frame(), val_size=40)


def test_val_size_must_hold_a_horizon():
    with pytest.raises(ValueError, match=f"val_size \\(3\\) must be at least horizon \\({H}\\)"):
        Forecaster(**TINY).fit(long_frame(), val_size=3)
    with pytest.raises(ValueError, match="val_size must be a positive integer"):
        Forecaster(**TINY).fit(long_frame(), val_size=0.2)


def test_predict_needs_every_variable_in_the_lookback_window(fitted):
    df = long_frame()
    recent = (df["unique_id"] == "a") & (df["ds"] > "2021-01-02 02:00")  # a's last 53 hours
    df.loc[recent, "z"] = np.nan
    with pytest.raises(ValueError, match=rf"series 'a' has no observation of 'z' in the {LB} nominal steps up to "
                                         r"2021-01-04 07:00:00.*its 53 most recent values of 'z' are missing "
                                         r"\(since 2021-01-02 03:00:00; the last observed one is at 2021-01-02 02:00"):
        fitted.predict(df)


def test_backtest_arguments_and_length(fitted):
    df = long_frame()
    with pytest.raises(ValueError, match="n_windows must be a positive integer"):
        fitted.backtest(df, n_windows=0)
    with pytest.raises(ValueError, match=r"need at least horizon \+ \(n_windows - 1\) \* step \+ 1"):
        fitted.backtest(df, n_windows=20, step=5)


# --- fitting state and saved directories ------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda f: f.predict(),
    lambda f: f.backtest(long_frame()),
    lambda f: f.save("never-written"),
    lambda f: f.plot(long_frame(), long_frame()),
])
def test_using_an_unfitted_forecaster(call, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotFittedError, match="not fitted yet: call fit"):
        call(Forecaster(**TINY))
    assert not (tmp_path / "never-written").exists()


def test_loading_what_is_not_a_saved_forecaster(fitted, tmp_path):
    with pytest.raises(ValueError, match="is not a saved Forecaster"):
        Forecaster.load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is not a saved Forecaster"):
        Forecaster.load(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "forecaster.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        Forecaster.load(bad)
    other = tmp_path / "other"
    other.mkdir()
    (other / "forecaster.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="lacks format"):
        Forecaster.load(other)


def test_loading_an_incompatible_or_incomplete_save(fitted, tmp_path):
    path = fitted.save(tmp_path / "m")
    config = json.loads((path / "forecaster.json").read_text())
    (path / "forecaster.json").write_text(json.dumps({**config, "format_version": 99}))
    with pytest.raises(ValueError, match="format version 99 .* reads version 1"):
        Forecaster.load(path)
    (path / "forecaster.json").write_text(json.dumps(config))
    (path / "weights.pt").unlink()
    with pytest.raises(ValueError, match="incomplete saved Forecaster: weights.pt missing"):
        Forecaster.load(path)


@pytest.mark.parametrize("name,how,match", [
    ("weights.pt", lambda p: p.write_bytes(b"not a torch file" * 10), r"weights.pt cannot be read as saved weights"),
    ("weights.pt", lambda p: p.write_bytes(p.read_bytes()[:200]), r"weights.pt cannot be read as saved weights"),
    ("weights.pt", lambda p: torch.save({"w": torch.zeros(2)}, p),
     r"weights.pt holds the weights of another model.*\d+ missing: embed.weight, .* \.\.\.; 1 unexpected: w\)"),
    ("weights.pt", lambda p: torch.save([1, 2], p), r"weights.pt holds no state dict"),
    ("state.npz", lambda p: p.write_bytes(p.read_bytes()[:300]), r"state.npz cannot be read \(BadZipFile"),
    ("state.npz", lambda p: np.savez(p, mean=np.zeros((3, 2))), r"state.npz lacks the arrays std, bounds"),
    ("state.npz", lambda p: np.savez(p, **{**np.load(p), "mean": np.zeros((2, 2))}),
     r"state.npz does not match forecaster.json \(3 series, 2 targets, horizon 6\): mean has shape \(2, 2\)"),
    ("forecaster.json", lambda p: p.write_text(json.dumps({k: v for k, v in json.loads(p.read_text()).items()
                                                           if k != "spec"})), r"forecaster.json lacks 'spec'"),
    ("forecaster.json", lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "model_config": 3})),
     r"forecaster.json does not describe a forecaster this ts-continuum can build"),
])
def test_a_damaged_save_is_a_value_error_naming_the_file_and_the_problem(fitted, tmp_path, name, how, match):
    path = fitted.save(tmp_path / "m")
    how(path / name)
    with pytest.raises(ValueError, match=match + r".*damaged or was changed since save\(\)") as error:
        Forecaster.load(path)
    assert "weights_only=False" not in str(error.value) and error.value.__cause__ is None


def test_weights_of_another_model_name_the_parameters_that_differ(fitted, tmp_path):
    path = fitted.save(tmp_path / "m")
    other = Forecaster(**{**TINY, "d_model": 16}).fit(long_frame(), target_cols=["y", "z"]).save(tmp_path / "other")
    (path / "weights.pt").write_bytes((other / "weights.pt").read_bytes())
    with pytest.raises(ValueError, match=r"weights.pt holds the weights of another model than forecaster.json "
                                         r"describes \(\d+ resized: .* of shape \(\d+, 16\) instead of \(\d+, 8\)"):
        Forecaster.load(path)


def test_saving_onto_a_file_and_not_a_dataframe(fitted, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        fitted.save(tmp_path / "file")
    with pytest.raises(ValueError, match="expected a pandas DataFrame"):
        Forecaster(**TINY).fit(np.zeros((10, 2)))
    with pytest.raises(ValueError, match="expected a pandas DataFrame for predict data"):
        fitted.predict([1, 2, 3])


@pytest.mark.parametrize("freq", ["h", "D", "M"])
def test_pandas_periods_are_refused_with_the_conversion_to_timestamps(freq):
    periods = pd.period_range("2021-01", periods=60, freq=freq)
    values = np.sin(np.arange(60))
    with pytest.raises(ValueError, match=r"the index holds pandas Periods \(period\[.*\]\).*"
                                         r"df.index = df.index.to_timestamp\(\)"):
        Forecaster(**TINY).fit(pd.DataFrame({"y": values}, index=periods))
    long = pd.DataFrame({"unique_id": "a", "ds": periods, "y": values})
    with pytest.raises(ValueError, match=r"time column 'ds' holds pandas Periods.*df\['ds'\].dt.to_timestamp\(\)"):
        Forecaster(**TINY).fit(long)
    if freq == "h":  # predict on a frame with a PeriodIndex names the index, not a column
        regular = pd.DataFrame({"y": values}, index=periods.to_timestamp())
        fitted = Forecaster(**TINY, limit_train_batches=1).fit(regular)
        with pytest.raises(ValueError, match=r"predict data: the index holds pandas Periods.*df.index = "):
            fitted.predict(pd.DataFrame({"y": values}, index=periods))
    converted = long.assign(ds=long["ds"].dt.to_timestamp())  # the advice works (months: the calendar check)
    if freq == "M":
        with pytest.raises(ValueError, match="calendar months"):
            Forecaster(**TINY).fit(converted)
    else:
        Forecaster(**TINY, limit_train_batches=1).fit(converted)


def test_observations_closer_than_the_model_resolves_are_refused_by_name():
    """A millisecond apart (15-minute steps), two readings would share one float32
    time; the models would then blame unsorted input."""
    quarter_hourly = wide_frame(n=120)
    extra = quarter_hourly.iloc[[100]].copy()
    extra.index = extra.index + pd.Timedelta(milliseconds=1)
    close = pd.concat([quarter_hourly, extra]).sort_index()
    with pytest.raises(ValueError, match=r"observations at .* only 0 days 00:00:00.001000 apart .*closer than the "
                                         r"model can tell apart.*Merge"):
        Forecaster(**{**TINY, "freq": "15min"}).fit(close)
    f = Forecaster(**{**TINY, "freq": "15min"}, limit_train_batches=2).fit(quarter_hourly)
    with pytest.raises(ValueError, match="closer than the model can tell apart"):
        f.predict(close)


@pytest.mark.parametrize("name", ["ds", "unique_id", "when"])
def test_a_series_named_like_the_time_or_id_column_is_refused_with_the_rename(name):
    series = pd.Series(np.sin(np.arange(80) / 5), index=pd.date_range("2021", periods=80, freq="h"), name=name)
    column = "id" if name == "unique_id" else "time"
    time_col = "when" if name == "when" else "ds"
    with pytest.raises(ValueError, match=rf"a Series named '{name}', the name of the {column} column.*"
                                         r"series.rename\('y'\)"):
        Forecaster(**TINY).fit(series, time_col=time_col)
    Forecaster(**TINY, limit_train_batches=1).fit(series.rename("y"), time_col=time_col)  # the advice works


def test_a_series_named_ds_is_the_variable_when_the_time_is_the_index_and_a_custom_id_is_called_an_id():
    from ts_continuum.forecasting.frames import detect_spec

    series = pd.Series(np.sin(np.arange(80) / 5), index=pd.date_range("2021", periods=80, freq="h"), name="ds")
    assert detect_spec(series, time_col=None).target_cols == ("ds",)  # time_col=None: the index holds the time
    with pytest.raises(ValueError, match="a Series named 'store', the name of the id column"):
        detect_spec(series.rename("store"), id_col="store")
