"""The irregular-forecasting metric: error per variable over its query values, averaged over the
variables that have any (the published PhysioNet/MIMIC protocol: a variable queried 10 times
counts as much as one queried 100,000 times)."""

from __future__ import annotations

import torch
from torchmetrics import Metric


class PerVariableError(Metric):
    """Mean squared (``kind="mse"``) or absolute (``"mae"``) error per variable, then the mean over
    variables with at least one target. Sums in float64 across batches and processes."""

    full_state_update = False

    def __init__(self, n_variables: int, kind: str = "mse"):
        super().__init__()
        if kind not in ("mse", "mae"):
            raise ValueError(f"kind must be 'mse' or 'mae', got {kind!r}")
        self.kind = kind
        self.add_state("total", default=torch.zeros(n_variables, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.zeros(n_variables, dtype=torch.float64), dist_reduce_fx="sum")

    def update(self, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> None:
        """pred, target, mask: (B, C, M); mask True where a target exists."""
        err = (pred.double() - target.double()).masked_fill(~mask, 0.0)
        err = err.square() if self.kind == "mse" else err.abs()
        self.total += err.sum(dim=(0, 2))
        self.count += mask.sum(dim=(0, 2)).double()

    def compute(self) -> torch.Tensor:
        has = self.count > 0
        if not bool(has.any()):
            return torch.tensor(float("nan"), dtype=torch.float64)
        return (self.total[has] / self.count[has]).mean()

    def per_variable(self) -> torch.Tensor:
        """(C,) error of each variable (NaN where it has no target)."""
        return torch.where(self.count > 0, self.total / self.count.clamp_min(1), torch.nan)
