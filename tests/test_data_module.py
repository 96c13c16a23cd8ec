"""The protocol splits, scaling, windows and the irregular regime."""

from __future__ import annotations

import warnings
from argparse import ArgumentError

import numpy as np
import pandas as pd
import pytest
import torch
from jsonargparse import ArgumentParser

from ts_continuum.data import ForecastDataModule, IrregularRegime, load_dataset, split_rows
from ts_continuum.data.datamodule import check_time_grid
from ts_continuum.data.protocol import DROP_MODES


def test_ett_hour_protocol_window_counts():
    dm = ForecastDataModule("ETTh1", lookback=336, horizon=96)
    dm.setup()
    assert {k: len(v) for k, v in dm.splits.items()} == {"train": 8209, "val": 2785, "test": 2785}
    assert dm.rows == {"train": (0, 8640), "val": (8304, 11520), "test": (11184, 14400)}


def test_ett_minute_and_other_csv_protocols():
    assert split_rows("ettm2", 69680, 96)["test"] == (4 * 11520 - 96, 4 * 14400)
    rows = split_rows(None, 1000, 50)
    assert rows == {"train": (0, 700), "val": (650, 800), "test": (750, 1000)}


def test_a_file_named_like_a_bundled_dataset_is_warned_about_its_split(tiny_csv, tmp_path):
    copy = tmp_path / "ETTh1.csv"
    copy.write_bytes(tiny_csv.read_bytes())
    with pytest.warns(UserWarning, match="70/10/20 split .* not the published etth1 split; pass dataset='etth1'"):
        assert ForecastDataModule(str(copy), lookback=24, horizon=6).rows["train"] == (0, 280)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a file named otherwise: no warning
        assert ForecastDataModule(str(tiny_csv), lookback=24, horizon=6).rows["train"] == (0, 280)


def test_scaler_is_fit_on_training_rows_only():
    dm = ForecastDataModule("ETTh2", lookback=96, horizon=24)
    train = dm.frame.values[: dm.rows["train"][1]]
    np.testing.assert_allclose(dm.scaler.mean[0], train.mean(0))
    assert not np.allclose(dm.scaler.mean[0], dm.frame.values.mean(0))


def test_test_loader_keeps_every_window():
    dm = ForecastDataModule("ETTh1", lookback=336, horizon=96, batch_size=128)
    sizes = [len(b["y"]) for b in dm.test_dataloader()]
    assert sum(sizes) == 2785 and sizes[-1] == 2785 % 128


def test_window_content_and_times(tiny_csv):
    dm = ForecastDataModule(str(tiny_csv), lookback=24, horizon=6)
    dm.setup()
    item = dm.splits["val"][3]
    start = dm.rows["val"][0] + 3
    scaled = dm.scaler.transform(dm.frame.values)
    np.testing.assert_allclose(item["x"].numpy(), scaled[start : start + 24])
    np.testing.assert_allclose(item["y"].numpy(), scaled[start + 24 : start + 30])
    assert item["x_time"].tolist() == list(range(-23, 1)) and item["y_time"].tolist() == list(range(1, 7))
    assert item["x_mask"].all()


@pytest.mark.parametrize("mode", ["channel", "step"])
def test_irregular_regime_is_deterministic_and_leaves_targets_alone(tiny_csv, mode):
    kw = dict(dataset=str(tiny_csv), lookback=24, horizon=6, drop=0.5, drop_mode=mode, jitter=0.3)
    a, b = ForecastDataModule(regime_seed=1, **kw), ForecastDataModule(regime_seed=1, **kw)
    c = ForecastDataModule(regime_seed=2, **kw)
    reg = ForecastDataModule(dataset=str(tiny_csv), lookback=24, horizon=6)
    for dm in (a, b, c, reg):
        dm.setup()
    ia, ib, ic, ir = (dm.splits["train"][10] for dm in (a, b, c, reg))
    assert torch.equal(ia["x_mask"], ib["x_mask"]) and torch.equal(ia["x_time"], ib["x_time"])
    assert not torch.equal(ia["x_mask"], ic["x_mask"])
    torch.testing.assert_close(ia["y"], ir["y"])  # identical targets in every regime
    assert torch.isnan(ia["x"][~ia["x_mask"]]).all() and not torch.isnan(ia["x"][ia["x_mask"]]).any()
    torch.testing.assert_close(ia["x"][ia["x_mask"]], ir["x"][ia["x_mask"]])
    assert (torch.diff(ia["x_time"]) > 0).all() and (ia["x_time"] - ir["x_time"]).abs().max() <= 0.3
    if mode == "step":
        assert (ia["x_mask"] == ia["x_mask"][:, :1]).all()
    frac = 1 - a.regime.observation_mask(400, 3, 23).mean()
    assert 0.4 < frac < 0.6


def test_overlapping_windows_agree_on_which_observations_exist(tiny_csv):
    dm = ForecastDataModule(str(tiny_csv), lookback=24, horizon=6, drop=0.5)
    dm.setup()
    w0, w1 = dm.splits["train"][0], dm.splits["train"][1]
    assert torch.equal(w0["x_mask"][1:], w1["x_mask"][:-1])


def test_every_window_sees_every_channel():
    keep = IrregularRegime(drop=0.95, seed=0).observation_mask(2000, 2, max_gap=9)
    for c in range(2):
        gaps = np.diff(np.flatnonzero(keep[:, c]))
        assert gaps.max() <= 10


def test_interpolation_baseline_fills_from_the_window_only(tiny_csv):
    kw = dict(dataset=str(tiny_csv), lookback=24, horizon=6, drop=0.5, regime_seed=3)
    raw, filled = ForecastDataModule(**kw), ForecastDataModule(interpolate=True, **kw)
    raw.setup(), filled.setup()
    for i in range(0, 100, 7):
        r, f = raw.splits["train"][i], filled.splits["train"][i]
        assert f["x_mask"].all() and not torch.isnan(f["x"]).any()
        torch.testing.assert_close(f["x"][r["x_mask"]], r["x"][r["x_mask"]])
        for c in range(3):  # after the last observation: carried forward, no look-ahead
            last = int(torch.nonzero(r["x_mask"][:, c]).max())
            assert (f["x"][last:, c] == r["x"][last, c]).all()


def test_interpolation_baseline_leaves_a_variable_unobserved_in_a_window_at_its_training_mean():
    """A window with no observation of a variable has nothing to interpolate: it reads 0, the training
    mean in scaled units (np.interp of no points used to raise), as the Forecaster's filled inputs do."""
    from ts_continuum.data.windows import WindowDataset

    values = np.arange(40, dtype=np.float32).reshape(20, 2)
    mask = np.ones((20, 2), dtype=bool)
    mask[:8, 1] = False  # the first window (lookback 8) never observes variable 1
    first = WindowDataset(values, 0, 20, 8, 2, mask=mask, interpolate=True)[0]
    assert (first["x"][:, 1] == 0).all() and (first["x"][:, 0] == torch.from_numpy(values[:8, 0])).all()


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(drop=1.0), "drop must be a fraction"),
        (dict(jitter=0.5), "jitter must lie in"),
        (dict(drop=0.1, drop_mode="row"), "drop_mode must be one of"),
        (dict(lookback=0), "lookback must be a positive integer"),
        (dict(horizon=2.5), "horizon must be a positive integer"),
    ],
)
def test_bad_options(kw, match, tiny_csv):
    with pytest.raises(ValueError, match=match):
        ForecastDataModule(str(tiny_csv), **kw)


def test_the_cli_lists_the_drop_modes_and_refuses_a_typo_when_parsing():
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(ForecastDataModule, "data")
    assert f"--data.drop_mode {{{','.join(DROP_MODES)}}}" in " ".join(parser.format_help().split())
    with pytest.raises(ArgumentError, match=r"(?s)data\.drop_mode.*Got value: row"):
        parser.parse_args(["--data.drop_mode", "row"])
    for mode in DROP_MODES:  # the CLI's list is the one IrregularRegime checks
        assert parser.parse_args(["--data.drop_mode", mode]).data.drop_mode == mode


def test_too_little_history_is_a_clear_error(tiny_csv):
    dm = ForecastDataModule(str(tiny_csv), lookback=60, horizon=50)  # val holds 40 + L rows
    with pytest.raises(ValueError, match=r"lookback 60 \+ horizon 50 = 110 rows .* "
                       r"but val holds 100 \(rows 220\.\.319\); with the 70/10/20 split these settings need a "
                       r"series of at least \d+ rows and it has 400"):
        dm.setup()


def test_too_little_history_names_the_split_and_the_length_needed(tiny_csv, tmp_path):
    """lookback 24 + horizon 6 need 51 rows: with 50, val gets 5 rows (+ 24 of lookback), one too few."""
    df = pd.read_csv(tiny_csv)
    df.head(51).to_csv(tmp_path / "ok.csv", index=False)
    df.head(50).to_csv(tmp_path / "short.csv", index=False)
    ForecastDataModule(str(tmp_path / "ok.csv"), lookback=24, horizon=6).setup()
    with pytest.raises(ValueError, match=r"but val holds 29 \(rows 11\.\.39\); .*at least 51 rows and it has 50"):
        ForecastDataModule(str(tmp_path / "short.csv"), lookback=24, horizon=6).setup()


def test_unknown_columns_are_a_clear_error(tiny_csv):
    dm = ForecastDataModule(str(tiny_csv), columns=["a", "zz"])
    with pytest.raises(ValueError, match=r"columns \['zz'\] are not in"):
        dm.setup()


def _with_times(tiny_csv, tmp_path, change) -> str:
    df = pd.read_csv(tiny_csv, parse_dates=["date"])
    path = tmp_path / "changed.csv"
    change(df).to_csv(path, index=False)
    return str(path)


def _shuffle(df):
    return df.sample(frac=1.0, random_state=0)


def _gaps(df):
    step = np.random.default_rng(0).integers(1, 25, len(df))  # 1 to 24 hours apart
    return df.assign(date=pd.Timestamp("2021-01-01") + pd.to_timedelta(np.cumsum(step), unit="h"))


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda df: pd.concat([df, df]).sort_values("date", kind="stable"),
         r"400 rows repeat an earlier timestamp \(first: row 1 repeats 2021-01-01 00:00:00 of row 0.*drop_duplicates"),
        (_shuffle, r"rows are not in time order: \d+ rows have an earlier timestamp .*sort_values"),
        (lambda df: df.drop(index=[100, 101]),
         r"not a regular grid: 1 of 397 spacings differ from the typical 01:00:00 "
         r"\(first: 03:00:00 from row 99 to 100"),
        (_gaps, r"not a regular grid: .* spacings range from 01:00:00 to 1 days 00:00:00\)\. ForecastDataModule assumes"
                r" a regular grid.*ts_continuum\.forecasting\.Forecaster"),
    ],
    ids=["duplicates", "unsorted", "missing-rows", "irregular"],
)
def test_csv_timestamps_must_be_a_sorted_regular_grid(tiny_csv, tmp_path, change, match):
    dm = ForecastDataModule(_with_times(tiny_csv, tmp_path, change), lookback=24, horizon=6)
    with pytest.raises(ValueError, match=match):
        dm.setup()


@pytest.mark.parametrize("freq", ["MS", "B"])  # 28-31 days apart; weekends skipped
def test_calendar_grids_count_as_regular(tiny_csv, tmp_path, freq):
    dates = pd.date_range("2000-01-01", periods=400, freq=freq)
    path = _with_times(tiny_csv, tmp_path, lambda df: df.assign(date=dates))
    ForecastDataModule(path, lookback=24, horizon=6).setup()


@pytest.mark.parametrize("name", ["ETTh1", "ETTh2", "ETTm1", "ETTm2"])
def test_bundled_ett_files_are_regular_grids(name):
    check_time_grid(load_dataset(name).index, name)


def test_weather_loads_as_published_though_its_grid_has_two_glitches():
    """The checks are for user CSVs; the bundled Weather file repeats one timestamp and skips 9 rows once."""
    with pytest.raises(ValueError, match="1 rows repeat an earlier timestamp"):
        check_time_grid(load_dataset("weather").index, "weather")
    assert ForecastDataModule("weather").frame.shape == (52696, 21)


def test_missing_values_name_the_columns_and_what_to_do(tiny_csv, tmp_path):
    def holes(df):
        df.loc[[5, 9], "b"] = np.nan
        df.loc[300, "c"] = np.nan
        return df

    dm = ForecastDataModule(_with_times(tiny_csv, tmp_path, holes), lookback=24, horizon=6)
    with pytest.raises(ValueError, match=r"column 'b' misses 2 of 400 \(first at row 5\); column 'c' misses 1 of 400 "
                                         r"\(first at row 300\).*does not mask missing values.*fill them"):
        dm.setup()


def test_unknown_dataset_name_lists_the_bundled_ones():
    with pytest.raises(FileNotFoundError) as err:
        ForecastDataModule("ETTh3").setup()
    assert str(err.value) == (
        "'ETTh3' is neither a bundled dataset (ETTh1, ETTh2, ETTm1, ETTm2, weather) nor an existing file"
    )


@pytest.mark.parametrize("kwargs,match", [
    (dict(columns="a"), r"columns must be a list of column names, got the string 'a'; pass columns=\['a'\]"),
    (dict(columns=[]), "columns must be a non-empty list"),
    (dict(columns=["a", "a"]), r"columns name \['a'\] more than once"),
    (dict(regime_seed=None), "regime_seed must be a non-negative integer, got None"),
    (dict(regime_seed=-1), "regime_seed must be a non-negative integer, got -1"),
    (dict(drop="0.3"), r"drop must be a number, got '0.3' \(str\)"),
    (dict(eval_batch_size=0), "eval_batch_size must be a positive integer, got 0"),
    (dict(num_workers=-1), "num_workers must be a non-negative integer"),
    (dict(lookback=1, drop=0.3), "drop=0.3 needs lookback >= 2"),
])
def test_bad_arguments_are_named_before_any_data_is_read(tiny_csv, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ForecastDataModule(str(tiny_csv), **{"lookback": 24, "horizon": 6, **kwargs})


def test_numpy_integers_and_tuples_are_taken(tiny_csv):
    dm = ForecastDataModule(str(tiny_csv), lookback=np.int64(24), horizon=np.int32(6), columns=("b", "a"))
    dm.setup()
    assert dm.lookback == 24 and isinstance(dm.lookback, int) and dm.channel_names == ["b", "a"]


def test_a_text_column_can_be_left_out_and_non_finite_values_are_named(tiny_csv, tmp_path):
    df = pd.read_csv(tiny_csv)
    with_text = tmp_path / "text.csv"
    df.assign(note="ok").to_csv(with_text, index=False)
    with pytest.raises(ValueError, match=r"columns \['note'\] are not numeric.*leave the others out with columns"):
        ForecastDataModule(str(with_text), lookback=24, horizon=6).setup()
    ForecastDataModule(str(with_text), lookback=24, horizon=6, columns=["a", "b"]).setup()
    infinite, huge = df.copy(), df.copy()
    infinite.loc[7, "b"] = np.inf
    infinite.to_csv(tmp_path / "inf.csv", index=False)
    with pytest.raises(ValueError, match=r"column 'b' holds 1 infinite values \(first at row 7"):
        ForecastDataModule(str(tmp_path / "inf.csv"), lookback=24, horizon=6).setup()
    huge.loc[3, "c"] = 1e200
    huge.to_csv(tmp_path / "huge.csv", index=False)
    with pytest.raises(ValueError, match=r"column 'c' cannot be standardised.*1e\+200"):
        ForecastDataModule(str(tmp_path / "huge.csv"), lookback=24, horizon=6).setup()
    only_time = tmp_path / "time.csv"
    df[["date"]].to_csv(only_time, index=False)
    with pytest.raises(ValueError, match="holds no variable besides its time column 'date'"):
        ForecastDataModule(str(only_time), lookback=24, horizon=6).setup()


def test_columns_take_an_index_or_array_and_refuse_an_unordered_set(tiny_csv):
    for columns in (pd.Index(["b", "a"]), np.array(["b", "a"])):
        assert ForecastDataModule(str(tiny_csv), lookback=24, horizon=6, columns=columns).channel_names == ["b", "a"]
    with pytest.raises(ValueError, match=r"an ordered list of column names .* got set"):
        ForecastDataModule(str(tiny_csv), lookback=24, horizon=6, columns={"a", "b"})


def test_a_drop_fraction_short_by_chance_is_not_taken_for_observations_put_back(tmp_path):
    """On a small file the random draw can fall short of drop by more than two points with nothing
    put back; the warning said a longer lookback would help."""
    from ts_continuum.data.protocol import IrregularRegime

    rows = 400
    pd.DataFrame({"date": pd.date_range("2020", periods=rows, freq="h"), "a": np.arange(rows) * 0.1}).to_csv(
        tmp_path / "small.csv", index=False)
    seed = next(s for s in range(200) if 1 - IrregularRegime(drop=0.3, seed=s, mode="step")
                .observation_mask(rows, 1, max_gap=rows).mean() < 0.28)  # a draw short by chance
    dm = ForecastDataModule(str(tmp_path / "small.csv"), lookback=48, horizon=8, drop=0.3, drop_mode="step",
                            regime_seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        dm.setup()
    assert np.array_equal(dm.splits["train"].mask, IrregularRegime(drop=0.3, seed=seed, mode="step")
                          .observation_mask(rows, 1, max_gap=rows))  # nothing was put back


def test_a_drop_fraction_a_short_lookback_cannot_keep_is_warned_about(tiny_csv):
    with pytest.warns(UserWarning, match=r"drop=0.6 removed only .*% of the inputs: every window of lookback 4"):
        ForecastDataModule(str(tiny_csv), lookback=4, horizon=2, drop=0.6).setup()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ForecastDataModule(str(tiny_csv), lookback=24, horizon=6, drop=0.6).setup()  # long enough: silent
