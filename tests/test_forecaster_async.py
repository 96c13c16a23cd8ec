"""The asynchronous Forecaster: irregular multivariate frames in (both forms), forecasts at the caller's
query times out; backtest, intervals, cross-validation, save/load, plot, time units and cutoffs."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure
from query_data import TINY_ASYNC, VARIABLES, columns_form, long_records

from ts_continuum import Forecaster
from ts_continuum.forecasting.query_frames import QuerySpec, read_observations
from ts_continuum.forecasting.query_time import QueryTimes
from ts_continuum.models import AsyncTransformer


@pytest.fixture(scope="module")
def records():
    return long_records()


@pytest.fixture(scope="module")
def fitted(records):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Forecaster(**TINY_ASYNC).fit(records, val_size=2)


def queries(records: pd.DataFrame, long: bool = True) -> pd.DataFrame:
    """Queries after each series' last observation, not sorted, with an index of the caller's own."""
    last = records.groupby("unique_id")["ds"].max()
    rows = [("s2", last["s2"] + pd.Timedelta("3h"), "lab"), ("s0", last["s0"] + pd.Timedelta("1h"), "hr"),
            ("s2", last["s2"] + pd.Timedelta("30min"), "temp"), ("s0", last["s0"] + pd.Timedelta("1h"), "hr")]
    at = pd.DataFrame(rows, columns=["unique_id", "ds", "variable"], index=[7, 3, 11, 5])
    return at if long else at.drop(columns="variable")


def test_predict_answers_exactly_the_callers_rows_in_their_order(fitted, records):
    at = queries(records)
    pred = fitted.predict(records, at=at)
    assert list(pred.index) == [7, 3, 11, 5] and list(pred.columns) == ["unique_id", "ds", "variable", "value"]
    pd.testing.assert_frame_equal(pred[["unique_id", "ds", "variable"]], at)
    assert np.isfinite(pred["value"]).all()
    assert pred.loc[3, "value"] == pred.loc[5, "value"]  # a repeated row gets the same forecast
    assert pred.loc[7, "value"] != pred.loc[3, "value"]


def test_columns_form_queries_get_every_variable_and_agree_with_the_long_form(records):
    with warnings.catch_warnings():  # float64: the two forms pad their batches differently, and float32
        warnings.simplefilter("ignore")  # sums in another order differ in the 5th digit
        fitted = Forecaster(**TINY_ASYNC, precision="64-true").fit(records, val_size=2)
    long = fitted.predict(records, at=queries(records))
    wide = fitted.predict(records, at=queries(records, long=False))
    assert list(wide.columns) == ["unique_id", "ds", *VARIABLES] and list(wide.index) == [7, 3, 11, 5]
    for label, row in long.iterrows():
        assert wide.loc[label, row["variable"]] == pytest.approx(row["value"], rel=1e-10)


def test_both_frame_forms_are_the_same_observations(fitted, records):
    at = queries(records)
    pd.testing.assert_frame_equal(fitted.predict(columns_form(records), at=at), fitted.predict(records, at=at))
    spec = QuerySpec("unique_id", "ds", VARIABLES)
    _, long = read_observations(records, spec, "long")
    _, wide = read_observations(columns_form(records), spec, "wide")
    for name in ("offsets", "variable", "times", "values"):
        np.testing.assert_array_equal(getattr(long, name), getattr(wide, name))


def test_fit_reads_either_form_to_the_same_model(records):
    kwargs = dict(TINY_ASYNC, max_epochs=1, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = Forecaster(**kwargs).fit(records)
        b = Forecaster(**kwargs).fit(columns_form(records))
    assert a.spec_.variables == b.spec_.variables == VARIABLES
    at = queries(records)
    pd.testing.assert_frame_equal(a.predict(records, at=at), b.predict(records, at=at))


def test_predict_without_a_frame_continues_the_fitted_series(fitted, records):
    at = queries(records)
    pd.testing.assert_frame_equal(fitted.predict(at=at), fitted.predict(records, at=at))


def test_unsorted_input_is_sorted_not_refused(fitted, records):
    shuffled = records.sample(frac=1.0, random_state=1)
    at = queries(records)
    pd.testing.assert_frame_equal(fitted.predict(shuffled, at=at), fitted.predict(records, at=at))


def test_forecasts_condition_only_on_the_history_before_the_origin(fitted, records):
    """Backtest: changing what was observed after a cutoff changes no forecast from it."""
    base = fitted.backtest(records).forecasts
    cut = base.groupby("unique_id")["cutoff"].first()
    changed = records.copy()
    after = changed["ds"] >= changed["unique_id"].map(cut)
    changed.loc[after, "value"] += 100.0
    again = fitted.backtest(changed).forecasts
    np.testing.assert_allclose(again["value_forecast"], base["value_forecast"])
    np.testing.assert_allclose(again["value"], base["value"] + 100.0)


def test_backtest_scores_every_held_out_observation_within_the_horizon(fitted, records):
    result = fitted.backtest(records)
    last = records.groupby("unique_id")["ds"].transform("max")
    held_out = records[records["ds"] >= last - pd.Timedelta("12h")]
    assert len(result.forecasts) == len(held_out)
    assert (result.forecasts["ds"] >= result.forecasts["cutoff"]).all()
    overall = result.overall
    assert list(overall.index) == list(VARIABLES) and overall["n"].sum() == len(held_out)
    counted = held_out.groupby("variable").size()
    assert (overall["n"] == counted.reindex(overall.index)).all()
    f = result.forecasts
    hr = f[f["variable"] == "hr"]
    assert overall.loc["hr", "mse"] == pytest.approx(((hr["value_forecast"] - hr["value"]) ** 2).mean())
    scale = fitted.scaler_.scale[VARIABLES.index("hr")]
    assert overall.loc["hr", "scaled_mse"] == pytest.approx(overall.loc["hr", "mse"] / scale**2)


def test_backtest_warns_when_it_scores_observations_fit_trained_on(fitted, records):
    with pytest.warns(UserWarning, match="in-sample"):
        fitted.backtest(records)
    new = long_records(n_series=2, seed=5).assign(unique_id=lambda d: "new-" + d["unique_id"])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*in-sample.*")
        fitted.backtest(new)


def test_intervals_need_calibration_then_widen_with_the_level(fitted, records):
    at = queries(records)
    with pytest.raises(ValueError, match="calibrate"):
        fitted.predict(records, at=at, level=80)
    held_out = long_records(n_series=8, seed=7).assign(unique_id=lambda d: "cal-" + d["unique_id"])
    fitted.calibrate(held_out)
    try:
        pred = fitted.predict(records, at=at, level=[50, 80])
        assert list(pred.columns)[-4:] == ["value-lo-80", "value-lo-50", "value-hi-50", "value-hi-80"]
        assert (pred["value-lo-80"] <= pred["value-lo-50"]).all()
        assert (pred["value-hi-50"] <= pred["value-hi-80"]).all()
        np.testing.assert_allclose(pred["value"] - pred["value-lo-80"], pred["value-hi-80"] - pred["value"])
        bt = fitted.backtest(held_out, level=80)
        assert "coverage-80" in bt.overall and bt.overall["coverage-80"].between(0, 1).all()
        assert {"value_forecast-lo-80", "value_forecast-hi-80"} <= set(bt.forecasts.columns)
    finally:
        fitted.state_.calibration = None


def test_cross_validation_holds_out_series_or_times_and_leaves_the_forecaster_as_it_was(records):
    f = Forecaster(**TINY_ASYNC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_series = f.cross_validation(records, folds=2)
        by_time = f.cross_validation(records, n_windows=2, step="6h")
    assert f.model_ is None
    assert set(by_series.forecasts["unique_id"]) == set(records["unique_id"])
    # each fold's errors are scaled by the range of the series its model was fitted on (drawn with seed 0)
    ids = np.array(list(dict.fromkeys(records["unique_id"])))
    groups = np.array_split(np.random.default_rng(0).permutation(len(ids)), 2)
    fold = {sid: g for g, members in enumerate(groups) for sid in ids[members]}
    forecasts = by_series.forecasts
    train = records.assign(fold=records["unique_id"].map(fold))
    ranges = train.groupby(["fold", "variable"])["value"].agg(lambda v: v.max() - v.min())
    other = 1 - forecasts["unique_id"].map(fold)
    scale = ranges.reindex(pd.MultiIndex.from_arrays([other, forecasts["variable"]])).to_numpy()
    scaled = ((forecasts["value_forecast"] - forecasts["value"]) / scale) ** 2
    np.testing.assert_allclose(by_series.overall["scaled_mse"], scaled.groupby(forecasts["variable"]).mean())
    assert by_time.forecasts.groupby("unique_id")["cutoff"].nunique().eq(2).all()
    fixed = Forecaster(**{**TINY_ASYNC, "lookback": None}, cutoff="24h")
    with pytest.raises(ValueError, match="folds=k"):
        fixed.cross_validation(records)


def test_a_fixed_cutoff_makes_one_example_per_series_and_times_in_hours():
    """24 h after each series' first observation; datetimes become hours relative to the cutoff."""
    records = long_records(n_series=3)
    spec, obs = read_observations(records, QuerySpec("unique_id", "ds", VARIABLES, form="long"), "data")
    axis = QueryTimes.parse(24.0, None, "24h", None, None).axis(obs.time_kind, False)
    series, cutoffs = axis.training_cutoffs(obs)
    assert list(series) == [0, 1, 2]
    first = records.groupby("unique_id", sort=False)["ds"].min()
    assert list(pd.to_datetime(cutoffs)) == list(first + pd.Timedelta("24h"))
    assert axis.units(np.array([-90 * 60 * 10**9]))[0] == -1.5  # 90 minutes before: -1.5 hours
    minutes = QueryTimes.parse(24.0, None, "24h", None, "min").axis(obs.time_kind, False)
    assert minutes.units(np.array([-90 * 60 * 10**9]))[0] == -90.0


def test_rolling_cutoffs_step_through_each_series():
    records = long_records(n_series=2)
    spec, obs = read_observations(records, QuerySpec("unique_id", "ds", VARIABLES, form="long"), "data")
    axis = QueryTimes.parse("12h", "24h", None, "6h", None).axis(obs.time_kind, False)
    series, cutoffs = axis.training_cutoffs(obs)
    for s in range(2):
        mine = pd.to_datetime(cutoffs[series == s])
        sid = obs.ids[s]
        times = records.loc[records["unique_id"] == sid, "ds"]
        assert mine[0] == times.min() + pd.Timedelta("24h")
        assert (np.diff(mine) == pd.Timedelta("6h")).all() and mine[-1] <= times.max() < mine[-1] + pd.Timedelta("6h")


def test_numbers_stay_in_their_unit_and_a_number_cutoff_is_a_time():
    records = long_records(n_series=4)
    hours = records.assign(ds=(records["ds"] - pd.Timestamp("2024-01-01")) / pd.Timedelta("1h"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = Forecaster(**{**TINY_ASYNC, "horizon": 24.0, "lookback": None}, cutoff=24.0).fit(hours)
    at = pd.DataFrame({"unique_id": ["s1"], "ds": [30.5], "variable": ["hr"]})
    history = hours[(hours["unique_id"] == "s1") & (hours["ds"] < 24)]
    assert np.isfinite(f.predict(history, at=at)["value"]).all()
    with pytest.raises(ValueError, match="duration, but the times are numbers"):
        Forecaster(**{**TINY_ASYNC, "lookback": None}, cutoff=None).fit(hours)


def test_save_and_load_forecast_the_same(fitted, records, tmp_path):
    fitted.save(tmp_path / "m")
    loaded = Forecaster.load(tmp_path / "m")
    at = queries(records)
    pd.testing.assert_frame_equal(loaded.predict(at=at), fitted.predict(at=at))
    assert loaded.spec_ == fitted.spec_ and repr(loaded) == repr(fitted)
    pd.testing.assert_frame_equal(loaded.backtest(records).overall, fitted.backtest(records).overall)


def test_the_patch_model_fits_forecasts_and_survives_save_and_load(records, tmp_path):
    """Forecaster(model="patch-graph"): the lookback becomes its history, its patch option routes."""
    settings = dict(TINY_ASYNC, model="patch-graph", lookback="24h", patch=6.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = Forecaster(**settings).fit(records, val_size=2)
    assert type(f.model_).__name__ == "PatchGraphTransformer"
    assert f.model_.config["history"] == 24.0 and f.model_.config["patch"] == 6.0 and f.model_.n_patches == 4
    at = queries(records)
    pred = f.predict(at=at)
    pd.testing.assert_frame_equal(pred[["unique_id", "ds", "variable"]], at)
    assert np.isfinite(pred["value"]).all()
    f.save(tmp_path / "m")
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "m").predict(at=at), pred)


@pytest.mark.parametrize("options", [{"window_mixing": 6.0}, {"series_attention": True}])
def test_a_models_options_survive_save_and_load(options, tmp_path):
    torch.manual_seed(0)
    model = AsyncTransformer(3, d_model=8, n_heads=2, n_layers=1, d_ff=16, attention_backend="torch",
                             **options).eval()
    f = Forecaster.from_model(model, variables=VARIABLES, scale_min=np.zeros(3), scale_max=np.ones(3) * 100,
                              horizon="12h")
    records = long_records(n_series=2)
    at = queries(long_records(n_series=3))[lambda d: d["unique_id"] == "s0"]
    f.save(tmp_path / "m")
    loaded = Forecaster.load(tmp_path / "m")
    assert all(loaded.model_.config[k] == v for k, v in options.items())
    pd.testing.assert_frame_equal(loaded.predict(records, at=at), f.predict(records, at=at))


def test_a_trained_model_becomes_a_forecaster_with_its_scaling_and_names(tmp_path):
    torch.manual_seed(0)
    model = AsyncTransformer(3, d_model=8, n_heads=2, n_layers=1, d_ff=16, attention_backend="torch").eval()
    lo, hi = np.array([60.0, 0.0, 35.0]), np.array([80.0, 2.0, 39.0])
    f = Forecaster.from_model(model, variables=VARIABLES, scale_min=lo, scale_max=hi, horizon="12h")
    records = long_records(n_series=2)
    at = queries(long_records(n_series=3))[lambda d: d["unique_id"] == "s0"]
    pred = f.predict(records, at=at)
    f.save(tmp_path / "m")
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "m").predict(records, at=at), pred)
    scaled = records[records["unique_id"] == "s0"].assign(value=lambda d: d["value"] * 2)
    doubled = Forecaster.from_model(model, variables=VARIABLES, scale_min=2 * lo, scale_max=2 * hi, horizon="12h")
    np.testing.assert_allclose(doubled.predict(scaled, at=at)["value"], 2 * pred["value"], rtol=1e-5)
    with pytest.raises(ValueError, match="holds no series"):
        f.predict(at=at)


def test_plot_draws_history_forecasts_and_actual_values(fitted, records):
    at = queries(records)[lambda d: d["unique_id"] == "s0"]
    fig = fitted.plot(records, fitted.predict(records, at=at), id="s0")
    assert isinstance(fig, Figure) and len(fig.axes) == 1  # only hr was asked for
    fig = fitted.plot_backtest(fitted.backtest(records), id="s1")
    assert isinstance(fig, Figure) and len(fig.axes) == len(VARIABLES)
    fig = fitted.plot(records, fitted.predict(records, at=at), id="s0", variables=["hr", "temp"])
    assert fig.axes[1].get_ylabel() == "temp"


def test_the_per_variable_weighting_reaches_training_and_only_the_query_models_take_it(records):
    f = Forecaster(**TINY_ASYNC, weighting="variable")
    assert f.options.module["weighting"] == "variable"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f.fit(records, val_size=2)
    assert f.learning_curve_ is not None
    with pytest.raises(ValueError, match="weighting must be one of"):
        Forecaster(**TINY_ASYNC, weighting="stay")
    with pytest.raises(ValueError, match="unknown argument 'weighting'"):
        Forecaster("patchtst", horizon=4, lookback=8, weighting="variable")
