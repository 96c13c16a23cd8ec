"""``predict``'s output: the forecasts, in the data's units, written to ``predictions.csv`` in the run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning.pytorch.utilities import rank_zero_info

from .errors import CLIError

PREDICTIONS = "predictions"  # predictions.csv, or predictions-rank<N>.csv from several processes
INDEX_COLUMNS = ("window", "origin", "time", "step")


class PredictionWriter(BasePredictionWriter):
    """Writes ``predict``'s forecasts to ``predictions.csv`` in the run folder, in the data's units.

    One row per window and forecast step: ``window`` (index among the predicted windows),
    ``origin`` (time of the window's last input), ``time`` (of the forecast step), ``step`` (1..H)
    and one column per channel. With several processes, each writes ``predictions-rank<N>.csv``.
    An existing file is never overwritten.
    """

    def __init__(self) -> None:
        super().__init__(write_interval="batch")
        self.path: Path | None = None
        self._file = None
        self._header = True

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        clash = sorted(set(trainer.datamodule.channel_names) & set(INDEX_COLUMNS))
        if clash:
            raise CLIError(f"channels named {clash} clash with the index columns of predictions.csv "
                           f"{list(INDEX_COLUMNS)}: rename them in the data")
        suffix = f"-rank{trainer.global_rank}" if trainer.world_size > 1 else ""
        self.path = Path(trainer.log_dir) / f"{PREDICTIONS}{suffix}.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._file = open(self.path, "x", newline="")  # "x": fail rather than overwrite
        except FileExistsError:
            raise CLIError(f"{self.path} exists; predict writes a new file and overwrites none: choose another "
                           "run folder or delete the file") from None
        self._header = True

    def write_on_batch_end(self, trainer: Trainer, pl_module: LightningModule, prediction: torch.Tensor,
                           batch_indices: list[int] | None, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
        dm = trainer.datamodule
        loaders = trainer.predict_dataloaders
        windows = (loaders[dataloader_idx] if isinstance(loaders, (list, tuple)) else loaders).dataset
        pred = prediction.detach().float().cpu().numpy()
        n, horizon, channels = pred.shape
        values = dm.scaler.inverse_transform(pred.reshape(-1, channels))  # the model works in scaled units
        if not batch_indices:  # Lightning records them for its own DataLoaders
            raise RuntimeError("predict did not report which windows a batch holds; cannot label predictions")
        index = np.asarray(batch_indices)
        origin = windows.start + index + windows.lookback - 1  # row of each window's last input
        rows = (origin[:, None] + np.arange(1, horizon + 1)).reshape(-1)
        times = dm.frame.index
        frame = pd.DataFrame({
            "window": np.repeat(index, horizon),
            "origin": np.repeat(times[origin], horizon),
            "time": times[rows],
            "step": np.tile(np.arange(1, horizon + 1), n),
        })
        frame[dm.channel_names] = values
        frame.to_csv(self._file, header=self._header, index=False)
        self._header = False

    def on_predict_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._file.close()
        self._file = None
        rank_zero_info(f"Predictions (original units) written to {self.path}")

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
