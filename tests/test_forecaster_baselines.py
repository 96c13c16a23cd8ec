"""The baselines a backtest scores beside the model: persistence always, the seasonal naive forecast
with ``season_length``, both on the model's own matched points and in original units."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from forecaster_data import TINY, H, long_frame

from ts_continuum import Forecaster

TARGETS = ["y", "z"]


def cyclic_frame(period: int, n: int = 90, drop: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Two hourly series that repeat exactly every ``period`` hours, on different levels."""
    rng = np.random.default_rng(seed)
    parts = []
    for sid, level in (("a", 0.0), ("b", 5.0)):
        k = np.arange(n)
        parts.append(pd.DataFrame({"unique_id": sid, "ds": pd.date_range("2021-01-01", periods=n, freq="h"),
                                   "y": level + np.sin(2 * np.pi * k / period),
                                   "z": np.cos(2 * np.pi * k / period) ** 3}))
    df = pd.concat(parts, ignore_index=True)
    if drop:
        df = df.drop(index=rng.choice(len(df), int(drop * len(df)), replace=False)).reset_index(drop=True)
    return df


@pytest.mark.parametrize("period", [4, 12])  # shorter than the horizon (6) and longer
def test_the_seasonal_naive_forecast_of_an_exact_cycle_is_perfect_and_persistence_is_not(period):
    df = cyclic_frame(period)
    f = Forecaster(**TINY, limit_train_batches=2).fit(df, target_cols=TARGETS)
    with pytest.warns(UserWarning, match="in-sample"):
        result = f.backtest(df, n_windows=3, step=2, season_length=period)
    assert (result.overall["snaive_mse"] < 1e-10).all() and (result.overall["snaive_mae"] < 1e-5).all()
    assert (result.overall["naive_mse"] > 0.05).all()
    assert (result.metrics["snaive_mse"] < 1e-10).all()


def test_the_seasonal_naive_forecast_takes_the_last_observation_at_or_before_one_season_back():
    """On irregular data: an independent reading of the definition from the frame's own timestamps."""
    m, df = 5, cyclic_frame(7, n=100, drop=0.3, seed=3)
    df["y"] += np.random.default_rng(1).standard_normal(len(df))  # no cycle to hide a wrong phase
    f = Forecaster(**TINY, limit_train_batches=2).fit(df, target_cols=TARGETS)
    with pytest.warns(UserWarning, match="in-sample"):
        result = f.backtest(df, n_windows=4, step=3, season_length=m)
    for _, row in result.metrics.iterrows():
        series = df[df["unique_id"] == row["unique_id"]]
        window = result.forecasts[(result.forecasts["unique_id"] == row["unique_id"])
                                  & (result.forecasts["cutoff"] == row["cutoff"])].reset_index(drop=True)
        errors = []
        for k in range(1, H + 1):
            actual = window.loc[k - 1, row["target"]]
            then = row["cutoff"] + pd.Timedelta(hours=k - m * math.ceil(k / m))
            seen = series.loc[series["ds"] <= then, row["target"]].dropna()
            if not np.isnan(actual) and len(seen):
                errors.append(seen.iloc[-1] - actual)
        np.testing.assert_allclose(row["snaive_mse"], np.mean(np.square(errors)), rtol=1e-6)
        np.testing.assert_allclose(row["snaive_mae"], np.mean(np.abs(errors)), rtol=1e-6)


def test_without_a_season_length_only_persistence_is_scored():
    df = long_frame()
    f = Forecaster(**TINY, limit_train_batches=2).fit(df, target_cols=TARGETS)
    with pytest.warns(UserWarning, match="in-sample"):
        result = f.backtest(df)
    assert "naive_mse" in result.overall and not any(c.startswith("snaive") for c in result.overall)


def test_cross_validation_scores_the_seasonal_naive_forecast_too():
    df = cyclic_frame(12, n=120)
    result = Forecaster(**TINY, limit_train_batches=2).cross_validation(
        df, n_windows=2, target_cols=TARGETS, season_length=12)
    assert (result.overall["snaive_mse"] < 1e-10).all()


@pytest.mark.parametrize("bad", [0, -24, 2.5, "24", True])
def test_a_season_length_that_is_not_a_positive_integer_is_refused(bad):
    df = long_frame()
    f = Forecaster(**TINY, limit_train_batches=1).fit(df, target_cols=TARGETS)
    with pytest.raises(ValueError, match="season_length"):
        f.backtest(df, season_length=bad)
    with pytest.raises(ValueError, match="season_length"):
        f.cross_validation(df, target_cols=TARGETS, season_length=bad)


def test_a_season_longer_than_a_series_history_is_said_and_never_read_from_another_series():
    df = cyclic_frame(12, n=90)
    df = df[(df.unique_id == "a") | (df.ds >= df.ds.min() + pd.Timedelta(hours=40))]  # b starts 40 h later
    f = Forecaster(**TINY, limit_train_batches=2).fit(df, target_cols=TARGETS)
    with pytest.warns(UserWarning) as record:
        result = f.backtest(df, n_windows=1, season_length=70)  # a has 84 h before its cutoff, b only 44
    said = [str(w.message) for w in record if "season_length=70" in str(w.message)]
    assert len(said) == 1 and "series 'b'" in said[0] and "snaive_n" in said[0]
    metrics = result.metrics.set_index(["unique_id", "target"])
    assert metrics.loc[("b", "y"), "snaive_n"] == 0 and np.isnan(metrics.loc[("b", "y"), "snaive_mse"])
    assert metrics.loc[("a", "y"), "snaive_n"] == metrics.loc[("a", "y"), "n"] > 0
    assert (result.overall["snaive_n"] < result.overall["n"]).all()
