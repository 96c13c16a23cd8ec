"""The conventional route for asynchronous data: interpolate each variable's history onto a regular
grid, forecast the grid with a regular model (PatchTST, either attention), and read the forecast at
the query times.

History: each variable is linearly interpolated at the grid times (bin centres, ``step`` apart,
ending ``step / 2`` before the origin), held constant before its first and after its last
observation; a variable never observed takes a learned value. Forecast: PatchTST forecasts
``horizon / step`` grid points (bin centres after the origin); a query is answered by linear
interpolation between them (constant beyond the first and last).
"""

from __future__ import annotations

import torch

from .layers import Attention, BackendName, PosEncoding, Sink
from .packing import interpolate_to_grid
from .patchtst import PatchTST
from .query_base import QueryModel


class GridPatchTST(QueryModel):
    """PatchTST on the history interpolated onto a regular grid (module docstring).

    Args:
        n_variables: number of variables C (PatchTST's channels).
        history: the history span (data's time unit, 24 h for PhysioNet) ending at the origin.
        horizon: the forecast span after the origin.
        step: the grid step (1 h).
        patch_len, stride, d_model, n_heads, n_layers, d_ff, dropout, attention, pos_encoding, sink,
            revin, attention_backend: PatchTST's, over the grid (patches of grid steps).
    """

    def __init__(
        self,
        n_variables: int,
        history: float = 24.0,
        horizon: float = 24.0,
        step: float = 1.0,
        patch_len: int = 4,
        stride: int = 2,
        d_model: int = 32,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 64,
        dropout: float = 0.1,
        attention: Attention = "softmax",
        pos_encoding: PosEncoding = "learned",
        sink: Sink = "zero",
        revin: bool = False,
        attention_backend: BackendName = "auto",
    ):
        super().__init__(locals())
        lookback, out = history / step, horizon / step
        if not (lookback >= 1 and out >= 1 and lookback == int(lookback) and out == int(out)):
            raise ValueError(f"history ({history}) and horizon ({horizon}) must be whole multiples of step ({step})")
        self.lookback, self.out_steps, self.step = int(lookback), int(out), step
        self.register_buffer("grid_in", (torch.arange(self.lookback) - self.lookback + 0.5) * step, persistent=False)
        self.register_buffer("grid_out", (torch.arange(self.out_steps) + 0.5) * step, persistent=False)
        self.unobserved = torch.nn.Parameter(torch.full((n_variables,), 0.5))
        self.patchtst = PatchTST(n_channels=n_variables, lookback=self.lookback, horizon=self.out_steps,
                                 patch_len=patch_len, stride=stride, d_model=d_model, n_heads=n_heads,
                                 n_layers=n_layers, d_ff=d_ff, dropout=dropout, attention=attention,
                                 pos_encoding=pos_encoding, sink=sink, revin=revin,
                                 attention_backend=attention_backend)

    def set_attention(self, kind: Attention) -> None:
        self.patchtst.set_attention(kind)
        self.config["attention"] = kind

    def grid_history(self, values, times, lengths) -> torch.Tensor:
        """(B, C, N) observation sets -> (B, lookback, C) interpolated grid."""
        B, C, N = values.shape
        rows = lengths.reshape(-1)
        seen = rows > 0
        filled = self.unobserved.to(values.dtype).repeat(B)[:, None].expand(B * C, self.lookback).clone()
        if bool(seen.any()):
            grid = interpolate_to_grid(values.reshape(B * C, N, 1)[seen], times.reshape(B * C, N)[seen], rows[seen],
                                       self.grid_in)
            filled[seen] = grid.squeeze(-1)
        return filled.view(B, C, self.lookback).transpose(1, 2)

    def forward(self, values, times, lengths, query_times, query_lengths) -> torch.Tensor:
        self.check_input(values, times, lengths, query_times, query_lengths)
        B, C, M = query_times.shape
        y = self.patchtst(self.grid_history(values, times, lengths))  # (B, out_steps, C)
        pos = (query_times / self.step - 0.5).clamp(0, self.out_steps - 1)
        lo = pos.floor().long().clamp(max=self.out_steps - 1)
        hi = (lo + 1).clamp(max=self.out_steps - 1)
        frac = (pos - lo).to(y.dtype)
        grid = y.transpose(1, 2)  # (B, C, out_steps)
        out = torch.gather(grid, 2, lo) * (1 - frac) + torch.gather(grid, 2, hi) * frac
        valid = torch.arange(M, device=values.device) < query_lengths[..., None]
        return torch.where(valid, out, torch.zeros_like(out))
