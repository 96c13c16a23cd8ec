"""``ts-continuum fit --config configs/physionet2012/...`` end to end, on a tiny frame of the same form."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from test_physionet import tiny_frame

from ts_continuum.training.cli import main
from ts_continuum.training.query_cli import is_query_model, wants_query_cli
from ts_continuum.training.query_module import QueryForecastingModule

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs" / "physionet2012").glob("*.yaml"))


@pytest.fixture
def tiny_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    data = tmp_path / "stays.csv"
    tiny_frame().to_csv(data, index=False)
    overrides = {"trainer": {"max_epochs": 1, "enable_progress_bar": False, "enable_model_summary": False,
                             "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                                        "init_args": {"save_dir": str(tmp_path / "runs"), "name": "tiny"}}},
                 "data": {"data": str(data), "batch_size": 4},
                 "model": {"model": {"init_args": {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 16,
                                                   "attention_backend": "torch"}}}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(overrides))
    return path


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_each_physionet_config_fits_and_tests_end_to_end(config, tiny_run, tmp_path, capsys):
    main(["fit", "--config", str(config), "--config", str(tiny_run)])
    out = capsys.readouterr().out
    assert "test_mse" in out and "test_mae" in out
    (run,) = (tmp_path / "runs" / "tiny").glob("version_*")
    metrics = pd.read_csv(run / "metrics.csv")
    assert metrics["test_mse"].notna().any() and metrics["val_mse"].notna().any()
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    module = QueryForecastingModule.from_checkpoint(str(best))
    recipe = yaml.safe_load(config.read_text())["model"]
    assert type(module.model).__name__ == recipe["model"]["class_path"].rsplit(".", 1)[1]
    assert module.weighting == recipe.get("weighting", "query")  # the training recipe survives the checkpoint
    # evaluating the checkpoint again with the run's own config
    main(["test", "--config", str(run / "config.yaml"), "--ckpt_path", str(best),
          "--trainer.logger.init_args.version", "again"])
    assert "test_mse" in capsys.readouterr().out


def test_the_command_picks_the_observation_set_cli_by_the_model_class(tmp_path):
    assert is_query_model("ts_continuum.models.AsyncTransformer") and not is_query_model("ts_continuum.models.PatchTST")
    assert not is_query_model("no.such.Model") and not is_query_model(None)
    assert wants_query_cli(["fit", "--config", str(CONFIGS[0])])
    assert not wants_query_cli(["fit", "--config", str(ROOT / "configs" / "quickstart.yaml")])
    assert not wants_query_cli(["fit", "--config", str(CONFIGS[0]), "--model.model", "ts_continuum.models.PatchTST"])
