"""The probe table: runs named by what they changed from the best recipe, filtered to split 0."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks.physionet import probes

RECIPE = {"model": "async", "attention": "softmax", "lr": 0.001, "max_epochs": 8, "patience": 3, "split_seed": 0,
          "weighting": "variable", "seed": 0, "eval_batch_size": 64, "model_args": {"d_model": 128, "d_ff": 256}}


def write(folder, rows):
    folder.mkdir(parents=True)
    frame = pd.DataFrame([{"model": cfg["model"], "seed": cfg["seed"], "status": status, "best_val_mse": val,
                           "test_mse": test, "config": json.dumps(cfg)} for cfg, status, val, test in rows])
    frame.to_csv(folder / "results.csv", index=False)


def test_runs_are_named_by_their_changes_and_ordered_by_validation(tmp_path):
    write(tmp_path / "physionet2012-weighting" / "wide", [(RECIPE, "ok", 4.7e-3, 5.6e-3),
                                                         ({**RECIPE, "seed": 1}, "ok", 4.8e-3, 5.7e-3)])
    write(tmp_path / "physionet2012-deeper", [
        ({**RECIPE, "lr": 0.002, "model_args": {"d_model": 128, "d_ff": 256, "n_layers": 3}}, "ok", 4.6e-3, 5.8e-3),
        ({**RECIPE, "model_args": {}}, "ok", 4.9e-3, 5.4e-3),  # the model's default width
        ({**RECIPE, "lr": 0.5}, "failed", float("nan"), float("nan")),
        ({**RECIPE, "split_seed": 1}, "ok", 4.0e-3, 5.0e-3),  # another split: not comparable
        ({**RECIPE, "model": "last"}, "ok", float("nan"), 7.0e-3),  # a baseline, not a probe
        ({**RECIPE, "model": "patch-graph", "model_args": {"d_model": 128, "d_ff": 256, "patch": 4.0}}, "ok",
         4.75e-3, 5.45e-3),  # another model: named with the arguments it gave
    ])
    write(tmp_path / "physionet2012-other-splits", [(RECIPE, "ok", 4.0e-3, 5.0e-3)])
    runs = probes.collect(tmp_path)
    assert list(runs["change"]) == ["lr=0.002, n_layers=3", "(the best recipe)", "model=patch-graph, patch=4.0",
                                    "(the best recipe)", "d_ff=128, d_model=64"]
    assert list(runs["folder"]) == ["physionet2012-deeper", "physionet2012-weighting/wide", "physionet2012-deeper",
                                    "physionet2012-weighting/wide", "physionet2012-deeper"]
    assert runs["best_val_mse"].tolist() == pytest.approx([4.6, 4.7, 4.75, 4.8, 4.9])
    text = probes.render(runs)
    assert "5 trained runs in 2 folders" in text
    assert "runs at or below the 5.5e-3 target: 2" in text
    assert "| physionet2012-deeper | d_ff=128, d_model=64 | 0 | 4.900 | 5.400 |" in text


def test_the_plot_is_written(tmp_path):
    write(tmp_path / "physionet2012-weighting" / "wide", [(RECIPE, "ok", 4.7e-3, 5.6e-3)])
    write(tmp_path / "physionet2012-deeper", [({**RECIPE, "lr": 0.002}, "ok", 4.6e-3, 5.8e-3)])
    path = tmp_path / "probes.png"
    probes.plot(probes.collect(tmp_path), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
