"""``--ckpt_path`` in the ``ts-continuum`` CLI: the checkpoint must be one of ours, its model must be the
one the config builds, a resumed fit cannot change the module's options or its schedule's length.
Tiny runs, with test_cli.py's config and helpers."""

from __future__ import annotations

import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml
from lightning.pytorch.callbacks import ModelCheckpoint

from test_cli import fit, refused, write_tiny_config
from ts_continuum.data import ForecastDataModule
from ts_continuum.models import PatchTST
from ts_continuum.training import ForecastingModule
from ts_continuum.training.cli import ForecastCLI
from ts_continuum.training.module import STEPS_KEY, ResumeError


@pytest.fixture
def config(tiny_csv, tmp_path, monkeypatch) -> Path:
    """test_cli.py's tiny fit config, its CSVLogger writing under ``tmp_path/runs/tiny``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    return write_tiny_config(tmp_path, tiny_csv)


def best_and_last(cli: ForecastCLI) -> tuple[str, str]:
    folder = Path(cli.trainer.checkpoint_callback.best_model_path).parent
    return cli.trainer.checkpoint_callback.best_model_path, str(folder / "last.ckpt")


def run_folders(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "runs" / "tiny").iterdir())


# --- 1. the checkpoint's model is the one the config builds -----------------------------------
def test_a_config_whose_model_differs_from_the_checkpoints_is_refused_before_anything_runs(config, tmp_path):
    best, last = best_and_last(fit(config, "--model.model.init_args.attention", "continuous"))
    own = Path(best).parents[1] / "config.yaml"
    # README's sequence: fit with an option, then evaluate with the same config file; this used to score
    # a softmax model with the continuous weights
    for subcommand, ckpt in (("validate", best), ("test", best), ("predict", best), ("fit", last)):
        message = refused(subcommand, "--config", str(config), "--ckpt_path", ckpt)
        assert "attention: given 'softmax' (checkpoint: 'continuous')" in message, subcommand
        assert f"--config {own}" in message and "from_checkpoint(path, attention=" in message
    # these used to fail in load_state_dict with a long traceback
    cont = ("--model.model.init_args.attention", "continuous")
    for args, item in [(["--model.model.init_args.d_model", "16"], "d_model: given 16 (checkpoint: 8)"),
                       (["--model.model.init_args.pos_encoding", "rope"],
                        "pos_encoding: given 'rope' (checkpoint: 'learned')"),
                       (["--data.horizon", "12"], "horizon: given 12 (checkpoint: 6)"),
                       (["--data.lookback", "48"], "lookback: given 48 (checkpoint: 24)")]:
        message = refused("test", "--config", str(config), "--ckpt_path", best, *cont, *args)
        assert item in message and f"--config {own}" in message and "attention" not in message, args
    assert "--data.horizon" in message  # linked values are set under data
    assert run_folders(tmp_path) == ["version_0"]  # nothing was written
    # an option given on top of the run's own config: the fix is to drop it, not to pass that config
    message = refused("test", "--config", str(own), "--ckpt_path", best, "--model.model.init_args.d_model", "16")
    assert "d_model: given 16 (checkpoint: 8)" in message
    assert "drop the option given on top of the run's config" in message
    # dropout does nothing in evaluation: accepted there; a resumed fit would train another model
    ForecastCLI(args=["validate", "--config", str(own), "--ckpt_path", best, "--model.model.init_args.dropout", "0.1"])
    message = refused("fit", "--config", str(own), "--ckpt_path", last, "--model.model.init_args.dropout", "0.1")
    assert "dropout: given 0.1 (checkpoint: 0.3)" in message and "continue training another model" in message
    # the run's own config rebuilds the model; another attention_backend computes the same
    cli = ForecastCLI(args=["test", "--config", str(own), "--ckpt_path", best,
                            "--model.model.init_args.attention_backend", "auto"])
    assert cli.model.model.config["attention"] == "continuous"


@pytest.mark.parametrize("kind", ["csv", "state_dict", "lightning"])
def test_a_file_that_is_not_a_ts_continuum_checkpoint_is_refused(config, tmp_path, tiny_csv, kind):
    path = tmp_path / f"{kind}.ckpt"
    if kind == "csv":
        path.write_bytes(Path(tiny_csv).read_bytes())  # used to give UnpicklingError
    elif kind == "state_dict":
        torch.save(torch.nn.Linear(2, 2).state_dict(), path)  # used to give KeyError 'pytorch-lightning_version'
    else:  # another LightningModule's checkpoint: no model_class / model_config
        torch.save({"pytorch-lightning_version": L.__version__, "state_dict": {}, "hyper_parameters": {}}, path)
    message = refused("test", "--config", str(config), "--ckpt_path", str(path))
    expected = "cannot be read as a checkpoint" if kind == "csv" else "is not a ts-continuum checkpoint"
    assert expected in message and "written by ts-continuum fit" in message


# --- 2. a resumed fit cannot change the module's options -----------------------------------------
def test_resuming_with_other_module_options_is_refused_and_evaluating_warns(config, tmp_path):
    first = fit(config, "--model.loss", "mae")
    best, last = best_and_last(first)
    own = Path(last).parents[1] / "config.yaml"
    message = refused("fit", "--config", str(config), "--ckpt_path", last, "--model.lr", "0.05")
    assert "lr=0.05 (checkpoint 0.001) cannot take effect" in message
    assert "continues the checkpoint's optimiser" in message
    assert f"--config {own}" in message
    extra = tmp_path / "cosine.yaml"  # a value set in a YAML is given too
    extra.write_text(yaml.safe_dump({"model": {"lr_schedule": "cosine", "weight_decay": 0.01}}))
    message = refused("fit", "--config", str(config), "--config", str(extra), "--ckpt_path", last)
    assert "lr_schedule='cosine' (checkpoint 'type3')" in message and "weight_decay=0.01 (checkpoint 0.0)" in message
    assert run_folders(tmp_path) == ["version_0"]
    # evaluating does not use them: a warning, and the checkpoint's values
    with pytest.warns(UserWarning, match=r"test ignores lr=0.05 \(checkpoint 0.001\)"):
        ForecastCLI(args=["test", "--config", str(config), "--ckpt_path", best, "--model.lr", "0.05"])
    # what the user did not give (the loss here) is the checkpoint's, as before
    second = fit(config, "--ckpt_path", last, "--trainer.max_epochs", "2")
    assert second.model.hparams.loss == "mae" and second.trainer.current_epoch == 2


def test_a_resumed_runs_config_does_not_resume_or_evaluate_the_earlier_checkpoint_again(config, tmp_path):
    """The saved config.yaml is for reuse: a ckpt_path in it would silently resume (or test) the earlier
    run's checkpoint whenever the file is passed back without --ckpt_path."""
    _, last = best_and_last(fit(config))
    resumed = fit(config, "--ckpt_path", last, "--trainer.max_epochs", "2")
    saved = Path(resumed.trainer.log_dir) / "config.yaml"
    assert yaml.safe_load(saved.read_text())["ckpt_path"] is None
    assert "test needs --ckpt_path" in refused("test", "--config", str(saved))
    assert fit(saved, "--trainer.max_epochs", "1").trainer.current_epoch == 1  # a fresh run, not a resume


# --- 3. a resumed onecycle/cosine schedule keeps its length --------------------------------------
@pytest.mark.parametrize("schedule", ["onecycle", "cosine"])
def test_resuming_a_step_schedule_over_more_steps_is_refused(config, tmp_path, schedule):
    _, last = best_and_last(fit(config, "--model.lr_schedule", schedule))
    if schedule == "onecycle":  # as a checkpoint written before the plan was stored: OneCycleLR's own count
        ckpt = torch.load(last, weights_only=False)
        ckpt.pop(STEPS_KEY, None)
        torch.save(ckpt, last)
    # onecycle used to fail deep in torch ("Tried to step 3 times"), cosine to jump to another curve
    message = refused("fit", "--config", str(config), "--ckpt_path", last, "--trainer.max_epochs", "2")
    assert f"{schedule} learning-rate schedule was planned for 2 optimiser steps, but this run would take 4" in message
    assert "max_epochs" in message and "limit_train_batches" in message
    assert run_folders(tmp_path) == ["version_0"]  # the refused run's config.yaml and folder are removed


def python_fit(csv: Path, folder: Path, epochs: int, schedule: str, ckpt_path: str | None = None) -> L.Trainer:
    """A tiny fit in Python (no CLI), 2 optimiser steps an epoch, a checkpoint after every epoch."""
    L.seed_everything(0)
    model = PatchTST(n_channels=3, lookback=24, horizon=6, patch_len=8, stride=4, d_model=8, n_heads=2,
                     n_layers=1, d_ff=16, attention_backend="torch")
    module = ForecastingModule(model, lr=1e-3, lr_schedule=schedule)
    dm = ForecastDataModule(str(csv), lookback=24, horizon=6, batch_size=16)
    trainer = L.Trainer(accelerator="cpu", max_epochs=epochs, limit_train_batches=2, limit_val_batches=1,
                        logger=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[ModelCheckpoint(dirpath=folder, filename="{epoch}", save_top_k=-1)])
    trainer.fit(module, dm, ckpt_path=ckpt_path)
    return trainer


def test_python_resume_refuses_a_longer_onecycle_and_continues_an_interrupted_one(tiny_csv, tmp_path):
    def run(epochs: int, ckpt_path: str | None = None) -> L.Trainer:
        return python_fit(tiny_csv, tmp_path, epochs, "onecycle", ckpt_path)

    run(2)
    interrupted = str(tmp_path / "epoch=0.ckpt")
    with pytest.raises(ResumeError, match="planned for 4 optimiser steps, but this run would take 6"):
        run(3, interrupted)
    assert run(2, interrupted).global_step == 4  # the same settings: the schedule runs to its end


def test_resuming_a_cosine_checkpoint_without_its_length_warns(tiny_csv, tmp_path):
    """Cosine's LambdaLR keeps no length, so a checkpoint written before STEPS_KEY cannot be checked:
    resuming it over another step count used to follow another curve without a word."""
    python_fit(tiny_csv, tmp_path, 1, "cosine")
    old = tmp_path / "epoch=0.ckpt"
    ckpt = torch.load(old, weights_only=False)
    del ckpt[STEPS_KEY]
    torch.save(ckpt, old)
    with pytest.warns(UserWarning, match="predates the record of its schedule's length"):
        python_fit(tiny_csv, tmp_path / "resumed", 3, "cosine", str(old))
