"""Training: a tiny end-to-end fit, checkpoints, the attention switch, configs, schedules, DDP."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import get_args

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch

from ts_continuum.data import ForecastDataModule
from ts_continuum.models import EncoderTransformer, PatchTST
from ts_continuum.training import ForecastingModule
from ts_continuum.training.module import LOSSES, Loss
from ts_continuum.training.cli import ForecastCLI

ROOT = Path(__file__).resolve().parents[1]


def tiny_patchtst(attention="softmax", **kw):
    return PatchTST(n_channels=3, lookback=24, horizon=6, patch_len=8, stride=4, d_model=16, n_heads=2, n_layers=1,
                    d_ff=32, dropout=0.1, attention=attention, attention_backend="torch", **kw)


def fit(module, dm, tmp_path, epochs=2):
    trainer = L.Trainer(accelerator="cpu", max_epochs=epochs, default_root_dir=tmp_path, logger=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, dm)
    return trainer


@pytest.fixture
def dm(tiny_csv):
    return ForecastDataModule(str(tiny_csv), lookback=24, horizon=6, batch_size=16, drop=0.3, regime_seed=0)


def test_a_plain_trainer_at_16_true_is_refused_before_the_first_step(dm, tmp_path):
    """The module's own check, for Trainers that neither the CLI nor Forecaster built."""
    module = ForecastingModule(tiny_patchtst(), lr_schedule="constant")
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, default_root_dir=tmp_path, logger=False,
                        enable_progress_bar=False, enable_model_summary=False, precision="16-true")
    with pytest.raises(ValueError, match="precision='16-true' trains float16 weights"):
        trainer.fit(module, dm)
    assert trainer.global_step == 0


def test_metrics_are_summed_in_float32_under_bf16_true(tiny_csv, tmp_path):
    """'bf16-true' converts the metric states with the model: bfloat16 sums over a test set were
    about 2 % off the score of the same predictions. (Lightning also rounds the batch's targets to
    bfloat16 under 'bf16-true', which moves the score by about 1e-4: hence the tolerance.)"""
    L.seed_everything(0)
    dm = ForecastDataModule(str(tiny_csv), lookback=24, horizon=6, batch_size=16, eval_batch_size=2)  # many sums
    module = ForecastingModule(tiny_patchtst(), lr_schedule="constant")
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=2, default_root_dir=tmp_path,
                        logger=False, enable_progress_bar=False, enable_model_summary=False, precision="bf16-true")
    trainer.fit(module, dm)
    logged = trainer.test(module, dm, verbose=False)[0]
    preds = torch.cat(trainer.predict(module, dm.test_dataloader())).double()
    targets = torch.cat([batch["y"] for batch in dm.test_dataloader()]).double()
    assert preds.shape == targets.shape and len(targets) > 50
    assert logged["test_mse"] == pytest.approx(float(((preds - targets) ** 2).mean()), rel=1e-3)
    assert logged["test_mae"] == pytest.approx(float((preds - targets).abs().mean()), rel=1e-3)


@pytest.mark.parametrize("model", ["patchtst", "encoder"])
def test_tiny_end_to_end_fit_learns_and_tests(dm, tmp_path, model):
    L.seed_everything(0)
    net = tiny_patchtst("continuous") if model == "patchtst" else EncoderTransformer(
        n_channels=3, lookback=24, horizon=6, d_model=16, n_heads=2, n_layers=1, d_ff=32,
        attention="continuous", attention_backend="torch")
    module = ForecastingModule(net, lr=3e-3, lr_schedule="constant")
    before = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False).validate(module, dm, verbose=False)
    trainer = fit(module, dm, tmp_path, epochs=3)
    after = trainer.validate(module, dm, verbose=False)
    assert after[0]["val_mse"] < before[0]["val_mse"]
    test = trainer.test(module, dm, verbose=False)[0]
    assert set(test) == {"test_mse", "test_mae"} and all(torch.isfinite(torch.tensor(v)) for v in test.values())


def test_a_plain_trainers_hparams_yaml_records_the_model(dm, tmp_path):
    """The model is left out of the saved hyperparameters, so hparams.yaml said nothing of the
    architecture or the attention; load_from_checkpoint must still take the saved ones back."""
    import yaml
    from lightning.pytorch.loggers import CSVLogger

    module = ForecastingModule(tiny_patchtst("continuous"), lr=3e-3, lr_schedule="constant")
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, limit_train_batches=2, limit_val_batches=1,
                        logger=CSVLogger(tmp_path), enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, dm)
    saved = yaml.safe_load(Path(trainer.logger.log_dir, "hparams.yaml").read_text())
    assert saved["model_class"] == "ts_continuum.models.patchtst.PatchTST", saved
    assert saved["model_config"]["attention"] == "continuous" and saved["model_config"]["d_model"] == 16, saved
    assert saved["lr"] == 3e-3 and "model_config" not in module.hparams
    loaded = ForecastingModule.load_from_checkpoint(trainer.checkpoint_callback.best_model_path)
    assert loaded.model.config == module.model.config


def test_lightnings_own_checkpoint_routes_refuse_another_model_or_other_resumed_options(dm, tmp_path):
    """load_from_checkpoint(model=...) and trainer.test/fit(ckpt_path=...) load the weights into
    whatever model was built: revin or sink (no weights of their own) differed without a word, and a
    resumed fit kept the checkpoint's optimiser while logging the new lr."""
    L.seed_everything(0)
    module = ForecastingModule(tiny_patchtst(), lr=3e-3, lr_schedule="constant")
    trainer = fit(module, dm, tmp_path, epochs=1)
    path = tmp_path / "trained.ckpt"
    trainer.save_checkpoint(path)
    batch = next(iter(dm.test_dataloader()))
    with torch.no_grad():
        want = module.eval()(batch)
        rebuilt = ForecastingModule.load_from_checkpoint(path).eval()  # no model=: rebuilt from the file
        torch.testing.assert_close(rebuilt(batch), want)
        dropout = ForecastingModule.load_from_checkpoint(path, model=tiny_patchtst(head_dropout=0.3)).eval()
        torch.testing.assert_close(dropout(batch), want)  # evaluation does not use dropout
    other = "sink: given 'repeat' (checkpoint: 'zero'), revin: given False (checkpoint: True)"
    with pytest.raises(ValueError, match=re.escape(other) + ".*from_checkpoint"):
        ForecastingModule.load_from_checkpoint(path, model=tiny_patchtst(revin=False, sink="repeat"))
    plain = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
    with pytest.raises(ValueError, match="attention: given 'continuous' \\(checkpoint: 'softmax'\\)"):
        plain.test(ForecastingModule(tiny_patchtst("continuous")), dm, ckpt_path=path, verbose=False)
    resumed = L.Trainer(accelerator="cpu", max_epochs=2, logger=False, enable_progress_bar=False,
                        default_root_dir=tmp_path)
    mixed = r"mix two recipes: loss='mae' \(checkpoint 'mse'\), lr=0.0001 \(checkpoint 0.003\)"
    with pytest.raises(ValueError, match=mixed):
        resumed.fit(ForecastingModule(tiny_patchtst(), lr=1e-4, loss="mae", lr_schedule="constant"), dm,
                    ckpt_path=path)
    fit_same = L.Trainer(accelerator="cpu", max_epochs=2, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=tmp_path)
    fit_same.fit(ForecastingModule(tiny_patchtst(), lr=3e-3, lr_schedule="constant"), dm, ckpt_path=path)
    assert fit_same.current_epoch == 2


def test_a_checkpoint_keeps_the_scaling_it_was_trained_with(tiny_csv, tmp_path):
    """The scaler was refitted on whatever the file held when a checkpoint was evaluated: the model
    then saw inputs scaled otherwise than in training, without a word."""
    csv = tmp_path / "series.csv"
    df = pd.read_csv(tiny_csv)
    df.to_csv(csv, index=False)
    L.seed_everything(0)
    dm = ForecastDataModule(str(csv), lookback=24, horizon=6, batch_size=16)
    trainer = fit(ForecastingModule(tiny_patchtst(), lr_schedule="constant"), dm, tmp_path, epochs=1)
    path = tmp_path / "trained.ckpt"
    trainer.save_checkpoint(path)
    mean, scale = dm.scaler.mean[0].copy(), dm.scaler.std[0].copy()
    df.assign(a=df["a"] + 5.0).to_csv(csv, index=False)  # the file changes after training
    later = ForecastDataModule(str(csv), lookback=24, horizon=6, batch_size=16)
    tester = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, default_root_dir=tmp_path)
    changed = "no longer scale as when the checkpoint was trained.*checkpoint's scaling is used"
    with pytest.warns(UserWarning, match=changed):
        tester.test(ForecastingModule(tiny_patchtst(), lr_schedule="constant"), later, ckpt_path=path, verbose=False)
    np.testing.assert_allclose(later.scaler.mean[0], mean)
    np.testing.assert_allclose(later.splits["test"].values, ((later.frame.values - mean) / scale).astype(np.float32),
                               rtol=1e-6, atol=1e-6)
    df.to_csv(csv, index=False)  # the file as trained on again
    same = ForecastDataModule(str(csv), lookback=24, horizon=6, batch_size=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the unchanged data: silent
        same.setup()
        same.load_state_dict(dm.state_dict())
        # other data (a model trained on one series scored on another) keeps its own scaling
        pd.read_csv(tiny_csv).assign(a=lambda d: d["a"] * 3.0 + 7.0).to_csv(tmp_path / "other.csv", index=False)
        other = ForecastDataModule(str(tmp_path / "other.csv"), lookback=24, horizon=6, batch_size=16)
        own = other.scaler.mean[0].copy()
        other.load_state_dict(dm.state_dict())
        np.testing.assert_allclose(other.scaler.mean[0], own)
        assert not np.allclose(own, mean)
    with pytest.raises(ValueError, match=r"trained on the channels \['a', 'b', 'c'\].*columns="):
        ForecastDataModule(str(csv), lookback=24, horizon=6, columns=["b", "a"]).load_state_dict(dm.state_dict())


def test_the_prediction_writer_labels_a_plain_trainers_forecasts_in_the_datas_units(dm, tmp_path):
    from ts_continuum.training import PredictionWriter

    L.seed_everything(0)
    module = ForecastingModule(tiny_patchtst(), lr_schedule="constant")
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, default_root_dir=tmp_path,
                        callbacks=[PredictionWriter()])
    scaled = torch.cat(trainer.predict(module, datamodule=dm))
    written = pd.read_csv(Path(trainer.log_dir) / "predictions.csv")
    assert len(written) == scaled.shape[0] * scaled.shape[1]
    want = dm.scaler.inverse(scaled.reshape(-1, scaled.shape[-1]).numpy())
    np.testing.assert_allclose(written[dm.channel_names].to_numpy(), want, rtol=1e-5, atol=1e-5)


def test_a_model_built_for_other_windows_than_the_data_module_is_named_before_training(dm, tmp_path):
    module = ForecastingModule(PatchTST(n_channels=3, lookback=24, horizon=12, patch_len=8, stride=4, d_model=8,
                                        n_heads=2, n_layers=1, d_ff=16, attention_backend="torch"))
    with pytest.raises(ValueError, match=r"horizon 12 \(data module: 6\).*data module's lookback, horizon"):
        fit(module, dm, tmp_path)


def test_checkpoint_round_trip_and_attention_switch(dm, tmp_path):
    L.seed_everything(0)
    module = ForecastingModule(tiny_patchtst("softmax"), lr=3e-3, lr_schedule="constant")
    trainer = fit(module, dm, tmp_path, epochs=1)
    path = tmp_path / "softmax.ckpt"
    trainer.save_checkpoint(path)
    batch = next(iter(dm.test_dataloader()))
    module.eval()
    with torch.no_grad():
        want = module(batch)

    same = ForecastingModule.from_checkpoint(path).eval()
    with torch.no_grad():
        torch.testing.assert_close(same(batch), want)

    with pytest.raises(ValueError, match=r"d_model=32 builds a model whose weights differ in shape"):
        ForecastingModule.from_checkpoint(path, d_model=32)
    switched = ForecastingModule.from_checkpoint(path, attention="continuous").eval()
    assert switched.model.config["attention"] == "continuous"
    with torch.no_grad():
        got = switched(batch)
    assert torch.isfinite(got).all() and not torch.allclose(got, want)
    # continue training with continuous attention, then switch back
    fit(switched, dm, tmp_path / "cont", epochs=1)
    switched.set_attention("softmax")
    switched.eval()
    with torch.no_grad():
        assert torch.isfinite(switched(batch)).all()


def test_a_checkpoint_written_by_the_cli_switches_attention(tiny_csv, tmp_path, monkeypatch):
    """LightningCLI saves its own entries (e.g. "_instantiator") among the hyperparameters."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    ForecastCLI(ForecastingModule, ForecastDataModule, args=[
        "fit", "--config", str(ROOT / "configs" / "quickstart.yaml"), "--data.dataset", str(tiny_csv),
        "--data.lookback", "24", "--data.horizon", "6", "--data.batch_size", "16",
        "--model.model.init_args.patch_len", "8", "--model.model.init_args.stride", "4",
        "--model.model.init_args.n_layers", "1", "--model.model.init_args.attention_backend", "torch",
        "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2", "--trainer.enable_progress_bar", "false",
        "--test_after_fit", "false"])
    (path,) = (tmp_path / "runs").rglob("best-*.ckpt")
    assert "_instantiator" in torch.load(path, weights_only=False)["hyper_parameters"]
    module = ForecastingModule.from_checkpoint(path, attention="softmax")
    assert module.model.config["attention"] == "softmax" and module.hparams.lr == 0.001


def test_checkpoint_without_model_config_is_refused(tmp_path):
    path = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}}, path)
    with pytest.raises(ValueError, match="not written by ForecastingModule"):
        ForecastingModule.from_checkpoint(path)


def test_type3_schedule_matches_patchtst():
    module = ForecastingModule(tiny_patchtst(), lr=1e-4, lr_schedule="type3")
    sched = module.configure_optimizers()["lr_scheduler"]["scheduler"]
    lrs = []
    for _ in range(7):
        lrs.append(sched.get_last_lr()[0])
        sched.optimizer.step()
        sched.step()
    expected = [1e-4] * 4 + [1e-4 * 0.9, 1e-4 * 0.81, 1e-4 * 0.729]
    assert lrs == pytest.approx(expected)


@pytest.mark.parametrize("kw,match", [
    (dict(loss="l3"), "loss must be one of"), (dict(lr_schedule="step"), "lr_schedule"),
    (dict(pct_start=0.4), "pct_start=0.4 has no effect with lr_schedule='type3'"),
    (dict(pct_start=0.4, lr_schedule="cosine"), "only 'onecycle' warms up"),
    (dict(pct_start=1.5, lr_schedule="onecycle"), "pct_start must be a fraction"),
])
def test_bad_training_options(kw, match):
    with pytest.raises(ValueError, match=match):
        ForecastingModule(tiny_patchtst(), **kw)


def test_pct_start_is_taken_by_onecycle_and_the_choices_match_the_implementations():
    module = ForecastingModule(tiny_patchtst(), lr_schedule="onecycle", pct_start=0.4)
    assert module.hparams.pct_start == 0.4
    assert set(get_args(Loss)) == set(LOSSES)  # the CLI's choices are the losses that exist


# grid-model configs; the observation-set configs (configs/physionet2012) are fitted end to end in
# tests/test_physionet_cli.py
CONFIGS = sorted(p for p in (ROOT / "configs").rglob("*.yaml") if p.parent.name != "physionet2012")


@pytest.mark.parametrize("config", CONFIGS, ids=[str(p.relative_to(ROOT / "configs")) for p in CONFIGS])
@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_every_config_instantiates(config, attention, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    cli = ForecastCLI(
        ForecastingModule, ForecastDataModule, run=False,
        args=["--config", str(config), "--model.model.init_args.attention", attention],
    )
    model = cli.model.model
    assert model.config["attention"] == attention
    dm = cli.datamodule
    assert (model.lookback, model.horizon, model.n_channels) == (dm.lookback, dm.horizon, dm.n_channels)


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_matches_a_single_process(tiny_csv, tmp_path):
    """Training and predict: two processes train the same weights as one, and their per-rank
    prediction files hold every test window exactly once, with the single process's forecasts."""
    script = Path(__file__).with_name("ddp_fit.py")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for devices in (1, 2):
        subprocess.run([sys.executable, str(script), str(tiny_csv), str(tmp_path / f"w{devices}.pt"), str(devices)],
                       check=True, env=env, cwd=tmp_path, timeout=600, capture_output=True)
    single, ddp = torch.load(tmp_path / "w1.pt"), torch.load(tmp_path / "w2.pt")
    L.seed_everything(0)
    start = EncoderTransformer(n_channels=3, lookback=24, horizon=6, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                               dropout=0.0).state_dict()
    moved = max((single[k].float() - start[k].float()).abs().max() for k in single if k in start)
    assert moved > 1e-3, "training must have changed the weights"
    for k in single:
        torch.testing.assert_close(ddp[k], single[k], atol=2e-5, rtol=1e-4)

    one = pd.read_csv(tmp_path / "w1" / "predictions.csv")
    ranks = sorted((tmp_path / "w2").glob("predictions*.csv"))
    assert [p.name for p in ranks] == ["predictions-rank0.csv", "predictions-rank1.csv"]
    two = pd.concat([pd.read_csv(p) for p in ranks])
    assert not two.duplicated(["window", "step"]).any(), "a window predicted by both ranks"
    assert one["window"].nunique() > 2 and set(two["window"]) == set(one["window"])
    key = ["window", "step"]
    one, two = one.sort_values(key).reset_index(drop=True), two.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(two, one, atol=1e-4, rtol=1e-4)


def test_missing_targets_take_no_part_in_loss_and_metrics():
    module = ForecastingModule(tiny_patchtst(), lr=1e-3)
    pred = torch.zeros(2, 6, 3)
    y = torch.ones(2, 6, 3)
    y_mask = torch.zeros(2, 6, 3, dtype=torch.bool)
    y_mask[0, 0, 0] = True
    y[~y_mask] = float("nan")  # absent targets may hold anything
    p, t = module._observed(pred, {"y": y, "y_mask": y_mask})
    assert p.shape == (1,) and module.loss_fn(p, t).item() == 1.0


def test_the_learning_curve_of_a_resumed_fit_records_only_epochs_it_trained():
    """Lightning skips on_train_epoch_start for an epoch resumed part-way or at its end, and still calls
    on_train_epoch_end: such an epoch gets NaN seconds, or no row when this process trained none of it."""
    from types import SimpleNamespace

    from ts_continuum.training.learning_curve import LearningCurve, learning_curve_frame

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    trainer = SimpleNamespace(sanity_checking=False, optimizers=[opt], current_epoch=3,
                              callback_metrics={"train_loss": torch.tensor(2.0), "val_mse": torch.tensor(1.0)})
    curve = LearningCurve()
    curve.on_train_epoch_end(trainer, None)  # resumed at the end of epoch 3: nothing trained here
    assert curve.rows == []
    trainer.current_epoch = 4  # resumed part-way through epoch 4
    curve.on_train_batch_end(trainer, None)
    curve.on_validation_end(trainer, None)
    curve.on_train_epoch_end(trainer, None)
    trainer.current_epoch = 5  # a whole epoch
    curve.on_train_epoch_start(trainer, None)
    curve.on_train_batch_end(trainer, None)
    curve.on_train_epoch_end(trainer, None)  # did not validate
    frame = learning_curve_frame(curve.rows)
    assert frame["epoch"].tolist() == [4, 5] and frame["lr"].tolist() == [0.5, 0.5]
    assert frame["val_mse"].tolist()[0] == 1.0 and pd.isna(frame["val_mse"].tolist()[1])
    assert pd.isna(frame.loc[0, "seconds"]) and frame.loc[1, "seconds"] >= 0
