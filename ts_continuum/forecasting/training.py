"""Running Lightning for the Forecaster: the Trainer, early stopping, best weights kept in memory.

Nothing is written to the user's working directory unless asked: the Trainer's root directory is a
temporary one (removed after fit) unless ``default_root_dir`` is given, and the best validation
weights are restored from memory, so early stopping needs no checkpoint files.
"""

from __future__ import annotations

import tempfile
import warnings

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping
from torch.utils.data import DataLoader

MONITOR = "val_mse"


class BestWeights(Callback):
    """Remembers the weights of the best validation epoch and restores them when fitting ends."""

    def __init__(self, monitor: str = MONITOR):
        self.monitor, self.best, self.state = monitor, float("inf"), None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if trainer.sanity_checking or value is None or not float(value) < self.best:
            return
        self.best = float(value)
        self.state = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.state is not None:
            pl_module.load_state_dict(self.state)


def run_fit(module: L.LightningModule, trainer_kwargs: dict, train: DataLoader, val: DataLoader | None,
            patience: int) -> dict[str, float]:
    """Fit ``module``; returns the last logged metrics (floats)."""
    kwargs = dict(trainer_kwargs)
    given = kwargs.pop("callbacks", None) or []
    callbacks = [given] if isinstance(given, Callback) else list(given)
    if val is not None:
        callbacks += [EarlyStopping(monitor=MONITOR, patience=patience, mode="min"), BestWeights()]
    with tempfile.TemporaryDirectory(prefix="ts-continuum-") as tmp, warnings.catch_warnings():
        # batches are built whole in the main process: worker processes would only add overhead
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        warnings.filterwarnings("ignore", message=".*validation_step.* but have no .val_dataloader.*")
        kwargs.setdefault("default_root_dir", tmp)
        trainer = L.Trainer(callbacks=callbacks, **kwargs)
        trainer.fit(module, train_dataloaders=train, val_dataloaders=val)
    module.cpu()
    return {k: float(v) for k, v in trainer.callback_metrics.items() if isinstance(v, torch.Tensor) and v.numel() == 1}
