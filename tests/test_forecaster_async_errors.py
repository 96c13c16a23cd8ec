"""Bad input to the asynchronous Forecaster: each a ValueError naming the row or column and the fix."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from forecaster_data import TINY, long_frame
from query_data import TINY_ASYNC, columns_form, long_records

from ts_continuum import Forecaster


@pytest.fixture(scope="module")
def records():
    return long_records(n_series=4)


@pytest.fixture(scope="module")
def fitted(records):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Forecaster(**TINY_ASYNC).fit(records)


def after(records, sid, hours, variable="hr", index=None):
    last = records.loc[records["unique_id"] == sid, "ds"].max()
    return pd.DataFrame({"unique_id": [sid], "ds": [last + pd.Timedelta(hours=hours)], "variable": [variable]},
                        index=index)


def test_query_times_at_or_before_the_history_are_refused_naming_the_row(fitted, records):
    at = pd.concat([after(records, "s1", 1.0, index=[0]), after(records, "s2", 0.0, index=["late"])])
    with pytest.raises(ValueError, match=r"row 'late', series 's2' at .* its history ends at"):
        fitted.predict(records, at=at)
    with pytest.raises(ValueError, match="at or before their series' last history time"):
        fitted.predict(records, at=after(records, "s1", -5.0))


def test_unknown_ids_and_variables_are_named(fitted, records):
    with pytest.raises(ValueError, match=r"unknown id\(s\) 'x9' \(first: row 0"):
        fitted.predict(records, at=after(records, "s1", 1.0, index=[0]).assign(unique_id="x9"))
    with pytest.raises(ValueError, match=r"unknown variable\(s\) 'HR' .*did you mean 'hr'"):
        fitted.predict(records, at=after(records, "s1", 1.0, variable="HR"))
    extra = pd.concat([records, records.iloc[:1].assign(variable="spo2")])
    with pytest.raises(ValueError, match=r"predict data: unknown variable\(s\) 'spo2'"):
        fitted.predict(extra, at=after(records, "s1", 1.0))


def test_repeated_observations_with_different_values_are_refused_unless_averaging_is_asked_for(fitted, records):
    row = records.iloc[[5]]
    same = pd.concat([records, row])  # the same value twice: one observation
    at = after(records, "s0", 1.0)
    pd.testing.assert_frame_equal(fitted.predict(same, at=at), fitted.predict(records, at=at))
    clash = pd.concat([records, row.assign(value=row["value"] + 1.0)])
    with pytest.raises(ValueError, match=r"repeated with different values .* duplicates='mean'"):
        fitted.predict(clash, at=at)
    scaler = fitted.scaler_  # the same model and scaling; only the reading differs
    averaging = Forecaster.from_model(fitted.model_, variables=fitted.spec_.variables, scale_min=scaler.offset,
                                      scale_max=scaler.offset + scaler.scale, horizon="12h", lookback="24h",
                                      duplicates="mean")
    mean = records.copy()
    mean.loc[mean.index[5], "value"] += 0.5
    pd.testing.assert_frame_equal(averaging.predict(clash, at=at), averaging.predict(mean, at=at))
    with pytest.raises(ValueError, match="duplicates must be 'raise'"):
        Forecaster(**TINY_ASYNC, duplicates="first")


def test_timezone_aware_and_naive_times_do_not_mix(fitted, records):
    at = after(records, "s1", 1.0)
    with pytest.raises(ValueError, match="tz-aware datetimes as times but .* naive datetimes"):
        fitted.predict(records, at=at.assign(ds=at["ds"].dt.tz_localize("UTC")))
    with pytest.raises(ValueError, match="tz-aware datetimes as times but .* naive datetimes"):
        fitted.predict(long_records(n_series=4, tz="Europe/Berlin"), at=at)
    mixed = records.astype({"ds": object})
    mixed.loc[mixed.index[0], "ds"] = pd.Timestamp(mixed["ds"].iloc[0], tz="UTC")
    with pytest.raises(ValueError, match="mixes"):
        fitted.predict(mixed, at=at)


def test_a_variable_never_observed_in_training_is_refused_naming_it(records):
    wide = columns_form(records).assign(spo2=np.nan)
    with pytest.raises(ValueError, match=r"variable\(s\) 'spo2' are never observed in the training data"):
        Forecaster(**TINY_ASYNC).fit(wide)


def test_missing_times_are_refused_naming_the_column(fitted, records):
    bad = records.copy()
    bad.loc[bad.index[3], "ds"] = pd.NaT
    with pytest.raises(ValueError, match="time column 'ds' has 1 missing timestamps"):
        fitted.predict(bad, at=after(records, "s1", 1.0))
    at = after(records, "s1", 1.0)
    at.loc[0, "ds"] = pd.NaT
    with pytest.raises(ValueError, match="time column 'ds' has 1 missing"):
        fitted.predict(records, at=at)


def test_at_with_a_grid_model_names_the_model_to_use():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = Forecaster(**TINY).fit(long_frame(), target_cols=["y"])
    with pytest.raises(ValueError, match=r"model='patchtst' forecasts only .* Forecaster\(model='async'"):
        grid.predict(at=pd.DataFrame({"unique_id": ["a"], "ds": [pd.Timestamp("2021-02-01")]}))


@pytest.mark.parametrize("kwargs,match", [
    (dict(model="async"), "needs horizon="),
    (dict(model="async", horizon="12h", freq="h"), "freq and interpolate_inputs shape the grid models"),
    (dict(model="patchtst", cutoff=24.0), "cutoff set.* Forecaster\\(model='async'"),
    (dict(model="async", horizon=-3.0), "horizon must be a positive number"),
    (dict(model="async", horizon="12h", cutoff="24h", cutoff_step="6h"), "pass one of them"),
    (dict(model="async", horizon="12h", cutoff=object()), "cutoff must be a time of the data"),
    (dict(model="async", horizon="12h", time_unit="MS"), "not a fixed duration"),
    (dict(model="patch-graph", horizon="12h"), "PatchGraphTransformer reads a fixed span .* give lookback"),
    (dict(model="grid-patchtst", horizon="12h"), "GridPatchTST reads a fixed span .* give lookback"),
])
def test_bad_settings_are_named_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Forecaster(**kwargs)


def test_settings_that_do_not_fit_the_data_are_named_at_fit(records):
    with pytest.raises(ValueError, match="cutoff=24 is a number, but the times are datetimes"):
        Forecaster(**{**TINY_ASYNC, "lookback": None}, cutoff=24.0).fit(records)
    with pytest.raises(ValueError, match="val_size must be a share of the series"):
        Forecaster(**TINY_ASYNC).fit(records, val_size=1.5)
    with pytest.raises(ValueError, match="holds out 4 of the 4 series"):
        Forecaster(**TINY_ASYNC).fit(records, val_size=4)
    with pytest.raises(ValueError, match="calibrate\\(df\\) on series"):
        Forecaster(**TINY_ASYNC).fit(records, calibration_windows=2)


def test_predict_without_at_says_how_to_ask(fitted, records):
    with pytest.raises(ValueError, match=r"predict\(df, at=queries\)"):
        fitted.predict(records)
