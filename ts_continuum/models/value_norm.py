"""Each variable's values in its own spread: inputs standardized, forecasts scaled back.

Data scaled to a common range can leave variables at very different spreads (PhysioNet's min-max
scaling puts pH at a standard deviation of 0.002 and GCS at 0.33): a shared linear value embedding
then barely sees the narrow variables' changes, and a shared output head forecasts them with the
noise of the wide ones. ``VariableNorm`` keeps every variable's mean and standard deviation over
the history values the model trains on (running, exact over all training batches seen; stored as
buffers, so saved with the weights and frozen in evaluation). Inputs enter as
``asinh((x - mean) / std)`` (linear near the mean, logarithmic in heavy tails, so an outlier of a
narrow variable cannot swamp its token); forecasts leave as ``mean + std * output``.
"""

from __future__ import annotations

import torch
from torch import nn

MIN_STD = 1e-6  # a variable constant in training: its deviations still enter, bounded by asinh


class VariableNorm(nn.Module):
    """Per-variable running mean and standard deviation of training inputs (module docstring)."""

    def __init__(self, n_variables: int):
        super().__init__()
        self.register_buffer("count", torch.zeros(n_variables, dtype=torch.int64))
        self.register_buffer("mean", torch.zeros(n_variables))
        self.register_buffer("m2", torch.zeros(n_variables))  # sum of squared deviations from the mean

    @torch.no_grad()
    def update(self, values: torch.Tensor, variable: torch.Tensor) -> None:
        """Merge a batch of observed ``values`` (T,) of ``variable`` (T,) into the statistics
        (Chan et al.'s pairwise update, in float64: exact whatever the batches)."""
        C = self.count.shape[0]
        x = values.detach().to(torch.float64)
        n_b = torch.bincount(variable, minlength=C).to(torch.float64)
        mean_b = torch.zeros(C, dtype=torch.float64, device=x.device).index_add_(0, variable, x) / n_b.clamp_min(1)
        m2_b = torch.zeros(C, dtype=torch.float64, device=x.device).index_add_(0, variable, (x - mean_b[variable]) ** 2)
        n = self.count.to(torch.float64)
        total = n + n_b
        delta = mean_b - self.mean.double()
        share = torch.where(total > 0, n_b / total.clamp_min(1), torch.zeros_like(total))
        self.mean.copy_(self.mean.double() + delta * share)
        self.m2.copy_(self.m2.double() + m2_b + delta ** 2 * n * share)
        self.count.add_(n_b.long())

    def std(self) -> torch.Tensor:
        """(C,) standard deviations; 1 for a variable never seen in training (left as it is)."""
        seen = self.count > 0
        var = self.m2 / self.count.clamp_min(1)
        return torch.where(seen, var.sqrt().clamp_min(MIN_STD), torch.ones_like(var))

    def inputs(self, values: torch.Tensor, variable: torch.Tensor) -> torch.Tensor:
        """Observed values (T,) -> their standardized, tail-compressed form; updates the statistics
        first when training."""
        if self.training:
            self.update(values, variable)
        return torch.asinh((values - self.mean[variable].to(values.dtype)) / self.std()[variable].to(values.dtype))

    def outputs(self, standardized: torch.Tensor, variable: torch.Tensor) -> torch.Tensor:
        """The model's outputs (Q,) in standard units -> forecasts in the data's units."""
        dtype = standardized.dtype
        return self.mean[variable].to(dtype) + self.std()[variable].to(dtype) * standardized
