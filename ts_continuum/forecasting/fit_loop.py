"""The training loop behind ``Forecaster.fit``: the Lightning Trainer, early stopping, best weights kept in memory,
and the learning curve (``training/learning_curve.py``).

Nothing is written to the user's working directory unless asked: the Trainer's root directory is a
temporary one (removed after fit) unless ``default_root_dir`` is given, and the best validation
weights are restored from memory, so early stopping needs no checkpoint files. The metrics reported
are those of the weights kept: with validation, the best epoch's, not the last one's.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import tempfile
import warnings

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping
from torch.utils.data import DataLoader

from .. import allocator
from ..training.learning_curve import LearningCurve
from .forecast_errors import TrainingDivergedError
from ..training.learning_curve import scalars as _scalars

MONITOR = "val_mse"


class BestWeights(Callback):
    """Remembers the weights of the best validation epoch and restores them when fitting ends; keeps
    that epoch's index and metrics, since those describe the model that fit() returns."""

    def __init__(self, monitor: str = MONITOR):
        self.monitor, self.best, self.state = monitor, float("inf"), None
        self.epoch: int | None = None
        self.metrics: dict[str, float] = {}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or value is None or not float(value) < self.best:
            return
        self.best, self.epoch = float(value), trainer.current_epoch
        self.state = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}
        self.metrics = _scalars(trainer.callback_metrics)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.current_epoch != self.epoch:
            return
        # the epoch's mean training loss exists only now; validation figures stay those of the kept weights
        kept = {k: v for k, v in self.metrics.items() if k.startswith("val_")}
        self.metrics = {**_scalars(trainer.callback_metrics), **kept}

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.state is not None:
            pl_module.load_state_dict(self.state)


def fit_metrics(last: dict[str, float], epochs: int, best: BestWeights | None) -> dict[str, float]:
    """The kept weights' metrics under their logged names (``train_loss``, ``val_mse``, ...) and
    ``epochs`` trained; with validation also ``best_epoch`` (counted from 0) and the last epoch's
    figures as ``last_<name>``."""
    if best is None or best.epoch is None:  # no validation: the last epoch's weights are kept
        return {**last, "epochs": epochs}
    return {**best.metrics, "best_epoch": best.epoch, "epochs": epochs, **{f"last_{k}": v for k, v in last.items()}}


def check_finite_weights(module: L.LightningModule, curve: list[dict[str, float]]) -> None:
    """Refuse weights that are not finite (a fit that diverged with no earlier validated epoch to fall
    back on): such a model would forecast only NaN."""
    if all(bool(torch.isfinite(v).all()) for v in module.state_dict().values() if v.is_floating_point()):
        return
    bad = [row for row in curve if not math.isfinite(row.get("train_loss", math.nan))]
    where = ""
    if bad:
        where = f" (the mean training loss was {bad[0].get('train_loss', math.nan)} in epoch {bad[0]['epoch']})"
    raise TrainingDivergedError(
        f"training diverged{where}: the weights are not finite, so the model would forecast only NaN and "
        f"is not kept. Lower the learning rate (lr={module.hparams.lr:g}), clip gradients "
        "(gradient_clip_val=1.0) or look for extreme values in the data.")


@contextlib.contextmanager
def seeded(seed: int):
    """Seed Python, NumPy and torch for one fit (weights, shuffling, dropout), then give the caller's
    generators back: a loop that draws random numbers between fits (bootstrap samples, noise) must
    not get the same draws after every fit."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    variables = {name: os.environ.get(name) for name in ("PL_GLOBAL_SEED", "PL_SEED_WORKERS")}  # seed_everything's
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    try:
        with torch.random.fork_rng(devices=cuda):
            L.seed_everything(seed, verbose=False)
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        for name, value in variables.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def quiet_lightning():
    """Lightning's INFO lines on every fit (accelerators found, a tip, why fit stopped) are noise in a
    library call, the more so once per cross-validation fold; its warnings and the progress bar stay."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(max(logging.WARNING, logger.level))
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def run_fit(module: L.LightningModule, trainer_kwargs: dict, train: DataLoader, val: DataLoader | None,
            patience: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Fit ``module``; returns ``fit_metrics`` (floats; epoch counts as ints) and the learning curve's rows."""
    allocator.keep_freed_memory()  # every route to training: fit, cross_validation, calibration (issue 47)
    kwargs = dict(trainer_kwargs)
    given = kwargs.pop("callbacks", None) or []
    curve = LearningCurve()
    callbacks = ([given] if isinstance(given, Callback) else list(given)) + [curve]
    best = None
    if val is not None:
        best = BestWeights()
        callbacks += [EarlyStopping(monitor=MONITOR, patience=patience, mode="min"), best]
    with tempfile.TemporaryDirectory(prefix="ts-continuum-") as tmp, warnings.catch_warnings(), quiet_lightning():
        # batches are built whole in the main process: worker processes would only add overhead
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*validation_step.* but have no .val_dataloader.*")
        kwargs.setdefault("default_root_dir", tmp)
        trainer = L.Trainer(callbacks=callbacks, **kwargs)
        trainer.fit(module, train_dataloaders=train, val_dataloaders=val)
    module.cpu()
    return fit_metrics(_scalars(trainer.callback_metrics), trainer.current_epoch, best), curve.rows
