"""PhysioNet 2012: the bundled long frame, the published protocol, observation sets and the metric."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from ts_continuum import load_dataset
from ts_continuum.data import bundled
from ts_continuum.data.observations import ObservationSets, collate, move_origins
from ts_continuum.data.physionet import VARIABLES, PhysioNetDataModule, split_stays
from ts_continuum.training.metrics import PerVariableError


def test_bundled_long_frame_is_the_file_as_stored():
    df = load_dataset("physionet2012")
    assert list(df.columns) == ["set", "record_id", "time", "parameter", "value"]
    assert len(df) == 5_273_818 and df["record_id"].nunique() == 12_000
    assert set(df["parameter"].dropna().astype(str)) == set(VARIABLES)
    assert df["time"].min() == 0 and df["time"].max() == 2880
    with pytest.raises(ValueError, match="long frame"):
        load_dataset("physionet2012", columns=["HR"])


def test_corrupt_physionet_file_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "datasets"
    shutil.copytree(bundled.data_dir(), folder)
    monkeypatch.setattr(bundled, "data_dir", lambda: folder)
    bundled._read_long.cache_clear()
    path = folder / "physionet2012.csv.xz"
    path.chmod(0o644)
    with open(path, "ab") as f:
        f.write(b"\0")
    try:
        with pytest.raises(ValueError, match="checksum mismatch"):
            load_dataset("physionet2012")
    finally:
        bundled._read_long.cache_clear()


def tiny_frame() -> pd.DataFrame:
    """Ten stays, a few variables, times in minutes; two HR readings share a minute in stay 1."""
    rows = []
    rng = np.random.default_rng(0)
    for stay in range(1, 11):
        rows.append((stay, 0, "Age", 40.0 + stay))
        for minute in (30, 400, 1300, 1500, 2000, 2800):
            rows.append((stay, minute, "HR", 60.0 + rng.integers(0, 40)))
        rows.append((stay, 700, "Temp", 36.0 + stay / 10))
        rows.append((stay, 1700 + stay, "Temp", 37.0))
    rows.append((1, 30, "HR", 100.0))  # same minute as another HR of stay 1
    return pd.DataFrame(rows, columns=["record_id", "time", "parameter", "value"])


@pytest.fixture
def tiny_module(tmp_path):
    path = tmp_path / "tiny.csv"
    tiny_frame().to_csv(path, index=False)
    dm = PhysioNetDataModule(data=str(path), batch_size=4, eval_batch_size=4)
    dm.setup("fit")
    return dm


def test_protocol_split_history_queries_and_scaling(tiny_module):
    dm = tiny_module
    ids = {k: set(v.tolist()) for k, v in dm.split_ids.items()}
    assert [len(ids[k]) for k in ("train", "val", "test")] == [6, 2, 2]
    assert not (ids["train"] & ids["val"]) and not (ids["val"] & ids["test"]) and not (ids["train"] & ids["test"])
    frame = tiny_frame()
    seen = frame[frame.record_id.isin(ids["train"] | ids["val"])]
    hr = VARIABLES.index("HR")
    averaged = seen.groupby(["record_id", "time", "parameter"])["value"].mean().reset_index()
    assert dm.scale_min[hr] == averaged[averaged.parameter == "HR"].value.min()
    assert dm.scale_max[hr] == averaged[averaged.parameter == "HR"].value.max()
    for split in ("train", "val", "test"):
        data = dm.datasets[split]
        assert (data.history.time < 0).all() and (data.history.time >= -24).all()  # hours before the origin
        assert (data.queries.time >= 0).all() and (data.queries.time <= 24).all()
        # every stay: 3 HR in the history (minutes 30, 400, 1300), 3 queried (1500, 2000, 2800)
        counts = data.queries.counts()
        assert (counts[:, hr] == 3).all() and (data.history.counts()[:, hr] == 3).all()
    train_hist = dm.datasets["train"].history
    values = train_hist.value[(train_hist.variable == hr)]
    assert ((values >= 0) & (values <= 1)).all()


def test_same_minute_observations_are_averaged(tmp_path):
    path = tmp_path / "tiny.csv"
    tiny_frame().to_csv(path, index=False)
    dm = PhysioNetDataModule(data=str(path), split_seed=3)
    dm.setup("fit")
    split = next(k for k, v in dm.split_ids.items() if 1 in v.tolist())
    data = dm.datasets[split]
    s = int(np.flatnonzero(data.history.ids == 1)[0])
    hr = VARIABLES.index("HR")
    rows = np.flatnonzero((data.history.series == s) & (data.history.variable == hr))
    first = dm.unscale(data.history.value[rows[0]], hr)
    raw = tiny_frame()
    want = raw[(raw.record_id == 1) & (raw.time == 30) & (raw.parameter == "HR")].value.mean()
    assert np.isclose(first, want, rtol=1e-5) and len(rows) == 3


def test_split_is_reproducible_and_depends_on_the_seed():
    ids = np.arange(1000)
    a, b, c = split_stays(ids, 0), split_stays(ids, 0), split_stays(ids, 1)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["test"], c["test"])
    assert [len(a[k]) for k in ("train", "val", "test")] == [600, 200, 200]


def test_history_thinning_keeps_about_the_fraction_and_never_touches_queries(tmp_path):
    path = tmp_path / "tiny.csv"
    tiny_frame().to_csv(path, index=False)
    full = PhysioNetDataModule(data=str(path))
    half = PhysioNetDataModule(data=str(path), history_keep=0.5)
    full.setup("fit")
    half.setup("fit")
    for split in ("train", "val", "test"):
        assert len(half.datasets[split].history.value) < len(full.datasets[split].history.value)
        np.testing.assert_array_equal(half.datasets[split].queries.value, full.datasets[split].queries.value)


@pytest.mark.parametrize("change,match", [
    (lambda f: f.assign(parameter=f.parameter.replace("HR", "HeartRate")), "unknown PhysioNet variables"),
    (lambda f: f.assign(value=f.value.where(f.index != 3, np.nan)), "NaN or infinite"),
    (lambda f: f.assign(time=f.time.where(f.index != 3, 5000)), r"time must be minutes since admission"),
    (lambda f: f.drop(columns="value"), "lacks columns"),
])
def test_bad_frames_are_named(tmp_path, change, match):
    path = tmp_path / "bad.csv"
    change(tiny_frame()).to_csv(path, index=False)
    with pytest.raises(ValueError, match=match):
        PhysioNetDataModule(data=str(path)).setup("fit")


@pytest.mark.parametrize("kwargs,match", [
    (dict(history_hours=48.0), "history_hours"), (dict(history_keep=0.0), "history_keep"),
    (dict(batch_size=0), "batch_size"), (dict(max_stays=2), "max_stays"),
    (dict(history_dropout=1.0), "history_dropout"), (dict(history_dropout=-0.1), "history_dropout"),
    (dict(origin_jitter=24.0), "origin_jitter"), (dict(origin_jitter=-1.0), "origin_jitter"),
])
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PhysioNetDataModule(**kwargs)


def test_observation_sets_pad_each_variable_at_its_own_times():
    ids = np.array(["a", "b"])
    sets = ObservationSets.build(ids, series=[0, 0, 0, 1, 1], variable=[1, 0, 1, 1, 1],
                                 time=[-2.0, -1.5, -3.0, -1.0, -0.5], value=[1, 2, 3, 4, 5], n_variables=2)
    batch = collate(sets, sets, [1, 0])
    assert batch["lengths"].tolist() == [[0, 2], [1, 2]]
    assert batch["times"][1, 1, :2].tolist() == [-3.0, -2.0]  # sorted within the variable
    assert batch["values"][1, 1, :2].tolist() == [3.0, 1.0]
    assert batch["values"][0, 1].tolist() == [4.0, 5.0] and batch["values"][0, 0].tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="observed twice"):
        ObservationSets.build(ids, [0, 0], [1, 1], [-1.0, -1.0], [1, 2], 2)


def test_history_dropout_thins_training_batches_anew_and_leaves_the_rest_whole():
    rng = np.random.default_rng(0)
    n = 400
    series = rng.integers(0, 20, n)
    sets = ObservationSets.build(np.arange(20), series=series, variable=rng.integers(0, 3, n),
                                 time=-rng.permutation(n) / 10.0, value=rng.normal(size=n), n_variables=3)
    sets = sets.select((sets.series != 7) | (np.arange(n) == sets.offsets[7]))  # stay 7: one observation
    rows = [7, 3, 12, 0]
    full = collate(sets, sets, rows)
    torch.manual_seed(0)
    thinned = collate(sets, sets, rows, history_dropout=0.5)
    again = collate(sets, sets, rows, history_dropout=0.5)
    kept = thinned["lengths"].sum(-1)
    assert (kept >= 1).all() and kept[0] == 1  # a stay never loses its whole history
    assert 0.3 < kept[1:].sum() / full["lengths"].sum(-1)[1:].sum() < 0.7
    assert not torch.equal(thinned["lengths"], again["lengths"])  # drawn anew every batch
    for key in ("query_times", "query_values", "query_lengths", "index"):
        assert torch.equal(thinned[key], full[key])
    # every kept observation is one of the stay's, at its own time, still sorted within its variable
    for b in range(len(rows)):
        for c in range(3):
            m = int(thinned["lengths"][b, c])
            t, v = thinned["times"][b, c, :m], thinned["values"][b, c, :m]
            own = dict(zip(full["times"][b, c, :int(full["lengths"][b, c])].tolist(),
                           full["values"][b, c, :int(full["lengths"][b, c])].tolist()))
            assert (t[1:] > t[:-1]).all() and all(own[ti] == vi for ti, vi in zip(t.tolist(), v.tolist()))
    torch.manual_seed(0)
    assert torch.equal(collate(sets, sets, rows, history_dropout=0.5)["values"], thinned["values"])  # seeded


def _stay_sets(rng, n=400, stays=20):
    """History before the origin (times < 0) and queries up to 24 after it, random stays."""
    series, variable = rng.integers(0, stays, n), rng.integers(0, 3, n)
    time = rng.permutation(n) / n * 48.0 - 24.0
    value = rng.normal(size=n)
    sets = [ObservationSets.build(np.arange(stays) + 100, series[m], variable[m], time[m], value[m], 3)
            for m in (time < 0, time >= 0)]
    return sets, (series, variable, time, value)


def test_move_origins_splits_each_stay_again_at_its_earlier_origin():
    (history, queries), (series, variable, time, value) = _stay_sets(np.random.default_rng(0))
    rows, shifts = np.array([5, 2, 9]), np.array([-3.5, 0.0, -12.0])
    moved_h, moved_q = move_origins(history, queries, rows, shifts, horizon=24.0)
    assert moved_h.ids.tolist() == [105, 102, 109] == moved_q.ids.tolist()
    for b, (stay, shift) in enumerate(zip(rows, shifts)):
        mine = series == stay
        for sets, in_window in ((moved_h, time < shift), (moved_q, (time >= shift) & (time <= shift + 24.0))):
            got = sets.frame()[sets.series == b]
            want = np.array(sorted(zip(variable[mine & in_window], time[mine & in_window] - shift)))
            assert np.allclose(np.array(sorted(zip(got["variable"], got["time"]))).reshape(want.shape), want)
            assert np.allclose(np.sort(got["value"]), np.sort(value[mine & in_window].astype(np.float32)))
    assert (moved_h.time < 0).all() and ((moved_q.time >= 0) & (moved_q.time <= 24.0)).all()
    # the protocol's own origin changes nothing
    same_h, same_q = move_origins(history, queries, rows, np.zeros(3), horizon=24.0)
    for a, b in ((same_h, history.take(rows)), (same_q, queries.take(rows))):
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("time", "value", "offsets"))
    with pytest.raises(ValueError, match="shifts"):
        move_origins(history, queries, rows, np.array([1.0, 0.0, 0.0]), horizon=24.0)


def test_origin_jitter_moves_training_origins_anew_and_keeps_the_batch_rows():
    (history, queries), _ = _stay_sets(np.random.default_rng(1))
    rows = [4, 0, 17, 8]
    torch.manual_seed(0)
    moved = collate(history, queries, rows, origin_jitter=10.0, horizon=24.0)
    again = collate(history, queries, rows, origin_jitter=10.0, horizon=24.0)
    assert moved["index"].tolist() == rows
    assert not torch.equal(moved["query_times"], again["query_times"])  # drawn anew every batch
    q = moved["query_times"][torch.arange(moved["query_times"].shape[-1]) < moved["query_lengths"][..., None]]
    assert (q >= 0).all() and (q <= 24.0).all()
    full = collate(history, queries, rows)
    assert moved["lengths"].sum() < full["lengths"].sum()  # an earlier origin leaves less history
    torch.manual_seed(0)
    assert torch.equal(collate(history, queries, rows, origin_jitter=10.0, horizon=24.0)["query_values"],
                       moved["query_values"])  # seeded
    with pytest.raises(ValueError, match="horizon"):
        collate(history, queries, rows, origin_jitter=10.0)


@pytest.mark.parametrize("augmentation,changed", [
    (dict(history_dropout=0.6), lambda plain, aug: aug["lengths"].sum() < plain["lengths"].sum()),
    (dict(origin_jitter=20.0), lambda plain, aug: not torch.equal(plain["query_times"], aug["query_times"])),
])
def test_augmentations_apply_to_training_batches_only(tmp_path, augmentation, changed):
    path = tmp_path / "tiny.csv"
    tiny_frame().to_csv(path, index=False)
    plain = PhysioNetDataModule(data=str(path), batch_size=6, eval_batch_size=6)
    augmented = PhysioNetDataModule(data=str(path), batch_size=6, eval_batch_size=6, **augmentation)
    plain.setup("fit")
    augmented.setup("fit")
    for loader in ("val_dataloader", "test_dataloader"):
        a, b = next(iter(getattr(plain, loader)())), next(iter(getattr(augmented, loader)()))
        assert all(torch.equal(a[k], b[k]) for k in a)
    torch.manual_seed(3)
    a = next(iter(plain.train_dataloader()))
    torch.manual_seed(3)
    b = next(iter(augmented.train_dataloader()))
    assert torch.equal(a["index"], b["index"]) and changed(a, b)


def test_per_variable_metric_averages_over_variables_that_have_targets():
    metric = PerVariableError(3, "mse")
    pred = torch.zeros(1, 3, 4)
    target = torch.tensor([[[1.0, 1.0, 1.0, 1.0], [2.0, 0, 0, 0], [5.0, 5.0, 5.0, 5.0]]])
    mask = torch.tensor([[[True] * 4, [True, False, False, False], [False] * 4]])
    metric.update(pred[:, :, :2], target[:, :, :2], mask[:, :, :2])
    metric.update(pred[:, :, 2:], target[:, :, 2:], mask[:, :, 2:])
    assert metric.compute().item() == pytest.approx((1.0 + 4.0) / 2)  # variable 3 has no target
    mae = PerVariableError(3, "mae")
    mae.update(pred, target, mask)
    assert mae.compute().item() == pytest.approx((1.0 + 2.0) / 2)
    assert torch.isnan(mae.per_variable()[2])
