"""Greedy ensemble selection: chosen by validation only, scored on test, with the published metric."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.physionet.ensemble_selection import per_variable_mse, select


def test_the_metric_averages_per_variable_errors_over_the_variables_that_have_queries():
    pred, target = np.array([1.0, 1.0, 1.0, 3.0]), np.array([0.0, 0.0, 0.0, 0.0])
    variable = np.array([0, 0, 0, 2])  # variable 1 has no query
    assert per_variable_mse(pred, target, variable) == pytest.approx((1.0 + 9.0) / 2)



def reference(n: int = 6) -> dict:
    variable = np.arange(n) % 2
    return {"val_target": np.zeros(n), "val_variable": variable, "test_target": np.zeros(n), "test_variable": variable}


def test_selection_adds_the_model_that_cancels_the_errors_and_stops_where_validation_is_lowest():
    """A and B err in opposite directions on validation, C more than either: A, then B makes the mean
    exact; a third model only adds error, so the ensemble is the first two steps."""
    val = {"A": np.full(6, 1.0), "B": np.full(6, -1.0), "C": np.full(6, 1.5)}
    test = {"A": np.full(6, 2.0), "B": np.full(6, -1.0), "C": np.full(6, 0.1)}
    preds = [{"val": val[k], "test": test[k]} for k in "ABC"]
    table = select(preds, reference(), steps=4)
    assert table["added"].tolist()[:2] == [0, 1]
    chosen = table[table["chosen"]]
    assert chosen["step"].tolist() == [2] and chosen["val_mse"].item() == 0.0
    assert chosen["test_mse"].item() == pytest.approx(0.5**2)
    assert table["val_mse"].iloc[2] == pytest.approx((1.0 / 3) ** 2)


def test_test_numbers_never_steer_the_selection():
    rng = np.random.default_rng(0)
    preds = [{"val": rng.normal(size=6), "test": rng.normal(size=6)} for _ in range(5)]
    table = select(preds, reference(), steps=6)
    shuffled = select([{"val": p["val"], "test": rng.normal(size=6)} for p in preds], reference(), steps=6)
    assert table["added"].tolist() == shuffled["added"].tolist()
    assert table[["step", "val_mse", "chosen"]].equals(shuffled[["step", "val_mse", "chosen"]])
    for step, row in table.iterrows():
        mean = np.mean([preds[i]["val"] for i in table["added"].iloc[: step + 1]], axis=0)
        assert row["val_mse"] == pytest.approx(per_variable_mse(mean, np.zeros(6), np.arange(6) % 2))


def test_a_candidate_the_code_cannot_build_is_named(tmp_path, monkeypatch):
    from benchmarks.physionet import ensemble_selection

    def load_member(folder, row):
        raise TypeError("AsyncTransformer.__init__() got an unexpected keyword argument 'value_norm'")

    monkeypatch.setattr(ensemble_selection, "load_member", load_member)
    rows = pd.DataFrame([{"name": "old/cell", "folder": str(tmp_path), "cell_id": "cell", "test_mse": 0.005}])
    with pytest.raises(SystemExit, match="old/cell: this code cannot build its model .*value_norm.*leave it out"):
        ensemble_selection.score_candidates(rows, tmp_path / "runs")


def test_the_paired_bootstrap_resamples_stays_and_centres_on_the_full_sample_difference():
    from benchmarks.physionet.ensemble_selection import paired_bootstrap

    rng = np.random.default_rng(1)
    n = 400
    stay, variable, target = rng.integers(0, 40, n), rng.integers(0, 3, n), rng.normal(size=n)
    a = target + rng.normal(size=n)
    b = target + 0.5 * (a - target)  # half of a's error on every query
    delta, low, high = paired_bootstrap(a, b, target, variable, stay, draws=300)
    assert delta == pytest.approx(per_variable_mse(b, target, variable) - per_variable_mse(a, target, variable))
    assert low < delta < high < 0
    assert paired_bootstrap(a, a, target, variable, stay, draws=50) == (0.0, 0.0, 0.0)


def fake_forecasts(pred_val: float, pred_test: float, stays: np.ndarray) -> dict:
    n = len(stays)
    variable = np.arange(n) % 2
    return {"val": {"pred": np.full(n, pred_val, np.float32), "target": np.zeros(n), "variable": variable,
                    "stay": stays},
            "test": {"pred": np.full(n, pred_test, np.float32), "target": np.zeros(n), "variable": variable,
                     "stay": stays}}


def test_the_cache_keeps_the_queries_once_and_a_rerun_loads_no_model(tmp_path, monkeypatch):
    from benchmarks.physionet import ensemble_selection

    outputs = {"a/x": fake_forecasts(0.5, 0.25, np.arange(4)), "a/y": fake_forecasts(1.0, 0.5, np.arange(4)),
               "a/z": fake_forecasts(1.0, 0.5, np.arange(1, 5))}  # z was scored on other stays
    loaded = []

    def load_member(folder, row):
        loaded.append(row["name"])
        return row["name"], row["name"]

    class Module:
        def __init__(self, name):
            self.name = name

        def val_dataloader(self):
            return "val"

        def test_dataloader(self):
            return "test"

    monkeypatch.setattr(ensemble_selection, "load_member", load_member)
    monkeypatch.setattr(ensemble_selection, "data_module", Module)
    monkeypatch.setattr(ensemble_selection, "forecasts", lambda name, split: outputs[name][split])
    rows = pd.DataFrame([{"name": n, "folder": str(tmp_path), "test_mse": outputs[n]["test"]["pred"][0] ** 2}
                         for n in ("a/x", "a/y")])
    cache = tmp_path / "runs"
    preds, reference = ensemble_selection.score_candidates(rows, cache)
    assert loaded == ["a/x", "a/y"]
    assert sorted(p.name for p in cache.iterdir()) == ["a__x.npz", "a__y.npz", "queries.npz"]
    assert sorted(np.load(cache / "a__y.npz").files) == ["test_pred", "val_pred"]
    assert sorted(reference) == ["test_stay", "test_target", "test_variable", "val_stay", "val_target", "val_variable"]
    assert preds[1]["val"].dtype == np.float64 and preds[1]["val"][0] == 1.0

    again, _ = ensemble_selection.score_candidates(rows, cache)
    assert loaded == ["a/x", "a/y"] and all(np.array_equal(p["test"], q["test"]) for p, q in zip(preds, again))

    other = pd.DataFrame([{"name": "a/z", "folder": str(tmp_path), "test_mse": 0.25}])
    with pytest.raises(SystemExit, match="a/z: its val_stay differ from the other candidates'"):
        ensemble_selection.score_candidates(other, cache)
    assert not (cache / "a__z.npz").exists()
