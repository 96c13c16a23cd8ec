"""Forecaster on DataFrames: formats, times, irregular data, predict, save/load, backtest, plot."""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from forecaster_data import TINY, H, long_frame, wide_frame
from lightning.pytorch.callbacks import Callback
from matplotlib.figure import Figure

import ts_continuum
from ts_continuum import Forecaster

TARGETS = ["y", "z"]


@pytest.fixture(scope="module")
def data():
    return long_frame(drop=0.2)


@pytest.fixture(scope="module")
def fitted(data):
    return Forecaster(**TINY).fit(data, target_cols=TARGETS)


def expected_future(last, step):
    return [last + k * step for k in range(1, H + 1)]


def test_long_format_answers_every_series_in_its_columns_and_times(fitted, data):
    pred = fitted.predict()
    assert list(pred.columns) == ["unique_id", "ds", "y", "z"]
    assert pred["ds"].dtype == data["ds"].dtype
    assert list(pred["unique_id"].unique()) == ["a", "b", "c"] and len(pred) == 3 * H
    for sid, rows in pred.groupby("unique_id"):
        last = data.loc[data["unique_id"] == sid, "ds"].max()
        assert list(rows["ds"]) == expected_future(last, pd.Timedelta("1h"))
    assert np.isfinite(pred[TARGETS].to_numpy()).all()
    assert fitted.freq_ == pd.Timedelta("1h").value  # inferred despite the dropped rows


def test_predict_without_frame_equals_predict_on_the_training_frame(fitted, data):
    pd.testing.assert_frame_equal(fitted.predict(), fitted.predict(data))


def test_predict_conditions_on_the_history_it_is_given(fitted, data):
    changed = data.copy()
    last_a = changed.index[changed["unique_id"] == "a"][-5:]
    changed.loc[last_a, "y"] += 3.0
    before, after = fitted.predict(data), fitted.predict(changed)
    a_before, a_after = (p.loc[p["unique_id"] == "a", "y"].to_numpy() for p in (before, after))
    assert not np.allclose(a_before, a_after)
    others = before["unique_id"] != "a"
    np.testing.assert_array_equal(before.loc[others, TARGETS].to_numpy(), after.loc[others, TARGETS].to_numpy())


def test_new_series_in_predict_are_scaled_by_their_own_history(fitted, data):
    new = long_frame(seed=3).query("unique_id == 'b'").assign(unique_id="new", y=lambda d: 1000 + 50 * d["y"])
    pred = fitted.predict(pd.concat([data[data["unique_id"] == "a"], new]))
    assert list(pred["unique_id"].unique()) == ["a", "new"]
    scaler = fitted.state_.scaler_for(fitted.state_.read(new, "new"))
    np.testing.assert_allclose(scaler.mean[0, 0], new["y"].mean())
    np.testing.assert_allclose(scaler.std[0, 0], new["y"].std(ddof=0))
    known = fitted.state_.scaler_for(fitted.state_.read(data[data["unique_id"] == "c"], "c"))
    np.testing.assert_array_equal(known.mean[0], fitted.scaler_.mean[2])
    level, spread = new["y"].mean(), new["y"].std()
    assert pred.loc[pred["unique_id"] == "new", "y"].between(level - 3 * spread, level + 3 * spread).all()


def test_scalers_are_fitted_on_training_observations_only(data):
    f = Forecaster(**TINY).fit(data, target_cols=TARGETS, val_size=H + 2)
    a = data[data["unique_id"] == "a"]
    cut = a["ds"].iloc[0] + pd.Timedelta(hours=(a["ds"].iloc[-1] - a["ds"].iloc[0]) / pd.Timedelta("1h") - (H + 2))
    train = a[a["ds"] <= cut]
    np.testing.assert_allclose(f.scaler_.mean[0], train[TARGETS].mean().to_numpy())
    assert "val_mse" in f.fit_metrics_ and np.isfinite(f.fit_metrics_["val_mse"])


def test_forecasts_scale_with_the_data_whatever_its_units():
    """Standardisation is unit-free: values around 1e-9 counted as constant (a unit scale, so the
    forecasts were the model's bias, 1e5 times the data), around 1e155 the variance overflowed
    (infinite forecasts), and around 1e-170 it underflowed."""
    df = pd.DataFrame({"unique_id": "a", "ds": pd.date_range("2024-01-01", periods=80, freq="h"),
                       "y": np.sin(np.arange(80) / 4)})
    base = Forecaster(**TINY).fit(df).predict()["y"].to_numpy()
    for c in (1e-170, 1e-9, 1e9, 1e155):
        pred = Forecaster(**TINY).fit(df.assign(y=c * df["y"])).predict()["y"].to_numpy()
        np.testing.assert_allclose(pred / c, base, rtol=1e-4, atol=1e-5 * np.abs(base).max(), err_msg=f"c={c:g}")


def test_custom_column_names_and_extra_columns_are_mirrored():
    df = long_frame().rename(columns={"unique_id": "store", "ds": "when", "y": "sales"}).assign(note="x")
    f = Forecaster(**TINY).fit(df, id_col="store", time_col="when", target_cols="sales")
    pred = f.predict()
    assert list(pred.columns) == ["store", "when", "sales"]


def test_wide_format_with_datetime_index():
    df = wide_frame()
    f = Forecaster(**TINY).fit(df)
    pred = f.predict()
    assert isinstance(pred.index, pd.DatetimeIndex) and pred.index.name == "date"
    assert list(pred.columns) == ["a", "b"]
    assert list(pred.index) == expected_future(df.index[-1], pd.Timedelta("15min"))
    assert f.predict(df.iloc[:70]).index[0] == df.index[69] + pd.Timedelta("15min")


def test_wide_format_with_time_column():
    df = wide_frame().reset_index()
    pred = Forecaster(**TINY).fit(df, time_col="date").predict()
    assert list(pred.columns) == ["date", "a", "b"] and isinstance(pred.index, pd.RangeIndex)
    assert list(pred["date"]) == expected_future(df["date"].iloc[-1], pd.Timedelta("15min"))


@pytest.mark.parametrize("dtype, spacing", [("int64", 2), ("float64", 0.5)])
def test_numeric_times(dtype, spacing):
    df = wide_frame().reset_index(drop=True)
    df.insert(0, "t", (np.arange(len(df)) * spacing + 100).astype(dtype))
    f = Forecaster(**TINY).fit(df, time_col="t")
    pred = f.predict()
    assert pred["t"].dtype == np.dtype(dtype)
    assert list(pred["t"]) == expected_future(df["t"].iloc[-1], spacing)


def test_tz_aware_times_keep_their_zone():
    df = long_frame(tz="Europe/Berlin")  # crosses no DST change; steps are absolute durations anyway
    pred = Forecaster(**TINY).fit(df, target_cols=TARGETS).predict()
    assert str(pred["ds"].dt.tz) == "Europe/Berlin"
    last = df.loc[df["unique_id"] == "b", "ds"].max()
    assert list(pred.loc[pred["unique_id"] == "b", "ds"]) == expected_future(last, pd.Timedelta("1h"))


def test_explicit_freq_sets_the_horizon_grid():
    df = long_frame(drop=0.5)
    f = Forecaster(**TINY, freq="30min").fit(df, target_cols=TARGETS)
    assert f.freq_ == pd.Timedelta("30min").value
    pred = f.predict()
    b = pred[pred["unique_id"] == "b"]["ds"]
    assert (b.diff().dropna() == pd.Timedelta("30min")).all()


def test_nan_gaps_are_missing_observations_and_trailing_nan_rows_are_ignored():
    df = long_frame()
    df.loc[df.index[10:20], "y"] = np.nan  # a gap in one variable
    tail = df[df["unique_id"] == "a"].index[-3:]
    df.loc[tail, ["y", "z"]] = np.nan  # rows with nothing observed: not part of the history
    pred = Forecaster(**TINY).fit(df, target_cols=TARGETS).predict()
    last_observed = df.loc[df.index[df["unique_id"] == "a"][-4], "ds"]
    assert pred.loc[pred["unique_id"] == "a", "ds"].iloc[0] == last_observed + pd.Timedelta("1h")
    assert np.isfinite(pred[TARGETS].to_numpy()).all()


def test_irregular_input_with_continuous_attention_raises_no_warning(data):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*cannot see.*")
        Forecaster(**TINY).fit(data, target_cols=TARGETS)


@pytest.mark.parametrize("pos", ["learned", "none"])
def test_softmax_with_index_positions_warns_on_irregular_data(data, pos):
    with pytest.warns(UserWarning, match="cannot see the time between"):
        f = Forecaster(**TINY, attention="softmax", pos_encoding=pos, interpolate_inputs=False).fit(
            data, target_cols=TARGETS)
    with pytest.warns(UserWarning, match="cannot see"):
        f.predict(data)
    with warnings.catch_warnings():  # regular complete data: nothing to see
        warnings.filterwarnings("error", message=".*cannot see.*")
        f.predict(long_frame())


def test_softmax_with_rope_sees_timestamps_and_does_not_warn(data):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*cannot see.*")
        Forecaster(**TINY, attention="softmax", pos_encoding="rope").fit(data, target_cols=TARGETS)


def test_interpolate_inputs_feeds_complete_regular_windows_and_survives_save_load(data, tmp_path, monkeypatch):
    """With interpolate_inputs the model sees every nominal step of every window (so softmax with index
    positions is not blind and no warning is due), in fit, predict and backtest alike."""
    f = Forecaster(**TINY, attention="softmax", pos_encoding="learned", interpolate_inputs=True)
    seen = []
    original = f.model_cls.forward

    def spy(model, x, x_mask=None, x_time=None, *args, **kwargs):
        seen.append((x_mask, x_time))
        return original(model, x, x_mask, x_time, *args, **kwargs)

    monkeypatch.setattr(f.model_cls, "forward", spy)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*cannot see.*")
        f.fit(data, target_cols=TARGETS, val_size=H)
        pred = f.predict(data)
        f.backtest(data, n_windows=2)
    assert len(seen) > 3
    grid = np.arange(-TINY["lookback"] + 1, 1, dtype=np.float32)
    for x_mask, x_time in seen:
        assert x_mask.all() and (x_time.numpy() == grid).all()
    monkeypatch.undo()
    loaded = Forecaster.load(f.save(tmp_path / "model"))
    assert loaded.interpolate_inputs and "interpolate_inputs=True" in repr(loaded)
    pd.testing.assert_frame_equal(loaded.predict(data), pred)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*cannot see.*")  # the same model on the observations is blind
        plain = Forecaster(**TINY, attention="softmax", pos_encoding="learned", interpolate_inputs=False).fit(
            data, target_cols=TARGETS, val_size=H)
        assert not np.allclose(plain.predict(data)[TARGETS].to_numpy(), pred[TARGETS].to_numpy())
    assert "interpolate_inputs=False" in repr(plain)


def test_defaults_follow_the_study_and_older_saves_keep_their_inputs(tmp_path):
    """softmax attention and interpolated inputs for grid models (docs/forecaster.md#defaults); a save
    from before the default changed (no interpolate_inputs in its config) still reads observations."""
    grid, query = Forecaster(horizon=6, lookback=24), Forecaster(model="async", horizon=6)
    assert grid.attention == query.attention == "softmax"
    assert grid.interpolate_inputs and not query.interpolate_inputs
    with pytest.raises(ValueError, match="leave them out"):
        Forecaster(model="async", horizon=6, interpolate_inputs=True)
    old = Forecaster.load(Path(__file__).parent / "data" / "forecaster-format-1")
    assert not old.interpolate_inputs and old.attention == "continuous"


def test_interpolate_inputs_must_be_a_bool():
    with pytest.raises(ValueError, match="interpolate_inputs must be True, False or None .*, got 'linear'"):
        Forecaster(**TINY, interpolate_inputs="linear")


def test_encoder_model_and_option_routing(data):
    tiny = {k: v for k, v in TINY.items() if k not in ("patch_len", "stride")}
    f = Forecaster("encoder", **{**tiny, "d_model": 12}, lr=3e-3, lr_schedule="constant", dropout=0.0)
    assert f.options.model["d_model"] == 12 and f.options.module["lr"] == 3e-3
    assert f.options.trainer["max_epochs"] == 1
    f.fit(data, target_cols=TARGETS)
    assert type(f.model_).__name__ == "EncoderTransformer" and f.model_.config["d_model"] == 12
    assert np.isfinite(f.predict()[TARGETS].to_numpy()).all()


def test_same_seed_same_model_and_no_files_in_the_working_directory(data, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = Forecaster(**TINY, seed=1).fit(data, target_cols=TARGETS, val_size=H)
    b = Forecaster(**TINY, seed=1).fit(data, target_cols=TARGETS, val_size=H)
    pd.testing.assert_frame_equal(a.predict(), b.predict())
    assert list(tmp_path.iterdir()) == []


def test_save_load_round_trip_predicts_identically(fitted, data, tmp_path):
    path = fitted.save(tmp_path / "model")
    config = json.loads((path / "forecaster.json").read_text())
    assert config["format_version"] == 1 and config["library_version"] == ts_continuum.__version__
    loaded = Forecaster.load(path)
    pd.testing.assert_frame_equal(loaded.predict(), fitted.predict())
    pd.testing.assert_frame_equal(loaded.predict(data.iloc[::2]), fitted.predict(data.iloc[::2]))
    assert loaded.spec_ == fitted.spec_ and loaded.freq_ == fitted.freq_


def test_a_save_holding_tuple_names_loads_them_as_tuples(fitted, tmp_path):
    """Saves made before fit refused tuple names hold them as JSON lists, which predict failed on."""
    path = fitted.save(tmp_path / "model")
    config = json.loads((path / "forecaster.json").read_text())
    config["spec"]["target_cols"] = [["y", "a"], ["z", "b"]]
    (path / "forecaster.json").write_text(json.dumps(config))
    pred = Forecaster.load(path).predict()
    assert list(pred.columns) == ["unique_id", "ds", ("y", "a"), ("z", "b")]
    np.testing.assert_array_equal(pred[[("y", "a"), ("z", "b")]].to_numpy(), fitted.predict()[TARGETS].to_numpy())


def test_save_refuses_a_non_empty_directory_unless_overwrite(fitted, tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty; pass overwrite=True"):
        fitted.save(target)
    with pytest.raises(ValueError, match="holds no saved forecaster"):  # overwrite replaces saves only
        fitted.save(target, overwrite=True)
    assert [p.name for p in target.iterdir()] == ["keep.txt"] and (target / "keep.txt").read_text() == "mine"


def test_overwrite_replaces_a_saved_forecaster_but_not_files_beside_it(fitted, tmp_path):
    other = Forecaster(**TINY, seed=5).fit(long_frame(drop=0.2), target_cols=TARGETS)
    target = other.save(tmp_path / "model")
    fitted.save(target, overwrite=True)
    pd.testing.assert_frame_equal(Forecaster.load(target).predict(), fitted.predict())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no staging or replaced directory left
    (target / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"save\(\) did not write \(notes.txt\)"):
        other.save(target, overwrite=True)
    assert (target / "notes.txt").read_text() == "mine"
    pd.testing.assert_frame_equal(Forecaster.load(target).predict(), fitted.predict())


def test_a_failed_save_leaves_nothing_behind_and_keeps_the_old_save(fitted, tmp_path, monkeypatch):
    import torch

    old = fitted.save(tmp_path / "old")
    before = {p.name: p.read_bytes() for p in old.iterdir()}

    def disk_full(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", disk_full)  # fails after forecaster.json is written
    with pytest.raises(OSError, match="disk full"):
        fitted.save(tmp_path / "new")
    with pytest.raises(OSError, match="disk full"):
        fitted.save(old, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["old"]
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before


def test_freq_given_as_any_fixed_duration_is_saved_as_one_parse_freq_reads_back():
    """pandas 3 no longer counts Day as a fixed Tick; a saved freq must still be kept, not dropped."""
    from ts_continuum.forecasting.saved_directory import json_safe
    from ts_continuum.forecasting.steps import parse_freq

    for freq in (pd.offsets.Day(2), pd.offsets.Hour(3), pd.Timedelta(minutes=15), "h"):
        kept, dropped = json_safe({"freq": freq})
        assert dropped == [] and parse_freq(kept["freq"], "datetime") == parse_freq(freq, "datetime")


def test_numpy_scalar_arguments_are_saved_as_plain_numbers(tmp_path):
    f = Forecaster(**{**TINY, "d_model": np.int64(8), "batch_size": np.int64(16)}, dropout=np.float64(0.0))
    f.fit(wide_frame())
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # nothing is left out
        path = f.save(tmp_path / "np")
    config = json.loads((path / "forecaster.json").read_text())
    assert config["forecaster"]["d_model"] == 8 and config["model_config"]["d_model"] == 8
    assert config["forecaster"]["dropout"] == 0.0 and config["forecaster"]["batch_size"] == 16
    pd.testing.assert_frame_equal(Forecaster.load(path).predict(), f.predict())


def test_save_load_keeps_wide_format_time_zone_and_a_timedelta_freq(tmp_path):
    df = wide_frame()
    df.index = df.index.tz_localize("UTC")
    f = Forecaster(**TINY, freq=pd.Timedelta("15min")).fit(df)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every argument is saved
        loaded = Forecaster.load(f.save(tmp_path / "w"))
    assert loaded.freq == "900000000000ns" and loaded.freq_ == f.freq_
    pd.testing.assert_frame_equal(loaded.predict(), f.predict())
    assert str(loaded.predict().index.tz) == "UTC"


def test_backtest_windows_forecasts_and_metrics(fitted, data):
    with pytest.warns(UserWarning, match="in-sample"):  # fitted on data: the mechanics are checked here, honesty below
        result = fitted.backtest(data, n_windows=3, step=2)
    fc = result.forecasts
    assert list(fc.columns) == ["unique_id", "cutoff", "ds", "y", "y_forecast", "z", "z_forecast"]
    assert len(fc) == 3 * 3 * H
    for sid, rows in fc.groupby("unique_id"):
        series = data[data["unique_id"] == sid]
        cutoffs = rows["cutoff"].unique()
        assert len(cutoffs) == 3 and (cutoffs <= series["ds"].max() - H * pd.Timedelta("1h")).all()
        assert set(cutoffs) <= set(series["ds"])  # origins are observations
        for cutoff in cutoffs:  # forecast from history up to the cutoff only
            window = rows[rows["cutoff"] == cutoff]
            alone = fitted.predict(series[series["ds"] <= cutoff])
            np.testing.assert_allclose(window["y_forecast"], alone["y"], rtol=1e-5, atol=1e-6)
            actual = series.set_index("ds")["y"].reindex(window["ds"]).to_numpy()
            np.testing.assert_array_equal(window["y"].to_numpy(), actual)  # NaN where no row was observed
    metrics = result.metrics
    assert len(metrics) == 3 * 3 * 2 and set(metrics.columns) >= {"unique_id", "cutoff", "target", "mse", "mae", "n"}
    first = metrics.iloc[0]
    rows = fc[(fc["unique_id"] == first["unique_id"]) & (fc["cutoff"] == first["cutoff"])].dropna(subset=["y"])
    np.testing.assert_allclose(first["mse"], ((rows["y"] - rows["y_forecast"]) ** 2).mean())
    np.testing.assert_allclose(first["mae"], (rows["y"] - rows["y_forecast"]).abs().mean())
    series = data[data["unique_id"] == first["unique_id"]]
    held = series.loc[series["ds"] <= first["cutoff"], "y"].dropna().iloc[-1]  # persistence: the last observation
    np.testing.assert_allclose(first["naive_mse"], ((rows["y"] - held) ** 2).mean())
    np.testing.assert_allclose(first["naive_mae"], (rows["y"] - held).abs().mean())
    seen = fc.dropna(subset=["z"])
    np.testing.assert_allclose(result.overall.loc["z", "mse"], ((seen["z"] - seen["z_forecast"]) ** 2).mean())
    weights = metrics[metrics["target"] == "z"]  # overall pools the points: windows weighted by their counts
    np.testing.assert_allclose(result.overall.loc["z", "naive_mse"],
                               (weights["naive_mse"] * weights["n"]).sum() / weights["n"].sum())
    assert result.overall.loc["z", "n"] == len(seen)


def test_the_persistence_forecast_holds_each_targets_last_observation_of_its_own_series():
    df = long_frame()
    a = df["unique_id"] == "a"  # 80 hourly rows: the 4 cutoffs below are its hours 70-73
    hours = (df["ds"] - df.loc[a, "ds"].min()) / pd.Timedelta("1h")
    df.loc[a & hours.isin([71, 72]), "y"] = np.nan  # y missing at two origins (z observed): held from hour 70
    f = Forecaster(**TINY, limit_train_batches=2).fit(df, target_cols=TARGETS)
    with pytest.warns(UserWarning, match="in-sample"):
        result = f.backtest(df, n_windows=4, step=1)
    metrics = result.metrics
    assert metrics[["naive_mse", "naive_mae"]].notna().all().all()
    for _, row in metrics.iterrows():
        series = df[df["unique_id"] == row["unique_id"]]
        held = series.loc[series["ds"] <= row["cutoff"], row["target"]].dropna().iloc[-1]
        window = result.forecasts[(result.forecasts["unique_id"] == row["unique_id"])
                                  & (result.forecasts["cutoff"] == row["cutoff"])]
        actual = window[row["target"]].dropna()
        np.testing.assert_allclose(row["naive_mse"], ((actual - held) ** 2).mean(), rtol=1e-6)
        np.testing.assert_allclose(row["naive_mae"], (actual - held).abs().mean(), rtol=1e-6)


def test_backtest_scales_a_new_series_by_its_history_up_to_each_origin():
    df = long_frame()
    f = Forecaster(**TINY, revin=False).fit(df, target_cols=TARGETS)  # no RevIN to absorb a shifted scale
    new = df[df["unique_id"] == "a"].assign(unique_id="new")
    moved = new.copy()
    moved.loc[moved.index[-H:], TARGETS] += 100.0  # only the values scored in the last window differ
    result = f.backtest(new, n_windows=2)
    pd.testing.assert_frame_equal(result.forecasts.drop(columns=TARGETS),
                                  f.backtest(moved, n_windows=2).forecasts.drop(columns=TARGETS))
    for cutoff, window in result.forecasts.groupby("cutoff"):  # each window is predict() on its history
        alone = f.predict(new[new["ds"] <= cutoff])
        np.testing.assert_allclose(window["y_forecast"], alone["y"], rtol=1e-5, atol=1e-6)


def test_backtest_warns_when_it_scores_what_fit_trained_on(data, tmp_path):
    n_windows, step = 3, 2
    held_out = (H + (n_windows - 1) * step) * pd.Timedelta("1h")  # the fix the warning gives
    train = data[data["ds"] <= data.groupby("unique_id")["ds"].transform("max") - held_out]
    honest = Forecaster(**TINY).fit(train, target_cols=TARGETS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        result = honest.backtest(data, n_windows=n_windows, step=step)
        Forecaster.load(honest.save(tmp_path / "honest")).backtest(data, n_windows=n_windows, step=step)
    assert (result.forecasts.groupby("unique_id")["cutoff"].min() >= train.groupby("unique_id")["ds"].max()).all()
    overlap = r"backtest: 3 of 12 windows \(series 'a', 'b', 'c'\) score targets the model was trained on.*in-sample"
    with pytest.warns(UserWarning, match=overlap + r".*scalers.*without the last horizon \+ \(n_windows - 1\) \* "
                                         r"step = 12 nominal steps") as caught:
        honest.backtest(data, n_windows=n_windows + 1, step=step)  # the first window's targets are in train
    assert caught[0].filename == __file__  # said where the user called it
    with pytest.warns(UserWarning, match=overlap):
        Forecaster.load(honest.save(tmp_path / "saved")).backtest(data, n_windows=n_windows + 1, step=step)


def test_backtest_on_wide_data():
    df = wide_frame()
    f = Forecaster(**TINY).fit(df)
    with pytest.warns(UserWarning, match="in-sample"):
        result = f.backtest(df, n_windows=2)
    assert list(result.forecasts.columns) == ["cutoff", "date", "a", "a_forecast", "b", "b_forecast"]
    assert len(result.forecasts) == 2 * H and result.forecasts["a"].notna().all()
    assert list(result.forecasts["cutoff"].unique()) == [df.index[-1 - 2 * H], df.index[-1 - H]]


def test_plot_returns_a_figure_with_a_panel_per_target(fitted, data, tmp_path):
    fig = fitted.plot(data, fitted.predict(), id="b")
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [ax.get_ylabel() for ax in fig.axes] == TARGETS
    fig.savefig(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="choose one with id="):
        fitted.plot(data, fitted.predict())
    with pytest.raises(ValueError, match="'bb' is not in the history"):
        fitted.plot(data, fitted.predict(), id="bb")


def test_plot_refuses_backtest_output_and_ids_of_a_wide_frame(fitted, data):
    train = data[data["ds"] <= data.groupby("unique_id")["ds"].transform("max") - pd.Timedelta(hours=2 * H)]
    honest = Forecaster(**TINY, limit_train_batches=2).fit(train, target_cols=TARGETS)
    result = honest.backtest(data, n_windows=2, step=H // 2)  # step < horizon: a time in two windows
    for given in (result, result.forecasts):
        with pytest.raises(ValueError, match=r"plot draws predict\(\)'s output, but this is a backtest's.*"
                                             r"f.predict\(df\[df\[time\] <= cutoff\]\)"):
            honest.plot(data, given, id="a")
    wide = Forecaster(**TINY, limit_train_batches=2).fit(wide_frame())
    with pytest.raises(ValueError, match="fitted on a wide frame .*call plot without id"):
        wide.plot(wide_frame(), wide.predict(), id="a")


def test_plot_backtest_draws_each_windows_forecast_over_the_actuals(data):
    train = data[data["ds"] <= data.groupby("unique_id")["ds"].transform("max") - pd.Timedelta(hours=2 * H)]
    f = Forecaster(**TINY, limit_train_batches=2).fit(train, target_cols=TARGETS)
    result = f.backtest(data, n_windows=3, step=H // 2)  # step < horizon: a time in two windows
    rows = result.forecasts[result.forecasts["unique_id"] == "b"]
    fig = f.plot_backtest(result, id="b")
    assert [ax.get_ylabel() for ax in fig.axes] == TARGETS
    for ax, name in zip(fig.axes, TARGETS):
        lines = ax.get_lines()
        actual = rows.groupby("ds")[name].first().dropna()
        assert lines[0].get_label() == "actual"
        np.testing.assert_array_equal(lines[0].get_ydata(), actual.to_numpy())
        drawn = [line for line in lines[1:] if len(line.get_xdata()) == H]  # forecasts; cutoffs are 2-point lines
        assert len(drawn) == rows["cutoff"].nunique() == 3
        for line, (_, window) in zip(drawn, rows.groupby("cutoff", sort=True)):
            np.testing.assert_allclose(line.get_ydata(), window[f"{name}_forecast"])
        matched = rows.dropna(subset=[name])
        mse = ((matched[name] - matched[f"{name}_forecast"]) ** 2).mean()
        assert f"MSE {mse:.4g}" in ax.get_title(loc="left")
    assert isinstance(f.plot_backtest(result.forecasts, id="b"), Figure)
    with pytest.raises(ValueError, match="the backtest holds 3 series; choose one with id="):
        f.plot_backtest(result)
    with pytest.raises(ValueError, match="series 'bb' is not in the backtest .*did you mean 'b'"):
        f.plot_backtest(result, id="bb")
    with pytest.raises(ValueError, match=r"no column 'unique_id'$"):  # not predict()'s output: no hint to plot()
        f.plot_backtest(result.forecasts.drop(columns="unique_id"), id="b")
    with pytest.raises(ValueError, match=r"plot_backtest draws backtest\(\)'s output.*no column 'cutoff'"):
        f.plot_backtest(f.predict(), id="b")


def test_public_names():
    assert ts_continuum.Forecaster is Forecaster
    assert issubclass(ts_continuum.forecasting.NotFittedError, ValueError)
    assert issubclass(ts_continuum.forecasting.TrainingDivergedError, RuntimeError)


def test_integer_ids_keep_their_dtype_through_save_and_load(tmp_path):
    df = long_frame().assign(unique_id=lambda d: d["unique_id"].map({"a": 7, "b": 8, "c": 9}))
    f = Forecaster(**TINY).fit(df)
    pred = f.predict()
    assert pred["unique_id"].dtype == np.int64 and list(pred["unique_id"].unique()) == [7, 8, 9]
    pd.testing.assert_frame_equal(Forecaster.load(f.save(tmp_path / "ints")).predict(), pred)
    with pytest.warns(UserWarning, match="in-sample"):
        assert f.backtest(df).forecasts["unique_id"].dtype == np.int64
    with pytest.raises(ValueError, match=r"series '8' is not in the history \(did you mean 8, an int\?\)"):
        f.plot(df, pred, id="8")


def test_backtest_keeps_the_time_zone():
    df = long_frame(tz="America/New_York")
    with pytest.warns(UserWarning, match="in-sample"):
        result = Forecaster(**TINY).fit(df).backtest(df, n_windows=2)
    for column in ("cutoff", "ds"):
        assert str(result.forecasts[column].dt.tz) == "America/New_York"
    assert str(result.metrics["cutoff"].dt.tz) == "America/New_York"


def test_best_validation_weights_are_restored_at_the_end():
    from types import SimpleNamespace

    import torch

    from ts_continuum.forecasting.fit_loop import BestWeights

    net = torch.nn.Linear(2, 1)
    keep = BestWeights()
    trainer = SimpleNamespace(sanity_checking=False, callback_metrics={}, current_epoch=0)
    for epoch, (val, fill) in enumerate(((2.0, 1.0), (1.0, 5.0), (3.0, 9.0))):  # the epoch with val 1.0 is the best
        torch.nn.init.constant_(net.weight, fill)
        trainer.current_epoch, trainer.callback_metrics = epoch, {"val_mse": torch.tensor(val)}
        keep.on_validation_end(trainer, net)
    keep.on_fit_end(trainer, net)
    assert torch.equal(net.weight, torch.full((1, 2), 5.0)) and keep.best == 1.0 and keep.epoch == 1


def test_fit_metrics_describe_the_kept_best_epoch_not_the_last():
    import torch
    from lightning.pytorch.callbacks import Callback

    class Record(Callback):
        def __init__(self):
            self.val, self.weights, self.train, self.lr = [], [], [], []

        def on_validation_end(self, trainer, pl_module):
            if not trainer.sanity_checking:
                self.val.append(float(trainer.callback_metrics["val_mse"]))
                self.weights.append({k.removeprefix("model."): v.clone() for k, v in pl_module.state_dict().items()})

        def on_train_epoch_end(self, trainer, pl_module):
            self.train.append(float(trainer.callback_metrics["train_loss_epoch"]))
            self.lr.append(trainer.optimizers[0].param_groups[0]["lr"])

    record = Record()
    f = Forecaster(**{**TINY, "max_epochs": 4}, lr=0.05, limit_train_batches=2, early_stopping_patience=5,
                   callbacks=[record]).fit(long_frame(), target_cols="y", val_size=12)
    best = int(np.argmin(record.val))
    assert best != len(record.val) - 1  # this run's last epoch is worse: the case being tested
    m = f.fit_metrics_
    np.testing.assert_allclose(m["val_mse"], record.val[best], rtol=1e-6)
    np.testing.assert_allclose(m["last_val_mse"], record.val[-1], rtol=1e-6)
    assert m["best_epoch"] == best and m["epochs"] == len(record.val) == 4
    assert {"train_loss", "val_mae", "last_train_loss", "last_val_mae"} <= set(m)
    for name, value in f.model_.state_dict().items():  # ... and the model holds that epoch's weights
        assert torch.equal(value, record.weights[best][name])
    check_learning_curve(f, record, best)


def check_learning_curve(f, record, best):
    """``learning_curve_`` holds every epoch as the Trainer saw it, its plot marks the kept epoch, and
    both survive save/load; a save from before learning curves loads without one."""
    curve = f.learning_curve_
    assert list(curve.columns) == ["epoch", "train_loss", "val_mse", "val_mae", "lr", "seconds"]
    assert curve["epoch"].tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(curve["val_mse"], record.val, rtol=1e-6)
    np.testing.assert_allclose(curve["train_loss"], record.train, rtol=1e-6)
    np.testing.assert_allclose(curve["lr"], record.lr)
    assert curve.loc[best, "train_loss"] == pytest.approx(f.fit_metrics_["train_loss"])
    assert (curve["seconds"] > 0).all()
    fig = f.plot_learning_curve()
    loss_ax, lr_ax = fig.axes
    val_line = next(line for line in loss_ax.get_lines() if line.get_label() == "validation MSE")
    np.testing.assert_allclose(val_line.get_ydata(), record.val, rtol=1e-6)
    kept = [line for line in loss_ax.get_lines() if line.get_label().startswith("lowest validation MSE: epoch")]
    assert len(kept) == 1 and list(kept[0].get_xdata()) == [best + 1, best + 1]
    np.testing.assert_allclose(lr_ax.get_lines()[0].get_ydata(), record.lr)
    with tempfile.TemporaryDirectory() as tmp:
        f.save(f"{tmp}/m")
        pd.testing.assert_frame_equal(Forecaster.load(f"{tmp}/m").learning_curve_, curve)
        config = json.loads((Path(tmp) / "m" / "forecaster.json").read_text())
        del config["learning_curve"]  # as an earlier version saved it
        (Path(tmp) / "m" / "forecaster.json").write_text(json.dumps(config))
        old = Forecaster.load(f"{tmp}/m")
    assert old.learning_curve_.empty
    with pytest.raises(ValueError, match="no learning curve: it was saved by a ts-continuum version"):
        old.plot_learning_curve()


def test_epochs_without_validation_hold_nan_in_the_learning_curve_and_its_save(tmp_path):
    f = Forecaster(**{**TINY, "max_epochs": 2}, limit_train_batches=2, check_val_every_n_epoch=2).fit(
        long_frame(), target_cols="y", val_size=12)
    curve = f.learning_curve_
    assert curve["val_mse"].isna().tolist() == [True, False] and curve["train_loss"].notna().all()
    f.save(tmp_path / "m")
    assert json.loads((tmp_path / "m" / "forecaster.json").read_text())["learning_curve"][0]["val_mse"] is None
    pd.testing.assert_frame_equal(Forecaster.load(tmp_path / "m").learning_curve_, curve)
    val_line = [line for line in f.plot_learning_curve().axes[0].get_lines() if line.get_label() == "validation MSE"]
    assert list(val_line[0].get_xdata()) == [2]


def test_the_learning_curve_without_validation_has_training_columns_only(fitted):
    curve = fitted.learning_curve_
    assert list(curve.columns) == ["epoch", "train_loss", "lr", "seconds"] and len(curve) == TINY["max_epochs"]
    assert curve.loc[0, "train_loss"] == pytest.approx(fitted.fit_metrics_["train_loss"])
    fig = fitted.plot_learning_curve()
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["training loss (mse, epoch mean)"]
    with pytest.raises(ts_continuum.forecasting.NotFittedError, match="before plot_learning_curve"):
        Forecaster(**TINY).plot_learning_curve()


def test_arguments_that_are_not_json_are_named_when_saving(tmp_path):
    from lightning.pytorch.callbacks import Callback

    f = Forecaster(**TINY, callbacks=Callback()).fit(wide_frame())
    with pytest.warns(UserWarning, match=r"not saved \(not JSON-serialisable or not finite\): callbacks"):
        loaded = Forecaster.load(f.save(tmp_path / "cb"))
    pd.testing.assert_frame_equal(loaded.predict(), f.predict())


def test_a_fit_that_diverges_stops_and_is_refused_not_kept():
    f = Forecaster(**{**TINY, "max_epochs": 3}, lr=1e12)
    with pytest.warns(UserWarning, match=r"training diverged: the mean training loss of epoch 0 is (nan|inf)"), \
            pytest.raises(ts_continuum.forecasting.TrainingDivergedError,
                          match=r"epoch 0\): the weights are not finite.*Lower the learning rate \(lr=1e\+12\)"):
        f.fit(long_frame(), target_cols="y")
    with pytest.raises(ts_continuum.forecasting.NotFittedError):
        f.predict()


def test_a_divergence_before_min_epochs_is_reported_once_with_its_first_epoch():
    with warnings.catch_warnings(record=True) as caught, \
            pytest.raises(ts_continuum.forecasting.TrainingDivergedError, match=r"in epoch 0\)"):
        warnings.simplefilter("always")
        Forecaster(**{**TINY, "max_epochs": 5}, min_epochs=3, lr=1e12).fit(long_frame(), target_cols="y")
    said = [str(w.message) for w in caught if "training diverged" in str(w.message)]
    assert len(said) == 1 and "epoch 0" in said[0] and "min_epochs=3 keeps it training" in said[0]


class BreakWeightsAtEpoch(Callback):
    """Sets every weight to NaN when epoch ``epoch`` starts: a divergence on cue."""

    def __init__(self, epoch: int):
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, pl_module):
        if trainer.current_epoch == self.epoch:
            with torch.no_grad():
                for p in pl_module.parameters():
                    p.fill_(float("nan"))


def test_a_divergence_after_a_validated_epoch_keeps_that_epoch_and_saves_strict_json(tmp_path):
    # epoch 2 does not validate, so early stopping cannot see it: the divergence check alone stops the fit
    with pytest.warns(UserWarning, match="training diverged: the mean training loss of epoch 2 is nan, so training"):
        f = Forecaster(**{**TINY, "max_epochs": 6}, limit_train_batches=2, early_stopping_patience=5,
                       check_val_every_n_epoch=2, callbacks=[BreakWeightsAtEpoch(2)]).fit(
            long_frame(), target_cols="y", val_size=12)
    m = f.fit_metrics_
    assert m["best_epoch"] == 1 and m["epochs"] == 3  # stopped after the broken epoch, not at max_epochs
    assert np.isfinite(m["val_mse"]) and np.isnan(m["last_train_loss"])
    assert np.isfinite(f.predict()["y"]).all()
    with pytest.warns(UserWarning, match="not saved .*callbacks"):
        f.save(tmp_path / "m")

    def refuse(constant):
        raise AssertionError(f"forecaster.json holds {constant}, which is not JSON")

    config = json.loads((tmp_path / "m" / "forecaster.json").read_text(), parse_constant=refuse)
    assert config["fit_metrics"]["last_train_loss"] is None and config["learning_curve"][2]["train_loss"] is None
    loaded = Forecaster.load(tmp_path / "m")
    assert np.isnan(loaded.fit_metrics_["last_train_loss"]) and loaded.fit_metrics_["best_epoch"] == 1
    pd.testing.assert_frame_equal(loaded.learning_curve_, f.learning_curve_)


def test_warnings_point_at_the_users_line_from_every_entry_point(data):
    shuffled = data.sample(frac=1.0, random_state=0)  # unsorted rows: a warning from deep in the frame reader
    blind = dict(attention="softmax", pos_encoding="learned", interpolate_inputs=False)  # the blind-positions warning
    f = Forecaster(**TINY, **blind)
    calls = {"fit": lambda: f.fit(shuffled, target_cols=TARGETS),
             "predict": lambda: f.predict(shuffled),
             "backtest": lambda: f.backtest(shuffled, n_windows=2),
             "cross_validation": lambda: Forecaster(**TINY, **blind).cross_validation(shuffled, target_cols=TARGETS)}
    for name, call in calls.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        ours = [w for w in caught if any(s in str(w.message) for s in ("sort the frame", "irregular", "in-sample"))]
        assert len(ours) >= 2, (name, [str(w.message)[:60] for w in caught])
        assert all(w.filename == __file__ for w in ours), (name, [(w.filename, str(w.message)[:40]) for w in ours])


def test_fit_leaves_out_lightnings_info_banner_but_restores_its_level():
    import logging

    class Record(logging.Handler):
        def __init__(self):
            super().__init__(logging.DEBUG)
            self.messages = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    lightning_logger, record = logging.getLogger("lightning.pytorch"), Record()
    lightning_logger.addHandler(record)
    try:
        level = lightning_logger.level
        Forecaster(**TINY).fit(long_frame(), target_cols=TARGETS)
        assert lightning_logger.level == level  # restored: the CLI and the user's own Trainers still say it
        L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False)
    finally:
        lightning_logger.removeHandler(record)
    banner = [m for m in record.messages if "GPU available" in m]
    assert len(banner) == 1  # the plain Trainer's, none from fit


def test_a_pandas_series_is_the_one_column_wide_frame_it_stands_for():
    frame = wide_frame()[["a"]]
    series = frame["a"]
    from_series = Forecaster(**TINY).fit(series)
    from_frame = Forecaster(**TINY).fit(frame)
    pd.testing.assert_frame_equal(from_series.predict(), from_frame.predict())
    pd.testing.assert_frame_equal(from_series.predict(series.iloc[:-5]), from_frame.predict(frame.iloc[:-5]))
    with pytest.warns(UserWarning, match="in-sample"):
        assert from_series.backtest(series).overall.index.tolist() == ["a"]
    unnamed = Forecaster(**TINY).fit(series.rename(None))
    assert list(unnamed.predict().columns) == ["y"]


def test_categorical_ids_answer_as_the_same_categorical(tmp_path):
    """Panels of many series often hold ids as a categorical (memory); forecasts came back as plain
    strings, so a merge or a groupby on the categories (unused ones included) behaved otherwise."""
    dtype = pd.CategoricalDtype(["c", "b", "a", "unused"], ordered=True)
    df = long_frame().astype({"unique_id": dtype})
    fitted = Forecaster(**TINY).fit(df, target_cols=TARGETS)
    assert fitted.predict()["unique_id"].dtype == dtype
    assert fitted.predict(df)["unique_id"].dtype == dtype
    with pytest.warns(UserWarning, match="in-sample"):
        result = fitted.backtest(df, n_windows=2)
    assert result.forecasts["unique_id"].dtype == dtype and result.metrics["unique_id"].dtype == dtype
    loaded = Forecaster.load(fitted.save(tmp_path / "categorical"))
    pd.testing.assert_frame_equal(loaded.predict(), fitted.predict())
    plain = Forecaster(**TINY).fit(long_frame(), target_cols=TARGETS)  # plain ids stay plain
    assert not isinstance(plain.predict()["unique_id"].dtype, pd.CategoricalDtype)
