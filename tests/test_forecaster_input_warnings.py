"""Data a fitted Forecaster accepts but probably should not have been given: a warning that says why,
never a silently worse forecast or a table of NaN scores."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from forecaster_data import LB, TINY, H, long_frame

from ts_continuum import Forecaster

TARGETS = ["y", "z"]


@pytest.fixture(scope="module")
def data():
    return long_frame()


@pytest.fixture(scope="module")
def fitted(data):
    return Forecaster(**TINY).fit(data, target_cols=TARGETS)


def messages(record) -> list[str]:
    return [str(w.message) for w in record]


def test_predict_on_only_the_newest_rows_of_a_known_series_warns_and_says_to_include_the_history(fitted, data):
    recent = data.groupby("unique_id").tail(4)
    with pytest.warns(UserWarning, match=r"3 of 3 forecast origin\(s\) have less history than lookback") as record:
        fitted.predict(recent)
    text = " ".join(messages(record))
    assert f"lookback ({LB} nominal steps" in text and "spans 4 step(s)" in text
    assert "include the earlier rows of 'a', 'b', 'c'" in text


def test_a_short_new_series_is_warned_about_without_the_hint_for_known_ones(fitted, data):
    new = data[data.unique_id == "a"].tail(LB // 2).assign(unique_id="fresh")
    with pytest.warns(UserWarning, match="series 'fresh' spans") as record:
        fitted.predict(new)
    assert not any("include the earlier rows" in m for m in messages(record))


def test_full_histories_and_the_training_context_raise_no_history_warning(fitted, data):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted.predict()
        fitted.predict(data)


def test_backtest_warns_about_windows_with_a_short_history(fitted, data):
    head = data.groupby("unique_id").head(LB // 2 + 2 * H)  # the first window's origin has LB/2 + 1 steps behind it
    with pytest.warns(UserWarning) as record:
        fitted.backtest(head, n_windows=2)
    assert any("have less history than lookback" in m for m in messages(record))


def test_data_spaced_unlike_the_training_data_is_warned_about(fitted):
    daily = pd.DataFrame({"unique_id": "d", "ds": pd.date_range("2021-01-01", periods=60, freq="D"),
                          "y": np.sin(np.arange(60)), "z": np.cos(np.arange(60))})
    with pytest.warns(UserWarning, match=r"predict data is typically spaced 1 days 00:00:00 apart, but the model was "
                                         r"fitted on data typically spaced 0 days 01:00:00 apart, with a nominal step "
                                         r"of 0 days 01:00:00.*sees about 1 observations.*against about 24"):
        fitted.predict(daily)


def test_the_training_frame_itself_is_never_spaced_unlike_the_training_data(tmp_path):
    hourly = long_frame()
    thinned = hourly[np.random.default_rng(0).random(len(hourly)) < 0.12]  # typically over 4 h apart, freq="h"
    fitted = Forecaster(**TINY, freq="h", limit_train_batches=1).fit(thinned, target_cols=TARGETS)
    for call in (lambda: fitted.predict(thinned), lambda: fitted.backtest(thinned)):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            call()
        assert not any("typically spaced" in m for m in messages(record))
    with pytest.warns(UserWarning, match=r"typically spaced 0 days 01:00:00 apart, but the model was fitted on data "
                                         r"typically spaced 0 days 0\d:"):
        fitted.predict(hourly)
    assert Forecaster.load(fitted.save(tmp_path / "thinned")).spacing_ == fitted.spacing_ > 4 * 3600e9


def test_a_target_that_no_forecast_time_matches_is_named_instead_of_silently_scored_nan(fitted, data):
    hidden = data.copy()
    last = hidden.groupby("unique_id").cumcount(ascending=False) < H
    hidden.loc[last, "z"] = np.nan  # nothing of z to score in the last horizon
    with pytest.warns(UserWarning) as record:
        result = fitted.backtest(hidden, n_windows=1)
    assert result.overall.loc["z", "n"] == 0 and np.isnan(result.overall.loc["z", "mse"])
    assert result.overall.loc["y", "n"] > 0
    unscored = [m for m in messages(record) if "could be scored" in m]
    assert len(unscored) == 1 and "no forecast of 'z' could be scored (n = 0" in unscored[0]


def test_a_refit_fold_without_a_target_is_not_reported_when_other_folds_scored_it(data):
    hidden = data.copy()
    hidden.loc[hidden.groupby("unique_id").cumcount(ascending=False) < H, "z"] = np.nan  # the last fold has no z
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = Forecaster(**TINY, limit_train_batches=1).cross_validation(
            hidden, n_windows=2, refit=True, target_cols=TARGETS)
    assert result.overall.loc["z", "n"] > 0
    assert not any("could be scored" in m for m in messages(record))
