"""Mixing across variables within windows of time.

``VariableMixer`` lets variables inform each other through whole-history summaries, which cannot
tell *when* something happened. Here a series' history is cut into windows of fixed width counted
back from the forecast origin; each variable's tokens in a window are summarised (their mean), the
summaries of the variables observed in that window attend to each other, and what each takes is
added back to its tokens of that window (as t-PatchGNN relates the variables within each patch of
time). Windows are fixed in time, not in the batch, so a series is mixed the same alone or batched.
"""

from __future__ import annotations

import torch


class TimeWindows:
    """Which (series, window, variable) cell each token falls in, and means per cell.

    Args:
        times: (T,) the tokens' times in the data's unit, relative to the forecast origin.
        series_row: (T,) each token's flat (series, variable) index, ``series * n_variables + variable``.
        n_variables: C.
        width: the windows' width w in the data's unit; windows are [k w, (k+1) w) for whole k, so
            [-w, 0) is the last before the origin.
    """

    def __init__(self, times: torch.Tensor, series_row: torch.Tensor, n_variables: int, width: float):
        window = torch.floor(times.to(torch.float64) / width).long()
        window = window - window.min()
        n_windows = int(window.max()) + 1
        group = (series_row // n_variables) * n_windows + window
        groups, group = torch.unique(group, return_inverse=True)  # only (series, window) pairs with tokens
        self.n_groups, self.n_variables = len(groups), n_variables
        self.cell = group * n_variables + series_row % n_variables
        self.counts = torch.bincount(self.cell, minlength=self.n_groups * n_variables)
        self.observed = (self.counts > 0).view(self.n_groups, n_variables)

    def mean(self, h: torch.Tensor) -> torch.Tensor:
        """(T, d) tokens -> (G, C, d) each cell's mean (zero where a variable has no token)."""
        sums = h.new_zeros(self.n_groups * self.n_variables, h.shape[-1]).index_add(0, self.cell, h)
        means = sums / self.counts.clamp_min(1)[:, None].to(h.dtype)
        return means.view(self.n_groups, self.n_variables, -1)

    def broadcast(self, per_cell: torch.Tensor) -> torch.Tensor:
        """(G, C, d) -> (T, d) each token's cell's row."""
        return per_cell.reshape(self.n_groups * self.n_variables, -1)[self.cell]
