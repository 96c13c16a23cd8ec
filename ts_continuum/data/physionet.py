"""PhysioNet 2012 under the published forecasting protocol (t-PatchGNN, ICML 2024; after Latent ODE).

- times in hours since ICU admission; observations before ``history_hours`` (24) are the history,
  every observation in [24, 48] is a query to forecast at its own time and variable;
- observations of one variable at the same minute are averaged; rows without a parameter name
  (2,403 in set c) are skipped, as the published parser skips them;
- stays split 60/20/20 % into train/validation/test at random with a fixed, recorded seed;
- each variable min-max scaled with the minimum and maximum over the train+validation stays;
- the metric: squared (absolute) error per variable over its query values, averaged over the variables
  that have any (``training.metrics.PerVariableError``), on the scaled values.

What differs from the published setup: the split draws its own stays (same proportions, same
population; the published code's permutation depends on its file listing order), and times enter
the model relative to the forecast origin (hour 24) rather than divided by the largest time. The
test split's record ids are ``split_ids["test"]``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader

from .bundled import load_long_dataset
from .observations import ObservationDataset, ObservationSets

VARIABLES = (
    "Age", "Gender", "Height", "ICUType", "Weight", "Albumin", "ALP", "ALT", "AST", "Bilirubin", "BUN",
    "Cholesterol", "Creatinine", "DiasABP", "FiO2", "GCS", "Glucose", "HCO3", "HCT", "HR", "K", "Lactate", "Mg",
    "MAP", "MechVent", "Na", "NIDiasABP", "NIMAP", "NISysABP", "PaCO2", "PaO2", "pH", "Platelets", "RespRate",
    "SaO2", "SysABP", "Temp", "TroponinI", "TroponinT", "Urine", "WBC",
)
SPLITS = ("train", "val", "test")
FRACTIONS = (0.6, 0.2, 0.2)
STAY_HOURS = 48.0


def average_same_minute(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (record_id, time, parameter), the mean of the observations sharing it."""
    out = frame.groupby(["record_id", "time", "parameter"], observed=True, sort=True)["value"].mean()
    return out.reset_index()


def split_stays(record_ids: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """60/20/20 % of the stays at random (``seed``), each split's ids sorted."""
    ids = np.sort(np.unique(record_ids))
    order = np.random.default_rng(seed).permutation(len(ids))
    n_train, n_val = round(FRACTIONS[0] * len(ids)), round(FRACTIONS[1] * len(ids))
    parts = np.split(ids[order], [n_train, n_train + n_val])
    return {name: np.sort(part) for name, part in zip(SPLITS, parts)}


def check_frame(frame: pd.DataFrame) -> None:
    """The long frame's columns, values and times, named when wrong."""
    missing = [c for c in ("record_id", "time", "parameter", "value") if c not in frame.columns]
    if missing:
        raise ValueError(f"the PhysioNet frame lacks columns {missing}; it needs record_id, time (minutes since "
                         "admission), parameter and value, one row per observation (load_dataset('physionet2012'))")
    unknown = sorted(set(frame["parameter"].astype(str)) - set(VARIABLES))
    if unknown:
        raise ValueError(f"unknown PhysioNet variables {unknown[:5]}; the protocol's 41 are {', '.join(VARIABLES)}")
    values = frame["value"].to_numpy(dtype=np.float64)
    if not np.isfinite(values).all():
        row = int(np.flatnonzero(~np.isfinite(values))[0])
        raise ValueError(f"value is NaN or infinite in {int((~np.isfinite(values)).sum())} rows (first: record "
                         f"{frame['record_id'].iloc[row]}, {frame['parameter'].iloc[row]} at minute "
                         f"{frame['time'].iloc[row]}); drop those rows")
    minutes = frame["time"].to_numpy(dtype=np.float64)
    if not (np.isfinite(minutes).all() and minutes.min() >= 0 and minutes.max() <= STAY_HOURS * 60):
        raise ValueError(f"time must be minutes since admission in [0, {STAY_HOURS * 60:g}], got "
                         f"[{np.nanmin(minutes):g}, {np.nanmax(minutes):g}]")


class PhysioNetDataModule(L.LightningDataModule):
    """PhysioNet 2012 as observation sets, under the published protocol (module docstring).

    Args:
        history_hours: the forecast origin; history before it, queries from it to hour 48.
        split_seed: the seed of the 60/20/20 split (recorded in checkpoints with the other arguments).
        batch_size, eval_batch_size: stays per training / evaluation batch.
        history_keep: fraction of each stay's history observations kept (1: all; the thinning
            experiment draws the rest away with ``keep_seed``, in every split).
        history_dropout: training batches drop this fraction of their stays' history observations at
            random, drawn anew every batch (an augmentation; validation and test see every observation).
        origin_jitter: training batches move each stay's forecast origin earlier by up to this many
            hours (uniform, drawn anew every batch) and forecast the same span after it, so that
            history observations are targets too (an augmentation; validation and test keep the
            protocol's origin). Must be below ``history_hours``.
        max_stays: use a random subset of this many stays (before splitting): quick runs and tests.
        num_workers: DataLoader workers.
        data: the long frame's path (``load_dataset("physionet2012")``'s format); default: bundled.
    """

    def __init__(
        self,
        history_hours: float = 24.0,
        split_seed: int = 0,
        batch_size: int = 32,
        eval_batch_size: int = 128,
        history_keep: float = 1.0,
        keep_seed: int = 0,
        history_dropout: float = 0.0,
        origin_jitter: float = 0.0,
        max_stays: int | None = None,
        num_workers: int = 0,
        data: str | None = None,
    ):
        super().__init__()
        if not 0 < history_hours < STAY_HOURS:
            raise ValueError(f"history_hours must lie in (0, {STAY_HOURS:g}), got {history_hours!r}")
        if not 0 < history_keep <= 1:
            raise ValueError(f"history_keep must be a fraction in (0, 1], got {history_keep!r}")
        if not 0 <= history_dropout < 1:
            raise ValueError(f"history_dropout must be a fraction in [0, 1) (0: off), got {history_dropout!r}")
        if not 0 <= origin_jitter < history_hours:
            raise ValueError(f"origin_jitter must be hours in [0, history_hours={history_hours:g}) (0: off; the "
                             f"moved origin must leave some history), got {origin_jitter!r}")
        for name, value in (("batch_size", batch_size), ("eval_batch_size", eval_batch_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if max_stays is not None and (not isinstance(max_stays, int) or max_stays < 5):
            raise ValueError(f"max_stays must be an integer >= 5 (one stay per split at least), got {max_stays!r}")
        self.save_hyperparameters()
        self.variables = list(VARIABLES)
        self.n_variables = len(VARIABLES)
        self.datasets: dict[str, ObservationDataset] = {}
        self.split_ids: dict[str, np.ndarray] = {}
        self.scale_min: np.ndarray | None = None
        self.scale_max: np.ndarray | None = None

    def _frame(self) -> pd.DataFrame:
        if self.hparams.data is None:
            return load_long_dataset("physionet2012")
        path = Path(self.hparams.data)
        if not path.is_file():
            raise ValueError(f"data={self.hparams.data!r} is not a file; leave it unset for the bundled PhysioNet 2012")
        return pd.read_csv(path)

    def setup(self, stage: str | None = None) -> None:
        if self.datasets:
            return
        hp = self.hparams
        frame = self._frame()
        frame = frame[frame["parameter"].notna() & (frame["parameter"].astype(str) != "")]
        check_frame(frame)
        if hp.max_stays is not None:
            ids = np.sort(frame["record_id"].unique())
            keep = np.random.default_rng(hp.split_seed).choice(ids, size=min(hp.max_stays, len(ids)), replace=False)
            frame = frame[frame["record_id"].isin(keep)]
        frame = average_same_minute(frame)
        self.split_ids = split_stays(frame["record_id"].to_numpy(), hp.split_seed)
        code = pd.Categorical(frame["parameter"].astype(str), categories=self.variables).codes.astype(np.int64)
        hours = frame["time"].to_numpy(dtype=np.float64) / 60.0
        value = frame["value"].to_numpy(dtype=np.float64)
        seen = frame["record_id"].isin(np.concatenate([self.split_ids["train"], self.split_ids["val"]])).to_numpy()
        lo = np.full(self.n_variables, np.inf)
        hi = np.full(self.n_variables, -np.inf)
        np.minimum.at(lo, code[seen], value[seen])
        np.maximum.at(hi, code[seen], value[seen])
        unseen = ~np.isfinite(lo)
        lo[unseen], hi[unseen] = 0.0, 1.0  # a variable absent from train+val: left unscaled
        self.scale_min, self.scale_max = lo, hi
        scaled = (value - lo[code]) / np.where(hi > lo, hi - lo, 1.0)[code]
        history = hours < hp.history_hours
        if hp.history_keep < 1:
            history &= np.random.default_rng(hp.keep_seed).random(len(hours)) < hp.history_keep
        query = hours >= hp.history_hours
        record = frame["record_id"].to_numpy()
        for split in SPLITS:
            ids = self.split_ids[split]
            series = np.searchsorted(ids, record)
            member = np.isin(record, ids)
            sets = []
            for rows in (member & history, member & query):
                sets.append(ObservationSets.build(ids, series[rows], code[rows], hours[rows] - hp.history_hours,
                                                  scaled[rows], self.n_variables))
            self.datasets[split] = ObservationDataset(*sets)

    def train_means(self) -> list[float]:
        """Each variable's mean over the training stays' observations (history and queries), scaled:
        the simple baselines' forecast for a variable a stay never observed."""
        train = self.datasets["train"]
        total, count = np.zeros(self.n_variables), np.zeros(self.n_variables)
        for sets in (train.history, train.queries):
            np.add.at(total, sets.variable, sets.value)
            np.add.at(count, sets.variable, 1)
        return (total / np.maximum(count, 1)).tolist()

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        data = self.datasets[split]
        train = split == "train"
        size = self.hparams.batch_size if train else self.hparams.eval_batch_size
        collate = partial(data.collate, history_dropout=self.hparams.history_dropout if train else 0.0,
                          origin_jitter=self.hparams.origin_jitter if train else 0.0,
                          horizon=STAY_HOURS - self.hparams.history_hours)
        return DataLoader(data, batch_size=size, shuffle=shuffle, collate_fn=collate,
                          num_workers=self.hparams.num_workers, persistent_workers=self.hparams.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def unscale(self, values: torch.Tensor | np.ndarray, variable: torch.Tensor | np.ndarray) -> np.ndarray:
        """Scaled values back to the data's units, given each value's variable index."""
        variable = np.asarray(variable)
        return np.asarray(values) * np.where(self.scale_max > self.scale_min, self.scale_max - self.scale_min,
                                             1.0)[variable] + self.scale_min[variable]

    def state_dict(self) -> dict:
        """The scaling and the split, saved in checkpoints (plain lists: checkpoints load with
        ``weights_only=True``)."""
        if self.scale_min is None:
            return {}
        return {"scale_min": self.scale_min.tolist(), "scale_max": self.scale_max.tolist(),
                "split_ids": {k: v.tolist() for k, v in self.split_ids.items()}}

    def load_state_dict(self, state: dict) -> None:
        """A checkpoint evaluated on data split or scaled otherwise would score other stays or units:
        refused with what differs."""
        if not state or self.scale_min is None:
            return
        same_scale = np.allclose(state["scale_min"], self.scale_min) and np.allclose(state["scale_max"], self.scale_max)
        same_split = all(np.array_equal(state["split_ids"][k], self.split_ids[k]) for k in SPLITS)
        if not (same_scale and same_split):
            what = " and ".join(w for w, same in (("split", same_split), ("scaling", same_scale)) if not same)
            raise ValueError(f"the checkpoint was trained on another {what} of the data than this data module makes; "
                             "use the data arguments it was trained with (its run's config.yaml)")
