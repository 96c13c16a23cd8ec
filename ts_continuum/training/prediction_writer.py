"""``predict``'s output: the forecasts, in the data's units, written to ``predictions.csv`` in the run
folder, and ``predictions.png``, the last window drawn against its actual values."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning.pytorch.utilities import rank_zero_info

from .errors import CLIError
from .learning_curve import model_title
from .prediction_plot import plot_window

PREDICTIONS = "predictions"  # predictions.csv, or predictions-rank<N>.csv from several processes
INDEX_COLUMNS = ("window", "origin", "time", "step")


class PredictionWriter(BasePredictionWriter):
    """Writes ``predict``'s forecasts to ``predictions.csv`` in the run folder, in the data's units.

    One row per window and forecast step: ``window`` (index among the predicted windows),
    ``origin`` (time of the window's last input), ``time`` (of the forecast step), ``step`` (1..H)
    and one column per channel. With several processes, each writes ``predictions-rank<N>.csv``.
    ``predictions.png`` (``-rank<N>`` alike) draws the last window predicted. An existing file is
    never overwritten; a figure that cannot be drawn only warns.
    """

    def __init__(self) -> None:
        super().__init__(write_interval="batch")
        self.path: Path | None = None
        self._file = None
        self._header = True
        self._last: tuple[int, int, np.ndarray] | None = None  # dataloader, window and forecast drawn at the end

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        clash = sorted(set(trainer.datamodule.channel_names) & set(INDEX_COLUMNS))
        if clash:
            raise CLIError(f"channels named {clash} clash with the index columns of predictions.csv "
                           f"{list(INDEX_COLUMNS)}: rename them in the data")
        suffix = f"-rank{trainer.global_rank}" if trainer.world_size > 1 else ""
        self.path = Path(trainer.log_dir) / f"{PREDICTIONS}{suffix}.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        figure = self.path.with_suffix(".png")
        if figure.exists():  # kept, it would stand beside forecasts it does not show
            raise CLIError(f"{figure} exists; predict writes a new figure and overwrites none: choose another "
                           "run folder or delete the file")
        try:
            self._file = open(self.path, "x", newline="")  # "x": fail rather than overwrite
        except FileExistsError:
            raise CLIError(f"{self.path} exists; predict writes a new file and overwrites none: choose another "
                           "run folder or delete the file") from None
        self._header, self._last = True, None

    def write_on_batch_end(self, trainer: Trainer, pl_module: LightningModule, prediction: torch.Tensor,
                           batch_indices: list[int] | None, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
        dm = trainer.datamodule
        loaders = trainer.predict_dataloaders
        windows = (loaders[dataloader_idx] if isinstance(loaders, (list, tuple)) else loaders).dataset
        pred = prediction.detach().float().cpu().numpy()
        n, horizon, channels = pred.shape
        # the model works in scaled units; written as float32, the precision it forecasts in
        values = dm.scaler.inverse(pred.reshape(-1, channels)).astype(np.float32)
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
        j = int(np.argmax(index))
        if self._last is None or (dataloader_idx, index[j]) > self._last[:2]:
            self._last = (dataloader_idx, int(index[j]), values.reshape(n, horizon, channels)[j])

    def on_predict_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._file.close()
        self._file = None
        rank_zero_info(f"Predictions (original units) written to {self.path}")
        if self._last is not None:
            self._draw(trainer, pl_module)

    def _draw(self, trainer: Trainer, pl_module: LightningModule) -> None:
        path = self.path.with_suffix(".png")
        loader, index, forecast = self._last
        try:  # the forecasts are written: a figure that fails must not end the command
            dm = trainer.datamodule
            loaders = trainer.predict_dataloaders
            windows = (loaders[loader] if isinstance(loaders, (list, tuple)) else loaders).dataset
            origin = dm.frame.index[windows.start + index + windows.lookback - 1]
            title = f"{model_title(pl_module)}: window {index}, origin {origin}"
            observed = windows.observed(index) if windows.interpolate else None
            plot_window(windows[index], forecast, dm.scaler.inverse, dm.channel_names, title,
                        observed).savefig(path, dpi=120)
        except Exception as error:
            # each process draws its own figure, so each says what went wrong with it
            warnings.warn(f"could not draw the forecasts' figure {path}: {error}", UserWarning, stacklevel=2)
            return
        rank_zero_info(f"The last window's forecast drawn in {path}")

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
