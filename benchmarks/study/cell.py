"""One cell of the study: train one model on one dataset/horizon/regime/seed and test it.

A cell is a flat dict (model, attention, pos_encoding, dataset, horizon, regime, seed) plus the
training budget; everything needed to rerun it is in the dict, which is recorded with the result.
"""

from __future__ import annotations

import inspect
import json
import shutil
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from benchmarks import machine
from ts_continuum import allocator
from ts_continuum.data import ForecastDataModule
from ts_continuum.models import build_model
from ts_continuum.training import ForecastingModule
from ts_continuum.training.learning_curve import LearningCurve

# OneCycle's warm-up share when neither the config nor the grid gives one: the module's own default.
PCT_START = inspect.signature(ForecastingModule.__init__).parameters["pct_start"].default

# name -> (fraction of inputs dropped, fill dropped inputs by interpolation)
REGIMES = {
    "regular": (0.0, False),
    "drop30": (0.3, False),
    "drop60": (0.6, False),
    "drop30-interp": (0.3, True),
    "drop60-interp": (0.6, True),
}
KEY_FIELDS = ("model", "attention", "pos_encoding", "dataset", "horizon", "regime", "seed")
# The settings run_cell reads besides the key fields: these a cell must give, the others have the
# value run_cell uses when a cell lacks them. The runner rejects any other key in a grid (run_cell
# would ignore it) and compares recorded configs over these.
REQUIRED = ("model_args", "lr", "lr_schedule", "lookback", "batch_size", "max_epochs", "patience")
OPTIONAL = {"eval_batch_size": 256, "pct_start": PCT_START, "accelerator": "cpu",
            "limit_train_batches": 1.0, "limit_val_batches": 1.0}


def cell_id(cell: dict) -> str:
    return "_".join(str(cell[k]) for k in KEY_FIELDS)


class TestCurve(Callback):
    """Test MSE of the model after every epoch, for the report only (no decision reads it).

    Why: early stopping picks each run's checkpoint on validation MSE, and when validation and test
    disagree, two runs stopped at different epochs differ in test MSE for that reason alone. The
    curves compare the attentions epoch by epoch. Costs one forward pass over the test windows per
    epoch (as many as the validation pass). Same mean as the test metric: every target observed.
    """

    def __init__(self, datamodule: ForecastDataModule):
        self.datamodule = datamodule
        self.test_mse: list[float] = []

    def on_validation_epoch_end(self, trainer, module):
        if trainer.sanity_checking:
            return
        total, count = 0.0, 0
        with torch.inference_mode():  # the module is in eval mode during validation
            for batch in self.datamodule.test_dataloader():
                batch = {k: v.to(module.device) for k, v in batch.items()}
                pred, target = module._observed(module(batch), batch)
                total += float(((pred.float() - target.float()) ** 2).sum())
                count += target.numel()
        self.test_mse.append(total / count)


def run_cell(cell: dict, out_dir: Path) -> dict:
    """Train and test one cell; returns the result row (metrics, epochs, timings)."""
    allocator.keep_freed_memory()  # in whichever process trains it (a Ray worker too)
    machine.reset_peak_rss()  # a runner trains cell after cell in one process: each gets its own peak
    out_dir.mkdir(parents=True, exist_ok=True)
    cell = {**OPTIONAL, **cell}
    drop, interpolate = REGIMES[cell["regime"]]
    L.seed_everything(int(cell["seed"]), verbose=False)
    dm = ForecastDataModule(
        cell["dataset"], lookback=int(cell["lookback"]), horizon=int(cell["horizon"]),
        batch_size=int(cell["batch_size"]), eval_batch_size=int(cell["eval_batch_size"]),
        drop=drop, regime_seed=int(cell["seed"]), interpolate=interpolate,
    )
    model = build_model(
        cell["model"], n_channels=dm.n_channels, lookback=dm.lookback, horizon=dm.horizon,
        attention=cell["attention"], pos_encoding=cell["pos_encoding"], **cell["model_args"],
    )
    module = ForecastingModule(model, lr=float(cell["lr"]), lr_schedule=cell["lr_schedule"],
                               pct_start=float(cell["pct_start"]))
    curve = LearningCurve()
    test_curve = TestCurve(dm)
    # Its own folder, emptied first: a cell restarted after an interruption must not find (or be
    # warned about) the checkpoint of the run that was cut.
    ckpt_dir = out_dir / "checkpoint"
    shutil.rmtree(ckpt_dir, ignore_errors=True)
    ckpt = ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor="val_mse", mode="min", save_top_k=1)
    trainer = L.Trainer(
        accelerator=cell["accelerator"], max_epochs=int(cell["max_epochs"]),
        limit_train_batches=cell["limit_train_batches"],
        limit_val_batches=cell["limit_val_batches"],
        callbacks=[curve, test_curve, ckpt,
                   EarlyStopping(monitor="val_mse", mode="min", patience=int(cell["patience"]))],
        logger=CSVLogger(out_dir, name="metrics", version=""), enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, deterministic=False,
    )
    t0 = time.perf_counter()
    trainer.fit(module, dm)
    fit_s = time.perf_counter() - t0
    test = trainer.test(module, dm, ckpt_path=ckpt.best_model_path, verbose=False)[0]
    wall = time.perf_counter() - t0
    # An epoch's seconds include its validation pass (about a tenth of an epoch here: forward only, on a
    # third as many windows) and, from 2026-11-30 on, the test curve's pass of the same size: the column
    # keeps its name, train_s_per_epoch; training cost proper is measured by benchmarks/speed/train_cost.py.
    seconds = [row["seconds"] for row in curve.rows]
    val_mse = [row["val_mse"] for row in curve.rows if "val_mse" in row]
    best_epoch = int(min(range(len(val_mse)), key=val_mse.__getitem__)) if val_mse else -1
    shutil.rmtree(ckpt_dir, ignore_errors=True)  # results are the numbers; keep the disk small
    return {
        "test_mse": test["test_mse"],
        "test_mae": test["test_mae"],
        "best_val_mse": min(val_mse) if val_mse else float("nan"),
        "epochs": len(seconds),
        "best_epoch": best_epoch + 1,
        "train_s_per_epoch": sum(seconds[1:]) / (len(seconds) - 1) if len(seconds) > 1
        else (seconds[0] if seconds else float("nan")),
        "first_epoch_s": seconds[0] if seconds else float("nan"),
        "fit_s": fit_s,
        "wall_s": wall,
        "peak_rss_mb": machine.peak_rss_mb(),
        "threads": torch.get_num_threads(),
        "val_curve": json.dumps([round(v, 5) for v in val_mse]),
        "test_curve": json.dumps([round(v, 5) for v in test_curve.test_mse]),
        "n_params": sum(p.numel() for p in model.parameters()),
    }
