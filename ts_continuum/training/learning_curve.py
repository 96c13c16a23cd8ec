"""The learning curve of a fit: a row per epoch, recorded by a callback, and its figure.

Shared by ``Forecaster`` (``learning_curve_``, ``plot_learning_curve()``) and the ``ts-continuum fit``
command (``learning_curve.csv`` and ``learning_curve.png`` in the run folder), so both answer the
same questions: was the model still improving when training stopped, or over-fitting?
"""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import torch
from lightning.pytorch.callbacks import Callback
from matplotlib.figure import Figure

CSV, PNG = "learning_curve.csv", "learning_curve.png"


def scalars(metrics: dict) -> dict[str, float]:
    """Logged scalars as floats, without Lightning's ``_step``/``_epoch`` copies of ``train_loss``."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, torch.Tensor) and v.numel() == 1 and not k.endswith(("_step", "_epoch"))}


class LearningCurve(Callback):
    """One row per training epoch: ``epoch`` (from 0), the epoch's mean ``train_loss``, that epoch's
    validation metrics (``val_mse``, ``val_mae``; absent without validation or in an epoch that did
    not validate), the learning rate at the epoch's end (``lr``) and its wall time, validation
    included (``seconds``). Values are those of process 0 in a multi-process fit, as in its logs."""

    def __init__(self):
        self.rows: list[dict[str, float]] = []
        self._val: dict[str, float] = {}
        self._start = 0.0

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start, self._val = time.perf_counter(), {}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._val = {k: v for k, v in scalars(trainer.callback_metrics).items() if k.startswith("val_")}

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        train = {k: v for k, v in scalars(trainer.callback_metrics).items() if k.startswith("train_")}
        lr = trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else float("nan")
        self.rows.append({"epoch": trainer.current_epoch, **train, **self._val, "lr": float(lr),
                          "seconds": time.perf_counter() - self._start})


class LearningCurveWriter(LearningCurve):
    """For the CLI: writes ``learning_curve.csv`` and ``learning_curve.png`` into the run folder when
    fit ends (process 0; a remote run folder gets none)."""

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        folder = trainer.log_dir
        if not trainer.is_global_zero or not self.rows or folder is None or not Path(folder).is_dir():
            return
        curve = learning_curve_frame(self.rows)
        curve.to_csv(Path(folder) / CSV, index=False)
        model = getattr(pl_module, "model", pl_module)
        attention = getattr(model, "config", {}).get("attention")
        title = type(model).__name__ + (f", {attention} attention" if attention else "")
        plot_learning_curve(curve, str(pl_module.hparams.get("loss", "")), title).savefig(Path(folder) / PNG, dpi=120)


def learning_curve_frame(rows: list[dict]) -> pd.DataFrame:
    """``LearningCurve`` rows (or their saved copy) as a frame: ``epoch``, ``train_loss``, validation
    metrics if any, ``lr``, ``seconds``; an epoch without validation holds NaN there."""
    frame = pd.DataFrame.from_records(rows).astype(float)
    if frame.empty:
        return pd.DataFrame(columns=["epoch", "train_loss", "lr", "seconds"], dtype=float).astype({"epoch": int})
    middle = [c for c in frame.columns if c not in ("epoch", "lr", "seconds")]
    return frame[["epoch", *middle, "lr", "seconds"]].astype({"epoch": int})


def plot_learning_curve(curve: pd.DataFrame, loss: str, title: str) -> Figure:
    """Training loss and validation MSE per epoch, the epoch of the lowest validation MSE marked (the
    one whose weights ``Forecaster`` keeps, and the CLI's best checkpoint when it monitors val_mse),
    over the learning rate. Epochs are counted from 1 here (from 0 in the frame)."""
    epoch = curve["epoch"].to_numpy() + 1
    fig = Figure(figsize=(8, 5), layout="constrained")
    loss_ax, lr_ax = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    loss_ax.plot(epoch, curve["train_loss"], "o-", ms=3,
                 label=f"training loss ({loss + ', ' if loss else ''}epoch mean)")
    if "val_mse" in curve and curve["val_mse"].notna().any():
        seen = curve["val_mse"].notna().to_numpy()
        loss_ax.plot(epoch[seen], curve["val_mse"][seen], "o-", ms=3, label="validation MSE")
        best = int(epoch[int(np.nanargmin(curve["val_mse"].to_numpy()))])
        loss_ax.axvline(best, ls=":", color="grey", lw=1, label=f"lowest validation MSE: epoch {best}")
    loss_ax.set_ylabel("standardised units")
    loss_ax.grid(alpha=0.3)
    loss_ax.legend(fontsize="small")
    lr_ax.plot(epoch, curve["lr"], "-", color="tab:green")
    lr_ax.set_ylabel("learning rate\n(epoch end)")
    lr_ax.set_xlabel("epoch")
    lr_ax.grid(alpha=0.3)
    lr_ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(f"{title}: learning curve")
    return fig
