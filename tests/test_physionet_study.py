"""The PhysioNet study runner and report on a few stays: rows, resuming, per-stay errors, switch runs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from benchmarks.physionet import ensemble, ensemble_selection, report, run, save_best
from ts_continuum.training import cli

TINY = {"max_epochs": 2, "max_stays": 40, "batch_size": 8, "eval_batch_size": 16,
        "model_args": {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "attention_backend": "torch"}}


def write_grid(tmp_path, blocks):
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"name": "tiny", "out": str(tmp_path / "out"), "defaults": TINY, "blocks": blocks}))
    return path


def block(name, **axes):
    base = {"name": name, "model": "async", "attention": ["softmax", "continuous"], "pos_encoding": "rope",
            "history_keep": 1.0, "switch": "none", "seed": 0}
    return {**base, **axes}


@pytest.mark.slow
def test_grid_runs_resumes_and_reports(tmp_path, capsys, monkeypatch):
    grid = write_grid(tmp_path, [block("main"), block("switch", attention="softmax", switch="to-other@1"),
                                 block("floor", model="last", attention="none", pos_encoding="none")])
    run.main(["--grid", str(grid), "--threads", "1"])
    out = tmp_path / "out"
    df = pd.read_csv(out / "results.csv")
    assert len(df) == 4 and (df["status"] == "ok").all(), df["error"].tolist()
    assert df["test_mse"].gt(0).all() and np.isfinite(df["test_mse"]).all()
    for cid in df["cell_id"]:
        errors = np.load(out / "runs" / cid / "errors.npz")
        assert len(errors["ids"]) == len(set(errors["ids"].tolist())) == 8  # every test stay once
        assert report._metric(errors, np.ones(8, bool)) == pytest.approx(
            df.loc[df["cell_id"] == cid, "test_mse"].item(), rel=1e-9)
    switched = df[df["switch"] == "to-other@1"].iloc[0]
    assert np.isfinite(switched["val_after_switch"]) and switched["epochs"] == 2
    capsys.readouterr()
    run.main(["--grid", str(grid), "--dry-run"])
    assert "0 of 4 cells to run" in capsys.readouterr().out
    report.main([str(out)])
    summary = (out / "summary.md").read_text()
    assert "| async | rope | 1.0 | none | 1 |" in summary and "sparsest" in summary and "to-other@1" in summary
    assert (out / "val_curves.png").is_file() and (out / "paired_deltas.png").is_file()
    # the per-stay error files are not committed: the density sums kept beside results.csv suffice
    sparsity = summary.split("## By sparsity")[1].split("##")[0]
    for npz in out.glob("runs/*/errors.npz"):
        npz.unlink()
    report.main([str(out)])
    assert (out / "summary.md").read_text().split("## By sparsity")[1].split("##")[0] == sparsity
    # the mean of the two attentions' forecasts: members re-scored exactly, the ensemble no worse
    # than their mean (the metric is convex in the forecasts)
    ensemble.main([str(out), "--block", "main", "--threads", "1"])
    scored = pd.read_csv(out / "ensemble.csv")
    members = df[df["block"] == "main"].set_index("cell_id")["test_mse"]
    assert scored["member"].iloc[:2].tolist() == members.index.tolist()
    assert scored["test_mse"].iloc[:2].to_numpy() == pytest.approx(members.to_numpy(), rel=1e-9)
    assert scored["member"].iloc[2] == "mean of 2" and scored["test_mse"].iloc[2] <= members.mean() + 1e-12
    # greedy selection on validation over the same cells: each re-scored to its row, the chosen step
    # the lowest on validation, forecasts cached so that a rerun needs no checkpoint
    selected = tmp_path / "selection"
    ensemble_selection.main([str(selected), "--candidates", f"{out}:main", "--steps", "3", "--threads", "1",
                             "--target", "0.01"])
    alone = pd.read_csv(selected / "candidates.csv")
    assert alone["test_mse"].to_numpy() == pytest.approx(members.to_numpy(), rel=1e-9)
    steps = pd.read_csv(selected / "selection.csv")
    assert steps.loc[steps["chosen"], "val_mse"].item() == steps["val_mse"].min()
    assert steps["val_mse"].iloc[0] == pytest.approx(alone["val_mse"].min())
    assert (selected / "selection.png").is_file()
    cached = sorted(p.name for p in (selected / "runs").glob("*.npz"))  # the queries once, then one per candidate
    assert len(cached) == 3 and cached[-1] == "queries.npz"
    with pytest.raises(SystemExit, match="no results.csv"):
        ensemble_selection.main([str(selected), "--candidates", str(tmp_path)])
    # the best async cell on validation, saved so that one command recomputes its test MSE
    save_best.main([str(out)])
    best = df[(df["model"] == "async") & (df["switch"] == "none")].sort_values("best_val_mse").iloc[0]
    assert best["cell_id"] in (out / "best" / "README.md").read_text()
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # the command writes its run folder (config.yaml) where it runs
    cli.main(["test", "--config", str(out / "best" / "config.yaml"), "--ckpt_path", str(out / "best" / "model.ckpt"),
              "--trainer.logger", "false"])
    printed = capsys.readouterr().out
    assert f"{best['test_mse']:.6f}"[:7] in printed.replace("│", " "), printed
    # members from more blocks (--also FOLDER:BLOCK); a cell whose run checkpoint is gone is read
    # from the folder's saved best model
    (out / "runs" / best["cell_id"] / "best.ckpt").unlink()
    ensemble.main([str(out), "--block", "floor", "--threads", "1", "--also", f"{out}:main"])
    scored = pd.read_csv(out / "ensemble.csv")
    assert best["cell_id"] in scored["member"].tolist() and scored["member"].iloc[-1] == "mean of 2"
    with pytest.raises(SystemExit, match="switched attention during training cannot be members"):
        ensemble.main([str(out), "--block", "switch", "main", "--threads", "1"])


def test_grid_mistakes_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="unknown models"):
        run.expand({"blocks": [block("x", model="gru")]})
    with pytest.raises(ValueError, match="unknown settings"):
        run.expand({"defaults": {"epochs": 3}, "blocks": [block("x")]})
    with pytest.raises(ValueError, match="with other settings"):
        run.expand({"blocks": [block("a"), {**block("b"), "settings": {"lr": 0.1}}]})
    cells = run.expand({"blocks": [block("a", seed=[0, 1])]})
    assert [c["attention"] for c in cells] == ["softmax", "continuous"] * 2 and cells[0]["seed"] == 0


def test_ema_cells_validate_checkpoint_and_test_the_weights_average(tmp_path):
    from benchmarks.physionet import cell as physionet_cell
    from ts_continuum.training.query_module import QueryForecastingModule

    base = {**TINY, "model": "async", "attention": "softmax", "pos_encoding": "rope", "history_keep": 1.0,
            "switch": "none", "seed": 0}
    plain = physionet_cell.run_cell(base, tmp_path / "plain")
    one_step = physionet_cell.run_cell({**base, "ema_decay": 0.0}, tmp_path / "zero")  # the average is the weights
    averaged = physionet_cell.run_cell({**base, "ema_decay": 0.9}, tmp_path / "ema")
    assert one_step["test_mse"] == plain["test_mse"]
    assert averaged["test_mse"] != plain["test_mse"]
    # begun at epoch 1, the average still holds the initial weights when epoch 0 is validated
    late = physionet_cell.run_cell({**base, "ema_decay": 0.0, "ema_start_epoch": 1}, tmp_path / "late")
    late_curve, plain_curve = json.loads(late["val_curve"]), json.loads(plain["val_curve"])
    assert late_curve[0] > plain_curve[0] and late_curve[1] == plain_curve[1]
    # the kept checkpoint holds the average, and the average is what validation scored
    dm = physionet_cell.data_module({**physionet_cell.SETTINGS, **base})
    checkpoint = torch.load(tmp_path / "ema" / "best.ckpt", map_location="cpu", weights_only=False)
    scores = {}
    for key in ("state_dict", "current_model_state"):
        module = QueryForecastingModule(physionet_cell.build_model({**physionet_cell.SETTINGS, **base}, dm))
        module.load_state_dict(checkpoint[key])
        scores[key] = physionet_cell.evaluate(module, dm.val_dataloader(), dm.n_variables)["mse"]
    assert scores["state_dict"] == pytest.approx(averaged["best_val_mse"], rel=1e-6)
    assert scores["current_model_state"] != pytest.approx(averaged["best_val_mse"], rel=1e-6)


def test_a_cell_trains_on_the_global_variable_weighting(tmp_path):
    from benchmarks.physionet import cell as physionet_cell

    base = {**TINY, "model": "async", "attention": "softmax", "pos_encoding": "rope", "history_keep": 1.0,
            "switch": "none", "seed": 0}
    per_batch = physionet_cell.run_cell({**base, "weighting": "variable"}, tmp_path / "batch")
    global_ = physionet_cell.run_cell({**base, "weighting": "variable-global"}, tmp_path / "global")
    assert np.isfinite(global_["test_mse"]) and global_["test_mse"] != per_batch["test_mse"]
