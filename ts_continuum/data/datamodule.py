"""``ForecastDataModule``: a bundled dataset or CSV, the protocol splits, windows and regimes."""

from __future__ import annotations

import warnings
from functools import cached_property
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
from sklearn.preprocessing import StandardScaler
from torch.utils.data import DataLoader

from .bundled import bundled_name, load_dataset
from .windows import IrregularRegime, WindowDataset, split_rows


class ForecastDataModule(L.LightningDataModule):
    """Sliding-window forecasting data under the standard long-term protocol.

    Args:
        dataset: "ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather" (the published splits) or a CSV
            path (70/10/20 by time; a path named like a bundled dataset gets a warning).
        lookback, horizon: input and forecast lengths L and H (rows).
        batch_size: training batch size; ``eval_batch_size`` for val/test (default: the same).
        columns: the variables to use (default: every column but the time, which must all be
            numeric).
        drop, drop_mode, jitter, regime_seed: the irregular regime (see ``IrregularRegime``);
            ``drop=0, jitter=0`` is the regular benchmark.
        interpolate: fill dropped inputs by linear interpolation inside each window (the
            conventional baseline for irregular data).
        shuffle_train: shuffle training windows (turn off for exact run-to-run comparisons).
    """

    def __init__(
        self,
        dataset: str = "ETTh1",
        lookback: int = 336,
        horizon: int = 96,
        batch_size: int = 128,
        eval_batch_size: int | None = None,
        columns: list[str] | None = None,
        drop: float = 0.0,
        drop_mode: str = "channel",
        jitter: float = 0.0,
        regime_seed: int = 0,
        interpolate: bool = False,
        shuffle_train: bool = True,
        num_workers: int = 0,
    ):
        super().__init__()
        for name, value in (("lookback", lookback), ("horizon", horizon), ("batch_size", batch_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.save_hyperparameters()
        self.dataset, self.lookback, self.horizon = dataset, lookback, horizon
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size or batch_size
        self.regime = IrregularRegime(drop=drop, mode=drop_mode, jitter=jitter, seed=regime_seed)
        self.interpolate, self.shuffle_train, self.num_workers = interpolate, shuffle_train, num_workers
        self.columns = columns
        self.splits: dict[str, WindowDataset] = {}

    @cached_property
    def frame(self) -> pd.DataFrame:
        df = load_dataset(self.dataset if bundled_name(self.dataset) else Path(self.dataset))
        if self.columns is not None:
            missing = [c for c in self.columns if c not in df.columns]
            if missing:
                raise ValueError(f"columns {missing} are not in {self.dataset}; available: {list(df.columns)}")
            df = df[self.columns]
        if df.isna().any().any():
            raise ValueError(f"{self.dataset} has missing values; the protocol needs a complete table")
        return df

    @property
    def n_channels(self) -> int:
        return self.frame.shape[1]

    @property
    def channel_names(self) -> list[str]:
        return list(self.frame.columns)

    @cached_property
    def rows(self) -> dict[str, tuple[int, int]]:
        name = bundled_name(self.dataset)
        lookalike = bundled_name(Path(str(self.dataset)).name.lower().removesuffix(".gz").removesuffix(".csv"))
        if name is None and lookalike is not None:
            warnings.warn(f"{self.dataset} is a file, so it gets the 70/10/20 split of any other series, not the "
                          f"published {lookalike} split; pass dataset={lookalike!r} for the bundled copy and the "
                          "standard split, whose results compare with published ones", UserWarning, stacklevel=2)
        return split_rows(name, len(self.frame), self.lookback)

    @cached_property
    def scaler(self) -> StandardScaler:
        """Fit on the training rows only (all of them, in every regime: targets share one scale)."""
        start, end = self.rows["train"]
        return StandardScaler().fit(self.frame.values[start:end])

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        values = self.scaler.transform(self.frame.values).astype(np.float32)
        mask = offsets = None
        if not self.regime.is_regular:
            mask = self.regime.observation_mask(len(values), values.shape[1], max_gap=self.lookback - 1)
            offsets = self.regime.time_offsets(len(values))
        for split, (start, end) in self.rows.items():
            self.splits[split] = WindowDataset(
                values, start, end, self.lookback, self.horizon, mask=mask, time_offsets=offsets,
                interpolate=self.interpolate and mask is not None,
            )

    def _loader(self, split: str, train: bool = False) -> DataLoader:
        self.setup()
        return DataLoader(
            self.splits[split],
            batch_size=self.batch_size if train else self.eval_batch_size,
            shuffle=train and self.shuffle_train,
            drop_last=train and len(self.splits[split]) > self.batch_size,  # evaluation keeps every window
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test")
