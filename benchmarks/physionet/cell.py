"""One cell of the PhysioNet 2012 study: train one model (or score one baseline) and test it.

A cell is a flat dict: the key (model, attention, pos_encoding, history_keep, switch, seed) and the
budget and sizes. Besides the result row, a cell leaves ``errors.npz`` (squared and absolute error
sums and counts per test stay and variable, and each stay's number of history observations: the
report recomputes the metric on any subset of stays, e.g. the sparsity thirds) and its epoch curve,
so nothing needs rerunning to look again.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import Callback, EarlyStopping, EMAWeightAveraging, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from benchmarks import machine
from ts_continuum.data.physionet import PhysioNetDataModule
from ts_continuum.models import QUERY_MODELS, HistoryMean, LastObservation
from ts_continuum.training import ReleaseFreedMemory
from ts_continuum.training.metrics import PerVariableError
from ts_continuum.training.query_module import QueryForecastingModule, query_mask

KEY_FIELDS = ("model", "attention", "pos_encoding", "history_keep", "switch", "seed")
BASELINES = {"last": LastObservation, "mean": HistoryMean}
MODELS = tuple(QUERY_MODELS) + tuple(BASELINES)
# settings a cell may give besides its key (others are refused by the runner)
SETTINGS = {"max_epochs": 10, "patience": 4, "lr": 1e-3, "batch_size": 32, "eval_batch_size": 128,
            "model_args": {}, "split_seed": 0, "limit_train_batches": 1.0, "max_stays": None, "weighting": "query",
            "ema_decay": None, "ema_start_epoch": 0, "history_dropout": 0.0,
            "origin_jitter": 0.0}
_DATA: dict[tuple, PhysioNetDataModule] = {}


def cell_id(cell: dict) -> str:
    return "_".join(str(cell[k]) for k in KEY_FIELDS)


def data_module(cell: dict) -> PhysioNetDataModule:
    """Set up once per process for each data setting (reading and averaging the file takes a while)."""
    key = (cell["history_keep"], cell["split_seed"], cell["batch_size"], cell["eval_batch_size"], cell["max_stays"],
           cell["history_dropout"], cell["origin_jitter"])
    if key not in _DATA:
        dm = PhysioNetDataModule(split_seed=cell["split_seed"], batch_size=cell["batch_size"],
                                 eval_batch_size=cell["eval_batch_size"], history_keep=cell["history_keep"],
                                 keep_seed=0, max_stays=cell["max_stays"],
                                 history_dropout=float(cell["history_dropout"]),
                                 origin_jitter=float(cell["origin_jitter"]))
        dm.setup("fit")
        _DATA[key] = dm
    return _DATA[key]


class EpochLog(Callback):
    """Seconds per training epoch (validation included), validation MSE/MAE and training loss per epoch."""

    def __init__(self):
        self.seconds: list[float] = []
        self.val_mse: list[float] = []
        self.val_mae: list[float] = []
        self.train_loss: list[float] = []
        self._start = 0.0

    def on_train_epoch_start(self, trainer, module):
        self._start = time.perf_counter()

    def on_validation_epoch_end(self, trainer, module):
        if trainer.sanity_checking:
            return
        self.val_mse.append(float(trainer.callback_metrics["val_mse"]))
        self.val_mae.append(float(trainer.callback_metrics["val_mae"]))

    def on_train_epoch_end(self, trainer, module):
        self.seconds.append(time.perf_counter() - self._start)
        loss = trainer.callback_metrics.get("train_loss_epoch")
        self.train_loss.append(float(loss) if loss is not None else float("nan"))


def evaluate(module: torch.nn.Module, loader, n_variables: int) -> dict:
    """The per-variable metric on a loader, and per-series error sums for subsets."""
    mse, mae = PerVariableError(n_variables, "mse"), PerVariableError(n_variables, "mae")
    rows, sq, ab, count = [], [], [], []
    module.eval()
    with torch.no_grad():
        for batch in loader:
            pred = module(batch)
            mask = query_mask(batch)
            mse.update(pred, batch["query_values"], mask)
            mae.update(pred, batch["query_values"], mask)
            err = (pred.double() - batch["query_values"].double()).masked_fill(~mask, 0.0)
            rows.append(batch["index"].numpy())
            sq.append(err.square().sum(-1).numpy())
            ab.append(err.abs().sum(-1).numpy())
            count.append(mask.sum(-1).numpy())
    return {"mse": float(mse.compute()), "mae": float(mae.compute()), "rows": np.concatenate(rows),
            "sq": np.concatenate(sq), "abs": np.concatenate(ab), "count": np.concatenate(count)}


class SwitchAttention(Callback):
    """The post's switch experiment: at the start of epoch ``epoch`` the model continues with the other
    attention (same weights). Records the validation MSE of the weights just before the switch with the
    new attention, so the report can show the jump."""

    def __init__(self, epoch: int, to: str, dm: PhysioNetDataModule):
        self.epoch, self.to, self.dm = epoch, to, dm
        self.val_after_switch: float | None = None

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch != self.epoch:
            return
        module.set_attention(self.to)
        self.val_after_switch = evaluate(module, self.dm.val_dataloader(), self.dm.n_variables)["mse"]
        module.train()


def _switch(cell: dict) -> tuple[int, str] | None:
    """"none", or "<to>@<epoch>": continue with attention <to> ("continuous", "softmax", or
    "to-other": the one the cell did not start with) from epoch <epoch> (0-based) on."""
    if cell["switch"] in (None, "none"):
        return None
    to, _, epoch = str(cell["switch"]).partition("@")
    if to == "to-other":
        to = {"softmax": "continuous", "continuous": "softmax"}[cell["attention"]]
    if to not in ("softmax", "continuous") or not epoch.isdigit():
        raise ValueError(f"switch must be 'none' or '<softmax|continuous|to-other>@<epoch>', got {cell['switch']!r}")
    return int(epoch), to


def build_model(cell: dict, dm: PhysioNetDataModule) -> torch.nn.Module:
    if cell["model"] in BASELINES:
        return BASELINES[cell["model"]](dm.n_variables, fallback=dm.train_means())
    args = dict(cell["model_args"])
    return QUERY_MODELS[cell["model"]](dm.n_variables, attention=cell["attention"], pos_encoding=cell["pos_encoding"],
                                  **args)


def _weight_average(cell: dict, dm: PhysioNetDataModule) -> EMAWeightAveraging:
    """Validate, checkpoint and test on an exponential moving average of the weights, begun at the start
    of epoch ``ema_start_epoch`` (0-based) so that the early, far-off weights do not linger in it."""
    limit, batches = cell["limit_train_batches"], len(dm.train_dataloader())
    steps = int(batches * limit) if isinstance(limit, float) else min(int(limit), batches)
    start = int(cell["ema_start_epoch"]) * steps
    return EMAWeightAveraging(decay=float(cell["ema_decay"]), update_starting_at_step=start)


def run_cell(cell: dict, out_dir: Path) -> dict:
    """Train and test one cell; returns the result row. ``out_dir`` keeps its curves and errors."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cell = {**SETTINGS, **cell}
    machine.reset_peak_rss()  # the runner trains cell after cell in one process: each gets its own peak
    dm = data_module(cell)
    L.seed_everything(int(cell["seed"]), verbose=False)
    model = build_model(cell, dm)
    module = QueryForecastingModule(model, lr=float(cell["lr"]), lr_schedule="cosine", weighting=cell["weighting"])
    log = EpochLog()
    switch = _switch(cell)
    switcher = SwitchAttention(switch[0], switch[1], dm) if switch else None
    t0 = time.perf_counter()
    if cell["model"] in QUERY_MODELS:
        ckpt_dir = out_dir / "checkpoint"
        shutil.rmtree(ckpt_dir, ignore_errors=True)
        ckpt = ModelCheckpoint(dirpath=ckpt_dir, filename="best", monitor="val_mse", mode="min", save_top_k=1)
        callbacks = [log, ckpt, ReleaseFreedMemory()] + ([switcher] if switcher else [])
        if cell["ema_decay"] is not None:
            callbacks.append(_weight_average(cell, dm))
        if not switch:  # a switch run trains its whole budget: the jump and where it ends are the result
            callbacks.append(EarlyStopping(monitor="val_mse", mode="min", patience=int(cell["patience"])))
        trainer = L.Trainer(accelerator="cpu", max_epochs=int(cell["max_epochs"]), gradient_clip_val=1.0,
                            limit_train_batches=cell["limit_train_batches"], callbacks=callbacks,
                            logger=CSVLogger(out_dir, name="metrics", version=""), enable_progress_bar=False,
                            enable_model_summary=False, num_sanity_val_steps=0)
        trainer.fit(module, dm)
        state = torch.load(ckpt.best_model_path, map_location="cpu", weights_only=True)["state_dict"]
        if switch and int(torch.load(ckpt.best_model_path, weights_only=False)["epoch"]) < switch[0]:
            module.set_attention(cell["attention"])  # the best weights were from before the switch
        module.load_state_dict(state)
        shutil.copy(ckpt.best_model_path, out_dir / "best.ckpt")  # not committed (.gitignore): the best is saved
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    fit_s = time.perf_counter() - t0
    test = evaluate(module, dm.test_dataloader(), dm.n_variables)
    history = dm.datasets["test"].history
    ids_file = out_dir.parents[1] / f"test_record_ids_split{cell['split_seed']}.txt"
    if not ids_file.is_file():  # the stays every test MSE of this split is over
        ids_file.write_text("\n".join(map(str, dm.split_ids["test"].tolist())) + "\n")
    np.savez_compressed(out_dir / "errors.npz", ids=history.ids[test["rows"]], sq=test["sq"], abs=test["abs"],
                        count=test["count"], history_obs=np.diff(history.offsets)[test["rows"]])
    best = int(np.argmin(log.val_mse)) if log.val_mse else -1
    seconds = log.seconds[1:] if len(log.seconds) > 1 else log.seconds
    return {
        "test_mse": test["mse"], "test_mae": test["mae"],
        "best_val_mse": log.val_mse[best] if log.val_mse else float("nan"),
        "epochs": len(log.seconds), "best_epoch": best + 1,
        "s_per_epoch": float(np.mean(seconds)) if seconds else float("nan"),
        "first_epoch_s": log.seconds[0] if log.seconds else float("nan"),
        "fit_s": fit_s, "peak_rss_mb": machine.peak_rss_mb(),
        "threads": torch.get_num_threads(), "n_params": sum(p.numel() for p in model.parameters()),
        "val_curve": json.dumps([round(v, 6) for v in log.val_mse]),
        "val_mae_curve": json.dumps([round(v, 6) for v in log.val_mae]),
        "train_curve": json.dumps([round(v, 6) for v in log.train_loss]),
        "val_after_switch": switcher.val_after_switch if switcher else float("nan"),
    }
