"""Series -> model windows and nominal steps, checked on hand-made series (no training)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from ts_continuum.data import WindowDataset
from ts_continuum.forecasting.frames import detect_spec, read_panel
from ts_continuum.data.scaling import Scaler
from ts_continuum.forecasting.steps import infer_freq, irregularity, parse_freq
from ts_continuum.data.windows import Windows
from ts_continuum.models import PatchTST
from ts_continuum.models.packing import is_regular

HOUR = pd.Timedelta("1h").value


def test_regular_complete_series_give_exactly_the_standard_sliding_windows():
    rng = np.random.default_rng(0)
    n, L, H = 50, 8, 3
    values = rng.standard_normal((n, 2))
    times = np.arange(n) * HOUR + 10**18
    w = Windows(times, np.array([0, n]), HOUR, L, H)
    origins = w.usable(values, w.origins(end=w.steps[[-1]]))
    reference = WindowDataset(values, 0, n, L, H)
    assert len(origins) == len(reference)
    batch = w.batch(values.astype(np.float32), origins)
    for i in (0, 17, len(reference) - 1):
        item = reference[i]
        torch.testing.assert_close(batch["x"][i], item["x"])
        torch.testing.assert_close(batch["y"][i], item["y"])
        torch.testing.assert_close(batch["x_time"][i], item["x_time"])
    assert batch["x_mask"].all() and batch["y_mask"].all()
    assert is_regular(batch["x_mask"], batch["x_time"])  # the models' fast path


def test_irregular_inputs_are_right_aligned_with_times_relative_to_the_origin():
    steps = np.array([0.0, 1.0, 3.0, 4.0, 7.0, 8.2, 9.6, 10.4, 12.0])
    values = np.arange(9, dtype=np.float64)[:, None]
    w = Windows(steps * 2.0, np.array([0, 9]), 2.0, 4, 3)  # numeric times, freq 2
    x, mask, t = w.inputs(values, np.array([4]))
    # inputs of the origin at step 7: observations in (3, 7] -> steps 4 and 7
    np.testing.assert_array_equal(mask[0, :, 0], [False, False, True, True])
    np.testing.assert_array_equal(x[0, 2:, 0], [3.0, 4.0])
    np.testing.assert_allclose(t[0, 2:], [-3.0, 0.0])
    assert np.all(np.diff(t[0]) > 0)  # unused slots get earlier, increasing times
    y, y_mask = w.targets(values, np.array([4]))
    # 8.2 -> slot 1, 9.6 and 10.4 -> slot 3 (averaged), 12.0 is 5 steps ahead: outside horizon 3
    np.testing.assert_array_equal(y_mask[0, :, 0], [True, False, True])
    np.testing.assert_allclose(y[0, [0, 2], 0], [5.0, 6.5])
    assert np.isnan(y[0, 1, 0])


def test_denser_than_nominal_keeps_the_most_recent_lookback_observations():
    steps = np.arange(0, 10, 0.5)  # two observations per nominal step
    sparse = np.where(steps == 7.5, 1.0, np.nan)  # seen in the nominal window, not in the last 4 observations
    values = np.stack([steps, sparse], axis=1)
    w = Windows(steps, np.array([0, len(steps)]), 1.0, 4, 2)
    origin = np.array([len(steps) - 1])
    x, mask, t = w.inputs(values, origin)
    assert mask[..., 0].all() and not mask[..., 1].any()
    np.testing.assert_allclose(x[0, :, 0], [8.0, 8.5, 9.0, 9.5])
    np.testing.assert_allclose(t[0], [-1.5, -1.0, -0.5, 0.0])
    np.testing.assert_array_equal(w.input_counts(values, origin), [[4, 0]])


def test_missing_values_are_masked_not_zero_filled_observations():
    values = np.array([[1.0, np.nan], [2.0, 5.0], [np.nan, 6.0], [4.0, 7.0]])
    w = Windows(np.arange(4.0), np.array([0, 4]), 1.0, 4, 1)
    x, mask, _ = w.inputs(values, np.array([3]))
    np.testing.assert_array_equal(mask[0], ~np.isnan(values))
    np.testing.assert_array_equal(w.input_counts(values, np.array([3])), [[3, 3]])


def test_filled_inputs_equal_the_benchmark_runners_interpolation_baseline():
    """``fill_inputs`` is the runner's baseline (``WindowDataset(interpolate=True)``) on the Forecaster's
    windows: each variable interpolated between the window's own observations, flat before the first
    and after the last, on a complete regular grid that takes the models' fast path."""
    rng = np.random.default_rng(3)
    n, L, H = 60, 8, 3
    full = rng.standard_normal((n, 2))
    mask = rng.random((n, 2)) > 0.4
    mask[:L] = True  # every window has an observation of each variable
    values = np.where(mask, full, np.nan)
    w = Windows(np.arange(n, dtype=float), np.array([0, n]), 1.0, L, H, fill_inputs=True)
    reference = WindowDataset(full, 0, n, L, H, mask=mask, interpolate=True)
    batch = w.batch(values.astype(np.float32), np.arange(L - 1, L - 1 + len(reference)), with_targets=False)
    for i in range(len(reference)):
        torch.testing.assert_close(batch["x"][i], reference[i]["x"])
    assert batch["x_mask"].all() and is_regular(batch["x_mask"], batch["x_time"])
    torch.testing.assert_close(batch["x_time"][0], reference[0]["x_time"])
    unfilled = Windows(np.arange(n, dtype=float), np.array([0, n]), 1.0, L, H).batch(values, np.arange(L - 1, n))
    assert not unfilled["x_mask"].all()  # the same windows without filling have gaps


def test_filled_inputs_of_irregular_times_and_an_unseen_variable():
    steps = np.array([0.0, 1.0, 3.0, 4.0, 7.0, 8.2, 9.6])
    values = np.stack([np.arange(7.0), np.where(steps < 4, 1.0, np.nan)], axis=1)
    w = Windows(steps, np.array([0, 7]), 1.0, 4, 1, fill_inputs=True)
    x, mask, t = w.inputs(values, np.array([6]))  # observations at 7.0, 8.2, 9.6 read out at 6.6 .. 9.6
    np.testing.assert_allclose(t[0], [-3, -2, -1, 0])
    np.testing.assert_allclose(x[0, :, 0], [4.0, 4.0 + 0.6 / 1.2, 5.0 + 0.4 / 1.4, 6.0], rtol=1e-6)
    assert mask[0, :, 0].all() and not mask[0, :, 1].any()  # no observation of it in this window


def test_filled_inputs_use_every_observation_of_a_window_denser_than_the_nominal_step():
    """Without filling, the most recent ``lookback`` observations fill the slots; filling reads out
    the whole span, so the early grid steps are not held at one value."""
    steps = np.arange(0, 12, 0.5)  # two observations per nominal step
    values = np.sin(steps)[:, None]
    w = Windows(steps, np.array([0, len(steps)]), 1.0, 8, 1, fill_inputs=True)
    x, mask, t = w.inputs(values, np.array([len(steps) - 1]))  # origin 11.5: steps 4.5 .. 11.5
    np.testing.assert_allclose(x[0, :, 0], np.sin(np.arange(4.5, 12, 1.0)), rtol=1e-6, atol=1e-7)
    assert mask.all() and (t[0] == np.arange(-7, 1)).all()


def test_windows_do_not_cross_series_boundaries():
    times = np.concatenate([np.arange(10.0), np.arange(10.0)])
    values = np.concatenate([np.zeros(10), np.ones(10)])[:, None]
    w = Windows(times, np.array([0, 10, 20]), 1.0, 6, 2)
    x, mask, _ = w.inputs(values, np.array([12]))
    assert mask[0, :, 0].sum() == 3 and (x[0, mask[0, :, 0], 0] == 1).all()
    origins = w.origins(end=w.steps[[9, 19]])
    assert set(origins) == set(range(5, 8)) | set(range(15, 18))


def test_model_accepts_irregular_windows():
    rng = np.random.default_rng(1)
    steps = np.sort(rng.choice(200, 120, replace=False)).astype(float)
    values = rng.standard_normal((120, 2))
    w = Windows(steps, np.array([0, 120]), 1.0, 24, 6)
    origins = w.usable(values, w.origins(end=w.steps[[-1]]))
    batch = w.batch(values.astype(np.float32), origins[:16])
    model = PatchTST(n_channels=2, lookback=24, horizon=6, patch_len=8, stride=4, d_model=8, n_heads=2,
                     n_layers=1, attention="continuous", pos_encoding="rope", attention_backend="torch").eval()
    assert not is_regular(batch["x_mask"], batch["x_time"])
    with torch.no_grad():
        assert torch.isfinite(model(batch["x"], batch["x_mask"], batch["x_time"])).all()


def test_freq_inference_and_parsing():
    index = pd.date_range("2021-01-01", periods=200, freq="h")
    kept = index[np.random.default_rng(0).random(200) > 0.3]
    df = pd.DataFrame({"y": np.arange(len(kept), dtype=float)}, index=kept)
    panel = read_panel(df, detect_spec(df))
    assert infer_freq(panel) == HOUR
    assert "spacings differ" in irregularity(panel, HOUR)
    assert parse_freq("15min", "datetime") == pd.Timedelta("15min").value
    assert parse_freq(pd.Timedelta(hours=2), "datetime") == 2 * HOUR
    assert parse_freq(0.25, "numeric") == 0.25
    regular = pd.DataFrame({"y": [1.0, 2.0, 3.0]}, index=index[:3])
    assert irregularity(read_panel(regular, detect_spec(regular)), HOUR) is None


def test_series_with_different_spacings_warn_when_freq_is_inferred():
    df = pd.concat([
        pd.DataFrame({"unique_id": "hourly", "ds": pd.date_range("2021", periods=30, freq="h"), "y": 1.0}),
        pd.DataFrame({"unique_id": "daily", "ds": pd.date_range("2021", periods=30, freq="D"), "y": 1.0}),
        pd.DataFrame({"unique_id": "hourly2", "ds": pd.date_range("2021", periods=30, freq="h"), "y": 1.0}),
    ])
    with pytest.warns(UserWarning, match="differ in their typical spacing"):
        assert infer_freq(read_panel(df, detect_spec(df))) == HOUR


def test_heavy_thinning_warns_that_the_inferred_step_is_a_multiple_of_a_common_spacing():
    days = pd.date_range("2021-01-01", periods=300, freq="D")
    keep = np.random.default_rng(0).random(300) > 0.6  # 60 % of the rows removed: median spacing 2 days
    thinned = pd.DataFrame({"y": np.arange(keep.sum(), dtype=float)}, index=days[keep])
    with pytest.warns(UserWarning, match=r"inferred as 2 days 00:00:00 \(the median spacing\), but \d+% of the "
                                         r"spacings are 1 days 00:00:00.*Pass freq="):
        assert infer_freq(read_panel(thinned, detect_spec(thinned))) == 2 * 24 * HOUR
    keep = np.random.default_rng(0).random(300) > 0.3  # a median spacing of one day: nothing to say
    lightly = pd.DataFrame({"y": np.arange(keep.sum(), dtype=float)}, index=days[keep])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert infer_freq(read_panel(lightly, detect_spec(lightly))) == 24 * HOUR


def test_times_on_no_grid_warn_that_the_inferred_step_is_arbitrary_and_suggest_a_round_one():
    rng = np.random.default_rng(0)
    gaps = rng.exponential(3600, 300)  # continuous-time sampling, about hourly
    t = pd.Timestamp("2021-01-01") + pd.to_timedelta(np.cumsum(gaps), unit="s")
    df = pd.DataFrame({"y": np.arange(300.0)}, index=t)
    with pytest.warns(UserWarning, match=r"lie on no regular grid.*inferred as the median spacing, 0 days 00:4\d:.*"
                                         r"e.g. freq='4\dmin'"):
        step = infer_freq(read_panel(df, detect_spec(df)))
    assert step == int(round(np.median(np.diff(t.asi8))))
    numeric = pd.DataFrame({"t": np.cumsum(rng.exponential(0.37, 300)), "y": 0.0})
    with pytest.warns(UserWarning, match=r"no regular grid.*e.g. freq=0.\d"):
        infer_freq(read_panel(numeric, detect_spec(numeric, time_col="t")))
    for kept in (0.7, 0.35):  # rows dropped from a grid, lightly or so heavily that the median is 2 steps
        hours = pd.date_range("2021-01-01", periods=300, freq="h")
        hourly = pd.DataFrame({"y": 0.0}, index=hours[rng.random(300) < kept])
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            infer_freq(read_panel(hourly, detect_spec(hourly)))
        assert not any("no regular grid" in str(w.message) for w in record)
    mixed = pd.concat([pd.DataFrame({"unique_id": f"{every}h-{i}", "y": 0.0,
                                     "ds": pd.date_range("2021", periods=100, freq=f"{every}h")})
                       for every in (1, 2) for i in range(2)])  # a median of 1.5 h between two grids
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        infer_freq(read_panel(mixed, detect_spec(mixed)))
    assert not any("no regular grid" in str(w.message) for w in record)


def test_scaler_ignores_missing_values_and_keeps_constant_series_finite():
    values = np.array([[1.0, 5.0], [3.0, np.nan], [np.nan, 5.0], [10.0, 2.0], [30.0, 4.0]])
    scaler = Scaler.fit(values, np.array([0, 3, 5]))
    np.testing.assert_allclose(scaler.mean, [[2.0, 5.0], [20.0, 3.0]])
    np.testing.assert_allclose(scaler.std, [[1.0, 1.0], [10.0, 1.0]])  # constant 5, 5 -> unit scale
    scaled = scaler.transform(values, np.array([0, 3, 5]))
    np.testing.assert_allclose(scaler.inverse(scaled[None, 3:5], np.array([1]))[0], values[3:5], rtol=1e-6)


def test_scaler_calls_a_series_constant_only_when_its_values_are_equal_up_to_rounding():
    """A spread relative to the level counts, however small the units; only float rounding does not."""
    bounds = np.array([0, 4, 8, 12])
    values = np.concatenate([[0.1 + 0.2, 0.3, 0.3, 0.1 + 0.2],  # equal but for rounding
                             1e-12 * np.array([1.0, 2.0, 3.0, 4.0]),  # tiny units, a real spread
                             1e6 + np.array([0.0, 0.001, 0.002, 0.003])])[:, None]  # a small spread at a high level
    scaler = Scaler.fit(values, bounds)
    np.testing.assert_allclose(scaler.std[:, 0], [1.0, 1e-12 * np.sqrt(1.25), 0.001 * np.sqrt(1.25)], rtol=1e-6)
    scaled = scaler.transform(values, bounds)[4:, 0]
    np.testing.assert_allclose(scaled, np.tile([-1.5, -0.5, 0.5, 1.5], 2) / np.sqrt(1.25), rtol=1e-5)
