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
from lightning.pytorch.utilities import rank_zero_warn
from matplotlib.figure import Figure

CSV, PNG = "learning_curve.csv", "learning_curve.png"


def scalars(metrics: dict) -> dict[str, float]:
    """Logged scalars as floats, without Lightning's ``_step``/``_epoch`` copies of ``train_loss``."""
    return {k: float(v) for k, v in metrics.items()
            if isinstance(v, torch.Tensor) and v.numel() == 1 and not k.endswith(("_step", "_epoch"))}


class LearningCurve(Callback):
    """One row per training epoch: ``epoch`` (from 0), the epoch's mean ``train_loss``, that epoch's
    validation metrics (``val_mse``, ``val_mae``; NaN without validation or in an epoch that did not
    validate; with several validations per epoch, its last), the optimiser's learning rate when the
    epoch ends (``lr``) and the epoch's wall time, validation included (``seconds``). Values are
    those of process 0 in a multi-process fit, as in its logs.

    A resumed fit records the epochs it trains (the earlier run's folder holds its own curve): an
    epoch resumed part-way has NaN ``seconds`` (it started in the earlier process), and one in which
    this process ran no training batch (resumed at its end) is not recorded again."""

    def __init__(self):
        self.rows: list[dict[str, float]] = []
        self._val: dict[str, float] = {}
        self._start: float | None = None
        self._trained = False

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start, self._val = time.perf_counter(), {}

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args) -> None:
        self._trained = True

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._val = {k: v for k, v in scalars(trainer.callback_metrics).items() if k.startswith("val_")}

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._trained:
            train = {k: v for k, v in scalars(trainer.callback_metrics).items() if k.startswith("train_")}
            lr = trainer.optimizers[0].param_groups[0]["lr"] if trainer.optimizers else float("nan")
            seconds = float("nan") if self._start is None else time.perf_counter() - self._start
            self.rows.append({"epoch": trainer.current_epoch, **train, **self._val, "lr": float(lr),
                              "seconds": seconds})
        self._start, self._val, self._trained = None, {}, False


class LearningCurveWriter(LearningCurve):
    """For the CLI: ``learning_curve.csv`` in the run folder after every epoch (an interrupted fit
    keeps what it trained), ``learning_curve.png`` beside it when fit ends. Process 0 only; a remote
    run folder gets neither. A failure to write warns: it must not end a fit that trained."""

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        self._write(trainer, pl_module, figure=False)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(trainer, pl_module, figure=True)

    def _write(self, trainer: L.Trainer, pl_module: L.LightningModule, figure: bool) -> None:
        folder = trainer.log_dir
        if not trainer.is_global_zero or not self.rows or folder is None or not Path(folder).is_dir():
            return
        try:
            curve = learning_curve_frame(self.rows)
            curve.to_csv(Path(folder) / CSV, index=False)
            if figure:
                loss = str(pl_module.hparams.get("loss", ""))
                plot_learning_curve(curve, loss, model_title(pl_module)).savefig(Path(folder) / PNG, dpi=120)
        except Exception as error:  # the fit's results matter more than its figure
            rank_zero_warn(f"could not write the learning curve into {folder}: {error}")


def model_title(pl_module: L.LightningModule) -> str:
    """"PatchTST, continuous attention": what the CLI's figures name their model by."""
    model = getattr(pl_module, "model", pl_module)
    attention = getattr(model, "config", {}).get("attention")
    return type(model).__name__ + (f", {attention} attention" if attention else "")


def learning_curve_frame(rows: list[dict]) -> pd.DataFrame:
    """``LearningCurve`` rows (or their saved copy) as a frame: ``epoch``, ``train_loss``, validation
    metrics if any, ``lr``, ``seconds``; an epoch without validation holds NaN there."""
    frame = pd.DataFrame.from_records(rows).astype(float)
    middle = ["train_loss", *(c for c in frame.columns if c not in ("epoch", "train_loss", "lr", "seconds"))]
    return frame.reindex(columns=["epoch", *middle, "lr", "seconds"]).astype({"epoch": int})


def plot_learning_curve(curve: pd.DataFrame, loss: str, title: str) -> Figure:
    """Training loss and validation MSE per epoch, the epoch of the lowest validation MSE marked (the
    one whose weights ``Forecaster`` keeps when it validates once an epoch, and the CLI's best
    checkpoint among this run's epochs when it monitors val_mse), over the learning rate. Epochs are
    counted from 1 here (from 0 in the frame)."""
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
