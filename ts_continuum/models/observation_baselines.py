"""Simple forecasts of observation sets, the floor any model must clear: the last observation of the
variable carried forward, and the mean of the variable's history. A variable without history is
forecast at ``fallback`` (e.g. its mean over the training series; ``PhysioNetDataModule.train_means``)."""

from __future__ import annotations

import torch

from .query_base import QueryModel


class _HistoryStatistic(QueryModel):
    def __init__(self, arguments: dict):
        super().__init__(arguments)
        fallback = self.config.get("fallback")
        values = torch.zeros(self.n_variables) if fallback is None else torch.as_tensor(fallback, dtype=torch.float32)
        if values.shape != (self.n_variables,):
            raise ValueError(f"fallback must hold one value per variable ({self.n_variables}), "
                             f"got {tuple(values.shape)}")
        self.register_buffer("fallback", values)

    def statistic(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, values, times, lengths, query_times, query_lengths) -> torch.Tensor:
        self.check_input(values, times, lengths, query_times, query_lengths)
        stat = torch.where(lengths > 0, self.statistic(values, lengths), self.fallback.to(values.dtype))
        M = query_times.shape[-1]
        valid = torch.arange(M, device=values.device) < query_lengths[..., None]
        return torch.where(valid, stat[..., None].expand(-1, -1, M), torch.zeros((), dtype=values.dtype))


class LastObservation(_HistoryStatistic):
    """Each variable's last observed value, at every query time."""

    def __init__(self, n_variables: int, fallback: list[float] | None = None):
        super().__init__(locals())

    def statistic(self, values, lengths):
        return torch.gather(values, 2, (lengths - 1).clamp_min(0)[..., None]).squeeze(-1)


class HistoryMean(_HistoryStatistic):
    """The mean of each variable's observed history, at every query time."""

    def __init__(self, n_variables: int, fallback: list[float] | None = None):
        super().__init__(locals())

    def statistic(self, values, lengths):
        valid = torch.arange(values.shape[-1], device=values.device) < lengths[..., None]
        return (values * valid).sum(-1) / lengths.clamp_min(1)
