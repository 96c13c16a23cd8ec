"""Forecaster.cross_validation: fits on the data before the windows, then scores them like backtest."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from forecaster_data import TINY, H, long_frame

from ts_continuum import Forecaster

TARGETS = ["y", "z"]
N, STEP = 3, 2


def up_to(df: pd.DataFrame, held_out_steps: int) -> pd.DataFrame:
    """Each series without its last ``held_out_steps`` hours: the manual split the docs describe."""
    last = df.groupby("unique_id")["ds"].transform("max")
    return df[df["ds"] <= last - held_out_steps * pd.Timedelta("1h")]


def test_one_fit_before_the_first_window_is_the_manual_split_then_backtest():
    df = long_frame(drop=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no window is in-sample
        result = Forecaster(**TINY).cross_validation(df, n_windows=N, step=STEP, target_cols=TARGETS)
    manual = Forecaster(**TINY).fit(up_to(df, H + (N - 1) * STEP), target_cols=TARGETS)
    expected = manual.backtest(df, n_windows=N, step=STEP)
    pd.testing.assert_frame_equal(result.forecasts, expected.forecasts)
    pd.testing.assert_frame_equal(result.metrics, expected.metrics)
    pd.testing.assert_frame_equal(result.overall, expected.overall)


def test_val_size_is_held_out_inside_the_data_before_the_first_window():
    df = long_frame(drop=0.2)
    result = Forecaster(**TINY).cross_validation(df, n_windows=N, step=STEP, target_cols=TARGETS, val_size=H)
    manual = Forecaster(**TINY).fit(up_to(df, H + (N - 1) * STEP), target_cols=TARGETS, val_size=H)
    pd.testing.assert_frame_equal(result.forecasts, manual.backtest(df, n_windows=N, step=STEP).forecasts)


def test_every_fold_uses_the_nominal_step_of_the_whole_frame():
    # 2-hourly for 60 hours, then hourly: the whole frame's median spacing is an hour, the data before
    # the first cutoff alone would give two hours
    parts = []
    for sid in ("a", "b"):
        hours = np.r_[np.arange(0, 60, 2), np.arange(60, 100)]
        parts.append(pd.DataFrame({"unique_id": sid, "ds": pd.Timestamp("2024-01-01") + pd.to_timedelta(hours, "h"),
                                   "y": np.sin(hours / 4.0) + (sid == "b")}))
    df = pd.concat(parts, ignore_index=True)
    held_out = H + 2 * 12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the spacing warnings are not what is tested
        assert Forecaster(**TINY).fit(up_to(df, held_out)).freq_ == 2 * 3600 * 10**9
        result = Forecaster(**TINY).cross_validation(df, n_windows=3, step=12)
        manual = Forecaster(**TINY, freq="h").fit(up_to(df, held_out)).backtest(df, n_windows=3, step=12)
    pd.testing.assert_frame_equal(result.forecasts, manual.forecasts)


def test_refit_fits_a_model_per_window_on_the_data_up_to_its_cutoff():
    df = long_frame()
    result = Forecaster(**TINY).cross_validation(df, n_windows=N, step=STEP, refit=True, target_cols=TARGETS)
    parts = []
    for i in range(N):  # window i: fit without its horizon and the later windows, forecast its horizon
        later = (N - 1 - i) * STEP
        model = Forecaster(**TINY).fit(up_to(df, H + later), target_cols=TARGETS)
        parts.append(model.backtest(up_to(df, later), n_windows=1).forecasts)
    expected = pd.concat(parts).sort_values(["unique_id", "cutoff", "ds"], kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(result.forecasts, expected)
    assert result.forecasts.groupby("unique_id")["cutoff"].nunique().eq(N).all()
    once = Forecaster(**TINY).cross_validation(df, n_windows=N, step=STEP, target_cols=TARGETS)
    first = result.forecasts["cutoff"] == result.forecasts.groupby("unique_id")["cutoff"].transform("min")
    pd.testing.assert_frame_equal(result.forecasts[first], once.forecasts[first])  # same fit for the first window
    assert not np.allclose(result.forecasts.loc[~first, "y_forecast"], once.forecasts.loc[~first, "y_forecast"])


def test_refit_scores_an_origin_once_when_two_cutoffs_fall_into_one_gap():
    df = long_frame()
    a = df["unique_id"] == "a"
    hours = (df["ds"] - df.loc[a, "ds"].min()) / pd.Timedelta("1h")
    gappy = df[~(a & (hours == 72))]  # series a's cutoffs at hours 71 and 72 both have origin 71
    result = Forecaster(**TINY).cross_validation(gappy, n_windows=3, step=1, refit=True, target_cols=TARGETS)
    cutoffs = result.forecasts.groupby("unique_id")["cutoff"].unique()
    assert len(cutoffs["a"]) == 2 and len(cutoffs["b"]) == 3
    assert not result.forecasts.duplicated(["unique_id", "cutoff", "ds"]).any()


def test_the_forecaster_it_is_called_on_is_left_as_it_was():
    df = long_frame()
    fresh = Forecaster(**TINY)
    fresh.cross_validation(df, n_windows=2, target_cols=TARGETS)
    assert fresh.model_ is None
    fitted = Forecaster(**TINY, seed=3).fit(up_to(df, 30), target_cols=TARGETS)
    before = fitted.predict()
    fitted.cross_validation(df, n_windows=2, target_cols=TARGETS)
    pd.testing.assert_frame_equal(fitted.predict(), before)


def test_errors_name_the_windows_and_the_fix():
    df = long_frame()
    f = Forecaster(**TINY)
    # series b has 60 hours: 3 windows 12 steps apart leave it 60 - (6 + 24) = 30 steps, under 24 + 6 + 6
    with pytest.raises(ValueError, match=r"cross_validation trains on each series up to its first cutoff, horizon "
                                         r"\+ \(n_windows - 1\) \* step = 30 nominal steps .* series 'b' keeps 30 "
                                         r"steps there .*fewer than lookback 24 \+ horizon 6 \+ val_size 6 = 36"):
        f.cross_validation(df, n_windows=3, step=12, target_cols=TARGETS, val_size=6)
    gappy = df[~((df["unique_id"] == "b") & df.groupby("unique_id").cumcount().between(26, 29))]
    with pytest.raises(ValueError, match=r"cross_validation trains .* series 'b' keeps 26 steps there .*lookback 24 "
                                         r"\+ horizon 6 = 30 needed"):  # its last rows before the cutoff are missing
        f.cross_validation(gappy, n_windows=3, step=12, target_cols=TARGETS)
    with pytest.raises(ValueError, match="refit must be True"):
        f.cross_validation(df, refit="yes", target_cols=TARGETS)
    with pytest.raises(ValueError, match=r"val_size \(2\) must be at least horizon"):
        f.cross_validation(df, target_cols=TARGETS, val_size=2)
    with pytest.raises(ValueError, match="n_windows must be a positive integer"):
        f.cross_validation(df, n_windows=0, target_cols=TARGETS)
