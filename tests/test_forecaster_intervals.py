"""Conformal prediction intervals: calibrate, predict(level=...), backtest coverage, save/load, plots."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from forecaster_data import TINY, H, long_frame, wide_frame
from matplotlib.collections import PolyCollection

from ts_continuum import Forecaster
from ts_continuum.forecasting.intervals import Calibration, min_points, parse_levels

TARGETS = ["y", "z"]
N_CAL, STEP = 8, 2
HELD_OUT = (H + (N_CAL - 1) * STEP) * pd.Timedelta("1h")


def before_held_out(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["ds"] <= df.groupby("unique_id")["ds"].transform("max") - HELD_OUT]


@pytest.fixture(scope="module")
def data():
    return long_frame(drop=0.2)  # irregular: some horizon slots of some windows are unobserved


@pytest.fixture(scope="module")
def calibrated(data):
    f = Forecaster(**TINY).fit(before_held_out(data), target_cols=TARGETS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the calibration windows are out of sample: no warning
        return f.calibrate(data, n_windows=N_CAL, step=STEP)


def conformal(scores: np.ndarray, level: float) -> float:
    """The ceil((n + 1) level)-th smallest observed score, written out."""
    seen = np.sort(scores[~np.isnan(scores)])
    return float(seen[math.ceil((len(seen) + 1) * level / 100) - 1])


def test_the_quantile_is_the_finite_sample_conformal_rank_of_each_slots_scores():
    rng = np.random.default_rng(0)
    scores = rng.exponential(size=(30, 4, 2))
    scores[rng.random(scores.shape) < 0.2] = np.nan
    q = Calibration(scores).quantiles([50.0, 80.0, 90.0], TARGETS)
    for i, level in enumerate([50, 80, 90]):
        for k in range(4):
            for c in range(2):
                assert q[i, k, c] == conformal(scores[:, k, c], level)
    assert (np.diff(q, axis=0) >= 0).all()  # wider for higher levels


@pytest.mark.parametrize("level, need", [(50, 1), (80, 4), (90, 9), (95, 19), (99, 99), (97.5, 39)])
def test_a_level_needs_just_enough_points_for_a_finite_quantile(level, need):
    assert min_points(level) == need
    assert np.isfinite(Calibration(np.ones((need, 1, 1))).quantiles([level], ["y"])).all()
    if need > 1:
        with pytest.raises(ValueError, match=rf"level {level:g} needs at least {need} calibration points per horizon "
                                             rf"step and target, but the calibration has {need - 1} for 'y' at step 1"
                                             r".*calibrate on more windows"):
            Calibration(np.ones((need - 1, 1, 1))).quantiles([level], ["y"])


def test_levels_are_percentages():
    assert parse_levels(95) == [95.0] and parse_levels([95, 80, 80.0]) == [80.0, 95.0]
    assert parse_levels(np.array(80)) == parse_levels(np.float32(80)) == parse_levels(pd.Series([80])) == [80.0]
    for bad in (0, 100, 150, -5):
        with pytest.raises(ValueError, match=rf"level {bad!r} is not a coverage in percent"):
            parse_levels([80, bad])
    with pytest.raises(ValueError, match=r"levels are percentages, e.g. level=80 .*not 0.8"):
        parse_levels(0.8)
    for bad in ("80", True, None):
        with pytest.raises(ValueError, match="level must be a number or a list of numbers in percent"):
            parse_levels([bad])
    with pytest.raises(ValueError, match="level is empty"):
        parse_levels([])


def test_calibration_scores_are_the_held_out_errors_over_each_series_scale(calibrated, data):
    f = calibrated
    fc = f.backtest(data, n_windows=N_CAL, step=STEP).forecasts  # the same windows, forecast again
    std = pd.DataFrame(f.scaler_.std, index=list(f.series_), columns=TARGETS)
    for c, name in enumerate(TARGETS):
        expected = (fc[f"{name}_forecast"] - fc[name]).abs() / std.loc[fc["unique_id"], name].to_numpy()
        np.testing.assert_allclose(f.calibration_.scores[..., c].reshape(-1), expected.to_numpy(), rtol=1e-6)
    points = f.calibration_.points()
    assert points.max() <= 3 * N_CAL and points.min() < 3 * N_CAL  # dropped rows leave slots unobserved


def test_predict_with_level_brackets_the_forecast_by_the_quantile_times_the_series_scale(calibrated, data):
    f = calibrated
    pred = f.predict(data, level=[90, 80])
    assert list(pred.columns) == ["unique_id", "ds", "y", "y-lo-90", "y-lo-80", "y-hi-80", "y-hi-90",
                                  "z", "z-lo-90", "z-lo-80", "z-hi-80", "z-hi-90"]
    pd.testing.assert_frame_equal(pred[["unique_id", "ds", *TARGETS]], f.predict(data))
    slot = pred.groupby("unique_id").cumcount().to_numpy()
    for c, name in enumerate(TARGETS):
        std = f.scaler_.std[pred["unique_id"].map(f.series_).to_numpy(), c]
        for level in (80, 90):
            q = np.array([conformal(f.calibration_.scores[:, k, c], level) for k in range(H)])[slot]
            np.testing.assert_allclose(pred[f"{name}-hi-{level}"] - pred[name], q * std, rtol=1e-9)
            np.testing.assert_allclose(pred[name] - pred[f"{name}-lo-{level}"], q * std, rtol=1e-9)
        assert (pred[f"{name}-lo-90"] <= pred[f"{name}-lo-80"]).all()
    new = data[data["unique_id"] == "a"].assign(unique_id="new", y=lambda d: 10 * d["y"])  # scaled by its history
    wide = f.predict(new, level=80)
    assert ((wide["y-hi-80"] - wide["y"]) > 5 * (pred.loc[pred["unique_id"] == "a", "y-hi-80"] - pred.loc[
        pred["unique_id"] == "a", "y"]).to_numpy()).all()


def test_backtest_with_level_reports_the_intervals_and_their_coverage(calibrated, data):
    f = calibrated
    every = f.calibration_.windows  # all of them overlap
    with pytest.warns(UserWarning, match=rf"backtest: {every} of {every} windows \(series 'a', 'b', 'c'\) overlap the "
                                         r"windows calibrate scored .*at least their level by construction") as caught:
        result = f.backtest(data, n_windows=N_CAL, step=STEP, level=80)  # the calibration windows themselves
    assert caught[0].filename == __file__
    fc = result.forecasts
    assert [c for c in fc.columns if "-lo-" in c or "-hi-" in c] == ["y_forecast-lo-80", "y_forecast-hi-80",
                                                                     "z_forecast-lo-80", "z_forecast-hi-80"]
    for name in TARGETS:
        seen = fc.dropna(subset=[name])
        inside = seen[name].between(seen[f"{name}_forecast-lo-80"], seen[f"{name}_forecast-hi-80"])
        assert result.overall.loc[name, "coverage-80"] == pytest.approx(inside.mean())
        assert result.overall.loc[name, "coverage-80"] >= 0.8  # conformal: at least the level on its own scores
        width = seen[f"{name}_forecast-hi-80"] - seen[f"{name}_forecast-lo-80"]
        assert result.overall.loc[name, "width-80"] == pytest.approx(width.mean())
    assert {"coverage-80", "width-80"} <= set(result.metrics.columns)


def test_intervals_calibrated_on_one_period_cover_about_their_level_on_the_next():
    rng = np.random.default_rng(1)
    frames = []
    for i in range(8):  # noisy daily cycles: errors of the same size in both periods
        t = np.arange(240)
        y = np.sin(2 * np.pi * (t + 3 * i) / 24) + 0.3 * rng.standard_normal(240)
        frames.append(pd.DataFrame({"unique_id": f"s{i}", "ds": pd.date_range("2024-01-01", periods=240, freq="h"),
                                    "y": 5 * i + (1 + i) * y}))  # different levels and scales
    df = pd.concat(frames, ignore_index=True)
    hours = (df["ds"] - df["ds"].min()) / pd.Timedelta("1h")
    f = Forecaster(**{**TINY, "max_epochs": 3}).fit(df[hours < 120])
    f.calibrate(df[hours < 180], n_windows=10, step=H)  # windows in hours 120-179
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # after the calibration windows: no overlap warning
        result = f.backtest(df, n_windows=10, step=H, level=[50, 90])  # windows in hours 180-239, unseen
    with pytest.warns(UserWarning, match=r"backtest: 8 of 88 windows .* overlap the windows calibrate scored"):
        f.backtest(df, n_windows=11, step=H, level=50)  # the earliest window starts in the calibration's last
    assert 0.35 <= result.overall.loc["y", "coverage-50"] <= 0.65
    assert 0.8 <= result.overall.loc["y", "coverage-90"] <= 0.97


def test_intervals_need_a_calibration_of_this_fit(data):
    f = Forecaster(**TINY).fit(before_held_out(data), target_cols=TARGETS)
    for call in (lambda: f.predict(level=80), lambda: f.backtest(data, level=80)):
        with pytest.raises(ValueError, match=r"needs prediction-interval calibration: call calibrate\(df, n_windows="):
            call()
    f.calibrate(data, n_windows=N_CAL, step=STEP)
    assert f.predict(level=80).shape[1] == 2 + 3 * 2
    f.fit(before_held_out(data), target_cols=TARGETS)
    assert f.calibration_ is None  # a new model: the old errors do not describe it
    with pytest.raises(ValueError, match="needs prediction-interval calibration"):
        f.predict(level=80)
    with pytest.raises(ValueError, match="level 99 needs at least 99 calibration points"):
        f.calibrate(data, n_windows=2, step=STEP).predict(level=99)


def test_calibrating_on_training_data_warns_that_the_intervals_would_be_too_narrow(data):
    f = Forecaster(**TINY).fit(data, target_cols=TARGETS)
    narrow = r"calibrate: 6 of 6 windows .* trained on.*too small, so the intervals would be too narrow.*then calibrate"
    with pytest.warns(UserWarning, match=narrow) as caught:
        f.calibrate(data, n_windows=2)
    assert caught[0].filename == __file__  # said where the user called it


def test_save_and_load_keep_the_calibration(calibrated, data, tmp_path):
    loaded = Forecaster.load(calibrated.save(tmp_path / "calibrated"))
    np.testing.assert_array_equal(loaded.calibration_.scores, calibrated.calibration_.scores)
    np.testing.assert_array_equal(loaded.calibration_.until, calibrated.calibration_.until)  # the overlap warning's
    pd.testing.assert_frame_equal(loaded.predict(data, level=[80, 90]), calibrated.predict(data, level=[80, 90]))
    plain = Forecaster(**TINY).fit(before_held_out(data), target_cols=TARGETS)
    assert Forecaster.load(plain.save(tmp_path / "plain")).calibration_ is None


def test_a_new_series_is_calibrated_on_its_scale_up_to_each_origin(data):
    f = Forecaster(**TINY).fit(before_held_out(data), target_cols=TARGETS)
    new = data.assign(unique_id=data["unique_id"] + "_new")
    f.calibrate(new, n_windows=N_CAL, step=STEP)
    fc = f.backtest(new, n_windows=N_CAL, step=STEP).forecasts
    assert f.calibration_.until is not None and (f.calibration_.until == np.iinfo(np.int64).min).all()  # none known
    windows = fc.groupby(["unique_id", "cutoff"], sort=False)
    assert windows.ngroups == len(f.calibration_.scores)
    for w, ((sid, cutoff), rows) in enumerate(windows):
        history = new[(new["unique_id"] == sid) & (new["ds"] <= cutoff)]
        std = history[TARGETS].std(ddof=0).to_numpy()  # the history up to the origin, not the whole series
        expected = (rows[[f"{t}_forecast" for t in TARGETS]].to_numpy() - rows[TARGETS].to_numpy()) / std
        np.testing.assert_allclose(f.calibration_.scores[w], np.abs(expected), rtol=1e-6)


def test_interval_columns_never_overwrite_another_column():
    df = long_frame().rename(columns={"z": "y-lo-80"})
    f = Forecaster(**TINY).fit(before_held_out(df), target_cols=["y", "y-lo-80"])
    f.calibrate(df, n_windows=N_CAL, step=STEP)
    with pytest.raises(ValueError, match=r"the 80 % interval of 'y' would be written to column 'y-lo-80', which the "
                                         r"output already has: rename that column"):
        f.predict(level=80)
    assert "y-lo-80-lo-50" in f.predict(level=50).columns
    df = long_frame().rename(columns={"z": "y_forecast-hi-90"})  # backtest writes y's bounds as y_forecast-*
    g = Forecaster(**TINY).fit(before_held_out(df), target_cols=["y", "y_forecast-hi-90"])
    g.calibrate(df, n_windows=N_CAL, step=STEP)
    with pytest.raises(ValueError, match=r"the 90 % interval of 'y_forecast' would be written to column "
                                         r"'y_forecast-hi-90'"):
        g.backtest(df, level=[80, 90])


def test_distinct_levels_get_distinct_names(calibrated):
    pred = calibrated.predict(level=[80, 80.0000001, 12.5])
    assert [c for c in pred.columns if c.startswith("y-")] == ["y-lo-80.0000001", "y-lo-80", "y-lo-12.5", "y-hi-12.5",
                                                             "y-hi-80", "y-hi-80.0000001"]


def test_wide_frames_get_interval_columns_beside_each_variable():
    df = wide_frame(n=130)
    f = Forecaster(**TINY).fit(df.iloc[:100])
    f.calibrate(df, n_windows=12, step=2)
    pred = f.predict(df, level=80)
    assert list(pred.columns) == ["a", "a-lo-80", "a-hi-80", "b", "b-lo-80", "b-hi-80"]
    assert pred.index.name == "date" and (pred["a-lo-80"] < pred["a"]).all() and (pred["a"] < pred["a-hi-80"]).all()


def test_plots_shade_the_intervals(calibrated, data):
    f = calibrated
    fig = f.plot(data, f.predict(data, level=[80, 90]), id="b")
    for ax in fig.axes:
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 2
        top = bands[0].get_paths()[0].vertices[:, 1].max()  # the widest band is drawn first
        assert top == pytest.approx(f.predict(data, level=90)[lambda d: d["unique_id"] == "b"][
            f"{ax.get_ylabel()}-hi-90"].max())
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()][1:3] == ["90 % interval", "80 % interval"]
    result = f.backtest(data, n_windows=3, step=H // 2, level=80)
    fig = f.plot_backtest(result, id="b")
    assert all(len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 3 for ax in fig.axes)
    rows = result.forecasts[result.forecasts["unique_id"] == "b"].dropna(subset=["y"])
    share = rows["y"].between(rows["y_forecast-lo-80"], rows["y_forecast-hi-80"]).mean()
    assert f", 80 % interval covers {share:.0%} over {len(rows)} matched points" in fig.axes[0].get_title("left")


def test_fit_with_calibration_windows_is_the_manual_route_in_one_call(data, calibrated):
    """A copy fitted before the windows scores them (exactly the fit-then-calibrate route), and the
    forecaster itself fits on everything: its forecasts are a plain fit's, its intervals held out."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # out of sample by construction: no warning
        f = Forecaster(**TINY).fit(data, target_cols=TARGETS, calibration_windows=N_CAL, calibration_step=STEP)
    np.testing.assert_array_equal(f.calibration_.scores, calibrated.calibration_.scores)
    plain = Forecaster(**TINY).fit(data, target_cols=TARGETS)
    pd.testing.assert_frame_equal(f.predict()[TARGETS], plain.predict()[TARGETS])
    banded = f.predict(level=[80])
    assert (banded["y-lo-80"] < banded["y"]).all() and (banded["y"] < banded["y-hi-80"]).all()


def test_fit_with_calibration_windows_refuses_what_it_cannot_do(data):
    with pytest.raises(ValueError, match="calibration_step needs calibration_windows"):
        Forecaster(**TINY).fit(data, target_cols=TARGETS, calibration_step=2)
    f = Forecaster(**TINY)
    with pytest.raises(ValueError, match=r"fit\(calibration_windows=\.\.\.\) trains on each series up to its first "
                                         r"cutoff.*use fewer windows"):
        f.fit(data, target_cols=TARGETS, calibration_windows=16, calibration_step=2)
    assert f.model_ is None
    with pytest.raises(ValueError, match="n_windows"):
        f.fit(data, target_cols=TARGETS, calibration_windows=0)
