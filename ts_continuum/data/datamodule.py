"""``ForecastDataModule``: a bundled dataset or CSV, the protocol splits, windows and regimes."""

from __future__ import annotations

import numbers
import warnings
from functools import cached_property
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
from torch.utils.data import DataLoader

from .bundled import bundled_name, load_dataset
from .scaling import Scaler
from .protocol import DropMode, IrregularRegime, min_rows, split_rows
from .windows import WindowDataset


def _check_columns(columns) -> list[str] | None:
    if columns is None:
        return None
    if isinstance(columns, str):
        raise ValueError(f"columns must be a list of column names, got the string {columns!r}; "
                         f"pass columns=[{columns!r}]")
    if isinstance(columns, (set, frozenset, dict)):
        raise ValueError(f"columns must be an ordered list of column names (their order is the channels'), got "
                         f"{type(columns).__name__} {columns!r}; pass a list")
    if not pd.api.types.is_list_like(columns) or not len(columns := list(columns)):  # a pandas Index, an array
        raise ValueError(f"columns must be a non-empty list of column names, got {columns!r}")
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise ValueError(f"columns name {repeated} more than once; each variable is one channel")
    return columns


def _span(delta: pd.Timedelta) -> str:
    return str(delta).removeprefix("0 days ")


def check_time_grid(index: pd.DatetimeIndex, source: str) -> None:
    """Refuse duplicate, unsorted or irregularly spaced timestamps.

    Windows are runs of rows and their times count rows, so the rows must be a regular grid; a
    calendar grid (months, business days) counts as regular.
    """
    repeated = np.flatnonzero(index.duplicated())
    if repeated.size:
        first = index[repeated[0]]
        origin = int(np.flatnonzero(index == first)[0])
        raise ValueError(
            f"{source}: {repeated.size} rows repeat an earlier timestamp (first: row {repeated[0]} repeats {first} "
            f"of row {origin}; rows counted from 0). Keep one row per timestamp: drop the copies "
            "(df.drop_duplicates(subset=time_column)) or average them (df.groupby(time_column).mean())"
        )
    gaps = pd.Series(index[1:] - index[:-1])
    back = np.flatnonzero(gaps < pd.Timedelta(0))
    if back.size:
        raise ValueError(
            f"{source}: rows are not in time order: {back.size} rows have an earlier timestamp than the row before "
            f"(first: row {back[0] + 1}, {index[back[0] + 1]} after {index[back[0]]}). Sort the file by time "
            "first: df.sort_values(time_column).to_csv(path, index=False)"
        )
    if len(gaps) < 2:
        return
    typical = gaps.median()
    off = np.flatnonzero(gaps != typical)
    if off.size == 0:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas 3 announces a change of infer_freq's return type
        if pd.infer_freq(index) is not None:
            return
    i = off[0]
    raise ValueError(
        f"{source}: the timestamps are not a regular grid: {off.size} of {len(gaps)} spacings differ from the "
        f"typical {_span(typical)} (first: {_span(gaps[i])} from row {i} to {i + 1}, {index[i]} to {index[i + 1]}; "
        f"spacings range from {_span(gaps.min())} to {_span(gaps.max())}). ForecastDataModule assumes a regular "
        "grid, as in the bundled benchmarks: windows are runs of rows and x_time counts rows, so these gaps "
        "would be ignored. For irregular timestamps use ts_continuum.forecasting.Forecaster (docs/forecaster.md), "
        "which keeps the real times; or resample the file to a regular grid and fill the gaps"
    )


class ForecastDataModule(L.LightningDataModule):
    """Sliding-window forecasting data under the standard long-term protocol.

    Args:
        dataset: "ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather" (the published splits) or a CSV
            path (70/10/20 by time; a path named like a bundled dataset gets a warning). A CSV
            must be a regular time grid: duplicate, unsorted or irregularly spaced timestamps are
            refused (irregular data: ``ts_continuum.forecasting.Forecaster``).
        lookback: input length L (rows); also the model's lookback.
        horizon: forecast length H (rows); also the model's horizon.
        batch_size: training batch size.
        eval_batch_size: validation/test/predict batch size (default: ``batch_size``).
        columns: the variables to use (default: every column but the time, which must all be
            numeric).
        drop: fraction of input observations removed, in [0, 1) (the irregular regime, see
            ``IrregularRegime``; ``drop=0, jitter=0`` is the regular benchmark).
        drop_mode: "channel" (each channel's observations removed independently) or "step"
            (whole time steps removed).
        jitter: largest timestamp shift, in [0, 0.5) nominal steps (uniform, per row).
        regime_seed: seed of the removal pattern and the jitter (fixed per series).
        interpolate: fill dropped inputs by linear interpolation inside each window (the
            conventional baseline for irregular data).
        shuffle_train: shuffle training windows (turn off for exact run-to-run comparisons).
        num_workers: DataLoader worker processes (0: load in the main process).
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
        drop_mode: DropMode = "channel",
        jitter: float = 0.0,
        regime_seed: int = 0,
        interpolate: bool = False,
        shuffle_train: bool = True,
        num_workers: int = 0,
    ):
        super().__init__()
        for name, value in (("lookback", lookback), ("horizon", horizon), ("batch_size", batch_size),
                            ("eval_batch_size", 1 if eval_batch_size is None else eval_batch_size)):
            if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(num_workers, numbers.Integral) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"num_workers must be a non-negative integer, got {num_workers!r}")
        columns = _check_columns(columns)
        lookback, horizon, batch_size = int(lookback), int(horizon), int(batch_size)
        eval_batch_size = None if eval_batch_size is None else int(eval_batch_size)
        if drop and lookback == 1:
            raise ValueError(f"drop={drop} needs lookback >= 2: every window must observe each channel, so with "
                             "one input step nothing can be dropped")
        self.save_hyperparameters()
        self.dataset, self.lookback, self.horizon = dataset, lookback, horizon
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size or batch_size
        self.regime = IrregularRegime(drop=drop, mode=drop_mode, jitter=jitter, seed=regime_seed)
        self.interpolate, self.shuffle_train, self.num_workers = interpolate, shuffle_train, num_workers
        self.columns = columns
        self.splits: dict[str, WindowDataset] = {}

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The table, checked: a regular time grid (user CSVs), the chosen columns, no missing values."""
        name = bundled_name(self.dataset)
        df = load_dataset(self.dataset if name else Path(self.dataset), columns=self.columns)
        if name is None:  # bundled files are used row by row as published (Weather repeats one timestamp
            check_time_grid(df.index, self.dataset)  # and skips 9 rows once; the ETT files pass)
        counts = df.isna().sum()
        if counts.any():
            detail = "; ".join(
                f"column {c!r} misses {n} of {len(df)} (first at row {int(np.flatnonzero(df[c].isna().to_numpy())[0])})"
                for c, n in counts[counts > 0].items()
            )
            raise ValueError(
                f"{self.dataset} has missing values: {detail}; rows counted from 0. The data "
                "module does not mask missing values (only the irregular regime removes inputs, and it masks "
                "them): fill them first, e.g. df.interpolate(limit_direction='both') or df.ffill(), or leave "
                "those columns out with columns=[...]; dropping the rows would leave gaps in the time grid"
            )
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
        rows = split_rows(name, len(self.frame), self.lookback)
        need = self.lookback + self.horizon
        short = [f"{split} holds {end - start} (rows {start}..{end - 1})"
                 for split, (start, end) in rows.items() if end - start < need]
        if short:
            if name is not None and name.startswith("ett"):
                fix = f"the published {name} borders are fixed, so use a shorter lookback/horizon"
            else:
                fix = (f"with the 70/10/20 split these settings need a series of at least "
                       f"{min_rows(self.lookback, self.horizon)} rows and it has {len(self.frame)}: use a longer "
                       "series or a shorter lookback/horizon")
            raise ValueError(
                f"{self.dataset}: too little history: each split needs lookback {self.lookback} + horizon "
                f"{self.horizon} = {need} rows for one window (val and test include the lookback rows before "
                f"them), but {'; '.join(short)}; {fix}"
            )
        return rows

    @cached_property
    def scaler(self) -> Scaler:
        """Fit on the training rows only (all of them, in every regime: targets share one scale)."""
        start, end = self.rows["train"]
        scaler = Scaler.fit(self.frame.values[start:end])
        with np.errstate(over="ignore"):  # refused as ever: a variance past float64 in the data's units
            broken = ~(np.isfinite(scaler.mean[0]) & np.isfinite(scaler.std[0] ** 2))
        if broken.any():
            column = self.channel_names[int(np.flatnonzero(broken)[0])]
            largest = float(np.abs(self.frame[column].to_numpy()[start:end]).max())
            raise ValueError(f"{self.dataset}: column {column!r} cannot be standardised: its training values (up to "
                             f"{largest:.3g} in size) overflow its variance; rescale it (or check for corrupt values)")
        return scaler

    def state_dict(self) -> dict:
        """The scaling the model was trained with: Lightning saves it in every checkpoint, so that
        evaluation scales inputs as training did even when the file has changed since."""
        return {"scaler_mean": self.scaler.mean[0].tolist(), "scaler_scale": self.scaler.std[0].tolist(),
                "channels": self.channel_names, "dataset": self._source()}

    def _source(self) -> str:
        """Which data this is: a bundled dataset's name, or the file's absolute path."""
        return bundled_name(self.dataset) or str(Path(self.dataset).expanduser().resolve())

    def load_state_dict(self, state: dict) -> None:
        """Take a checkpoint's scaling (Lightning calls this when it restores a checkpoint, after
        ``setup``); a file whose training rows now scale otherwise is warned about, and the
        checkpoint's scaling is used. Other data than the checkpoint's (a model trained on ETTh1
        tested on ETTh2) keeps its own scaling: the checkpoint's would shift every input."""
        if "scaler_mean" not in state:  # a checkpoint from before the scaling was saved
            return
        if state.get("dataset", self._source()) != self._source():
            return
        mean, scale = np.asarray(state["scaler_mean"]), np.asarray(state["scaler_scale"])
        channels = state.get("channels", self.channel_names)
        if channels != self.channel_names:
            raise ValueError(f"the checkpoint was trained on the channels {channels}, but this data module gives "
                             f"{self.channel_names}; pass columns={channels}")
        fitted = self.scaler
        if np.allclose(fitted.mean[0], mean, rtol=1e-6, atol=1e-9) and np.allclose(fitted.std[0], scale, rtol=1e-6):
            return
        warnings.warn(f"{self.dataset}: its training rows no longer scale as when the checkpoint was trained (means "
                      f"{np.round(fitted.mean[0], 4).tolist()}, checkpoint {np.round(mean, 4).tolist()}): the file "
                      "has changed since (and with it, possibly, its splits). The checkpoint's scaling is used, so "
                      "the model sees inputs scaled as in training", UserWarning, stacklevel=2)
        self.__dict__["scaler"] = Scaler(mean[None, :], scale[None, :])
        if self.splits:  # set up already (Lightning restores after setup): cut the windows again
            self.splits = {}
            self.setup()

    def setup(self, stage: str | None = None) -> None:
        if self.splits:
            return
        values = self.scaler.transform(self.frame.values)
        mask = offsets = None
        if not self.regime.is_regular:
            mask = self.regime.observation_mask(len(values), values.shape[1], max_gap=self.lookback - 1)
            drawn = self.regime.observation_mask(len(values), values.shape[1], max_gap=len(values))  # none put back
            restored = float(mask.mean()) - float(drawn.mean())
            if restored > 0.02:  # a draw short of drop by chance (small files) is not warned about
                warnings.warn(f"drop={self.regime.drop} removed only {1.0 - float(mask.mean()):.1%} of the inputs: "
                              f"every window of lookback {self.lookback} must observe each channel, so "
                              f"{restored:.1%} of the inputs were put back into gaps longer than that; a longer "
                              "lookback keeps the fraction asked for", UserWarning, stacklevel=2)
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
