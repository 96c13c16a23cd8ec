"""``QueryForecastingModule``: ``ForecastingModule``'s training logic for models that answer queries
at any (time, variable) (``models/query_base.py``), scored with the published per-variable metric.

Batches are observation sets (``data/observations.py``): the loss is taken over every query that has
a target (``query_lengths``), each query alike as the published models train (``weighting="query"``),
or each variable alike as the metric scores, within each batch (``weighting="variable"``) or over the
training set (``weighting="variable-global"``); ``val_mse``/``val_mae`` and
``test_mse``/``test_mae`` are the per-variable errors averaged over variables
(``training.metrics.PerVariableError``). Optimiser, schedules, checkpoints (the model's class and
arguments) and the divergence stop are ``ForecastingModule``'s.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import nn

from ..attention.choices import check_choice
from ..models.query_base import QueryModel
from .metrics import PerVariableError
from .module import DEFAULT_PCT_START, ForecastingModule, Loss, Schedule

Weighting = Literal["query", "variable", "variable-global"]
WEIGHTINGS: tuple[str, ...] = get_args(Weighting)


def query_mask(batch: dict) -> torch.Tensor:
    """(B, C, M) True where a query (and its target) exists."""
    M = batch["query_times"].shape[-1]
    return torch.arange(M, device=batch["query_times"].device) < batch["query_lengths"][..., None]


class QueryForecastingModule(ForecastingModule):
    """Trains and scores a ``QueryModel`` (e.g. ``AsyncTransformer``) on observation sets.

    Args: as ``ForecastingModule`` (``model`` is a ``QueryModel``; the default schedule is "cosine"), and
        weighting: "query": the loss is the mean over every query of the batch, so a variable counts
            by how often it is observed (a heart rate 100 times a day, a lab value once);
            "variable": the mean over the variables with targets in the batch of each variable's
            mean loss, the weighting of the per-variable metric (``val_mse``, ``test_mse``) on one batch;
            a variable absent from most batches (PhysioNet's TroponinI: 0.8 queries in a batch of 32
            stays) then counts less than in the metric, by the share of batches it is absent from;
            "variable-global": each query weighted by 1 / (C · its variable's share of the training
            queries), C the variables that have any: the metric's weighting in expectation over batches
            (needs training batches from an ``ObservationDataset``, whose queries give the shares).
    """

    def __init__(
        self,
        model: QueryModel,
        loss: Loss = "mse",
        lr: float = 1e-3,
        lr_schedule: Schedule = "cosine",
        pct_start: float = DEFAULT_PCT_START,
        weight_decay: float = 0.0,
        weighting: Weighting = "query",
    ):
        check_choice("weighting", weighting, WEIGHTINGS)
        super().__init__(model, loss=loss, lr=lr, lr_schedule=lr_schedule, pct_start=pct_start,
                         weight_decay=weight_decay)
        self.weighting = weighting
        self._query_weights: torch.Tensor | None = None
        n = model.n_variables
        self.metrics = nn.ModuleDict({f"{split}_{kind}": PerVariableError(n, kind)
                                      for split in ("val", "test") for kind in ("mse", "mae")})

    def setup(self, stage: str) -> None:
        data = getattr(self._trainer, "datamodule", None) if self._trainer is not None else None
        n = getattr(data, "n_variables", None)
        if n is not None and n != self.model.n_variables:
            raise ValueError(f"the model was built for {self.model.n_variables} variables, the data module has {n}; "
                             "build the model with the data module's n_variables")

    def forward(self, batch: dict) -> torch.Tensor:
        return self.model(batch["values"], batch["times"], batch["lengths"], batch["query_times"],
                          batch["query_lengths"])

    def _observed(self, pred: torch.Tensor, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        mask = query_mask(batch)
        return pred[mask], batch["query_values"][mask]

    def training_step(self, batch, batch_idx):
        pred = self(batch)
        if self.weighting == "query":
            loss = self.loss_fn(*self._observed(pred, batch))
        elif self.weighting == "variable":
            loss = per_variable_loss(self.loss_fn, pred, batch["query_values"], query_mask(batch))
        else:
            if self._query_weights is None:
                self._query_weights = self._training_query_weights().to(pred.device, pred.dtype)
            loss = weighted_query_loss(self.loss_fn, pred, batch["query_values"], query_mask(batch),
                                       self._query_weights)
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=len(batch["values"]))
        return loss

    def on_fit_start(self) -> None:
        super().on_fit_start()
        self._query_weights = None  # each fit counts its own training queries

    def _training_query_weights(self) -> torch.Tensor:
        loader = self.trainer.train_dataloader
        queries = getattr(getattr(loader, "dataset", None), "queries", None)
        if queries is None:
            raise ValueError('weighting="variable-global" takes each variable\'s share of the training queries from '
                             "the training DataLoader's ObservationDataset, and this one has none; use "
                             'weighting="variable" (the same weighting within each batch)')
        counts = torch.bincount(torch.as_tensor(queries.variable, dtype=torch.long), minlength=self.model.n_variables)
        return variable_weights(counts)

    def _evaluate(self, batch, split: str):
        pred = self(batch)
        mask = query_mask(batch)
        for kind in ("mse", "mae"):
            metric = self.metrics[f"{split}_{kind}"]
            metric.update(pred, batch["query_values"], mask)
            self.log(f"{split}_{kind}", metric, prog_bar=kind == "mse", on_epoch=True, batch_size=len(pred))

    def _reset(self, split: str) -> None:
        for kind in ("mse", "mae"):
            self.metrics[f"{split}_{kind}"].reset()


def per_variable_loss(loss_fn, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean over variables with a target in ``mask`` (B, C, M) of each variable's mean
    ``loss_fn`` error: ``PerVariableError``'s weighting on one batch (0 if nothing is asked)."""
    err = loss_fn(pred, target.to(pred.dtype), reduction="none").masked_fill(~mask, 0.0)
    count = mask.sum(dim=(0, 2))
    has = count > 0
    if not bool(has.any()):
        return pred.sum() * 0.0
    return (err.sum(dim=(0, 2))[has] / count[has].to(err.dtype)).mean()


def variable_weights(counts: torch.Tensor) -> torch.Tensor:
    """Per-query weights 1 / (C · share) from each variable's query count (0 for a variable without any),
    so that the mean weighted error over all the counted queries is the mean over variables of each
    variable's mean error."""
    counts = counts.to(torch.float64)
    has = counts > 0
    shares = counts / counts.sum().clamp_min(1.0)
    return torch.where(has, 1.0 / (has.sum().clamp_min(1) * shares.clamp_min(1e-300)), torch.zeros_like(counts))


def weighted_query_loss(loss_fn, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                        weights: torch.Tensor) -> torch.Tensor:
    """The mean over the queries in ``mask`` (B, C, M) of ``loss_fn`` error times its variable's weight
    ``weights`` (C,) (0 if nothing is asked)."""
    err = loss_fn(pred, target.to(pred.dtype), reduction="none").masked_fill(~mask, 0.0)
    if not bool(mask.any()):
        return pred.sum() * 0.0
    return (err * weights[None, :, None]).sum() / mask.sum().to(err.dtype)
