"""Patch tokens for asynchronous multivariate series: each variable's observations within a patch
of time become one token; the tokens attend over time within each variable and across the variables
of each patch (as t-PatchGNN, Zhang et al. ICML 2024, relates them with a graph per patch).

A series' history is cut into ``history / patch`` patches of fixed width counted back from the
forecast origin (observations older than the history join the first patch, so none is dropped).

1. **Patch encoding.** Each observation is a token (its value and variable, one feed-forward block);
   the tokens of one (variable, patch) cell are read by a learned query at the patch's end, with
   attention over the observations' real times: continuous (the integral over the values
   interpolated between them) or softmax, rotary positions by real time. Where t-PatchGNN encodes a
   patch by a time-aware convolution, this is the op's home in the model. A cell's token also
   carries how many observations it holds; an empty cell is a learned token.
2. **Layers** over the (variable, patch) tokens, pre-norm and residual: attention over the patches
   of each variable (switchable, rotary positions at the patch centres); attention across the
   variables of each patch, keys limited to the variables observed in it (the graph over
   variables, per patch of time); a feed-forward block.
3. **Queries.** A query (time s, variable c) starts from c's embedding, an embedding of the lead
   time s and a projection of c's patch tokens laid side by side (t-PatchGNN's decoder input),
   reads c's patch tokens by attention at its own time (the query-time form of the op) and goes
   through a feed-forward block to a value.

Tokens per series: one per (variable, patch), so the layers cost the same whatever the sampling
rate; only the patch encoding sees every observation, once.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .async_transformer import VariableMixer, lead_features
from .feed_forward import FeedForward
from .layers import Attention, BackendName, MultiHeadAttention, PosEncoding, QueryAttention, Sink
from .query_base import QueryModel, refuse_grid_positions
from .ragged import Ragged, read_by_row, read_fixed_rows


class PatchLayer(nn.Module):
    """Attention over a variable's patches, across the variables of a patch, feed-forward."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, **attn_kwargs):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, **attn_kwargs)
        self.mixer = VariableMixer(d_model, n_heads, dropout)
        self.ff = FeedForward(d_model, d_ff, dropout, pre_norm=True)

    def forward(self, z: torch.Tensor, centres: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
        """z: (B, C, P, d) patch tokens; centres: (P,) patch centres in position steps; observed:
        (B, C, P) whether a cell holds observations."""
        B, C, P, d = z.shape
        z = z + self.attn(self.norm(z).view(B * C, P, d), centres, None).view(B, C, P, d)
        by_patch = z.transpose(1, 2).reshape(B * P, C, d)
        mixed = self.mixer(by_patch, observed.transpose(1, 2).reshape(B * P, C))
        z = z + mixed.view(B, P, C, d).transpose(1, 2)
        return z + self.ff(z)


class PatchGraphTransformer(QueryModel):
    """Forecasts at any (time, variable) from patch tokens of each variable's observations (module
    docstring).

    Args:
        n_variables: number of variables C.
        history: the history span before the forecast origin (data's time unit; 24 h for PhysioNet).
        patch: the patches' width (data's time unit; t-PatchGNN uses 8 hours on PhysioNet);
            ``history / patch`` rounded up patches.
        d_model, n_heads, n_layers, d_ff, dropout: the sizes.
        attention: "softmax" or "continuous" for every attention over time (patch encoding, patches
            of a variable, queries); same parameters.
        pos_encoding: "rope" (rotary positions by real time) or "none".
        sink: the extra point before the first token in the continuous integral.
        time_step: the data's time unit per position step (1/12 of an hour: 5 minutes).
        horizon: the span of lead times the lead-time embedding is scaled to (data's time unit).
        attention_backend: "auto", "torch" or "triton" for continuous attention.
    """

    def __init__(
        self,
        n_variables: int,
        history: float = 24.0,
        patch: float = 8.0,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 128,
        dropout: float = 0.1,
        attention: Attention = "continuous",
        pos_encoding: PosEncoding = "rope",
        sink: Sink = "none",
        time_step: float = 1.0 / 12.0,
        horizon: float = 24.0,
        attention_backend: BackendName = "auto",
    ):
        super().__init__(locals())
        refuse_grid_positions(pos_encoding)
        for name, value in (("history", history), ("patch", patch), ("time_step", time_step), ("horizon", horizon)):
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (number and value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number in the data's time unit, got {value!r}")
        self.d_model, self.width = d_model, float(patch)
        self.n_patches = math.ceil(history / patch - 1e-9)
        ends = (torch.arange(self.n_patches, dtype=torch.float64) - self.n_patches + 1) * self.width
        self.register_buffer("ends", ends, persistent=False)  # each patch's end (data's unit), the last at 0
        attn = dict(attention=attention, rope=pos_encoding == "rope", sink=sink, backend=attention_backend)
        self.variable = nn.Embedding(n_variables, d_model)
        self.value = nn.Linear(1, d_model)
        self.token_ff = FeedForward(d_model, d_ff, dropout, pre_norm=True)
        self.patch_position = nn.Embedding(self.n_patches, d_model)
        self.patch_query = nn.Parameter(torch.zeros(d_model))
        self.empty = nn.Parameter(torch.zeros(d_model))
        self.count = nn.Linear(1, d_model)
        self.encode_norm, self.obs_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.encode = QueryAttention(d_model, n_heads, dropout=dropout, **attn)
        self.layers = nn.ModuleList(PatchLayer(d_model, n_heads, d_ff, dropout, **attn) for _ in range(n_layers))
        self.flat = nn.Sequential(nn.LayerNorm(self.n_patches * d_model), nn.Linear(self.n_patches * d_model, d_model))
        self.lead_freqs = nn.Parameter(torch.randn(d_model // 2) * 2.0)
        self.lead = nn.Linear(d_model // 2 * 2 + 1, d_model)
        self.query_norm, self.patch_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.read = QueryAttention(d_model, n_heads, dropout=dropout, **attn)
        self.ff = FeedForward(d_model, d_ff, dropout, pre_norm=True)
        self.head = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, 1))

    def patch_of(self, times: torch.Tensor) -> torch.Tensor:
        """Times (data's unit, relative to the origin) -> patch index; older ones join patch 0."""
        index = torch.floor(times.to(torch.float64) / self.width).long() + self.n_patches
        return index.clamp(0, self.n_patches - 1)

    def encode_patches(self, values: torch.Tensor, times: torch.Tensor,
                       lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Observation sets (checked) -> (B, C, P, d) patch tokens and (B, C, P) whether each
        (variable, patch) cell holds observations."""
        B, C, N = values.shape
        P, d = self.n_patches, self.d_model
        dtype, device = self.value.weight.dtype, values.device
        steps = 1.0 / self.config["time_step"]
        cell_row = torch.arange(B * C * P, device=device) // P  # cells flat in (series, variable, patch) order
        cell_patch = torch.arange(B * C * P, device=device) % P
        observed = torch.arange(N, device=device) < lengths[..., None]
        obs_times = times[observed]
        obs_row = torch.repeat_interleave(torch.arange(B * C, device=device), lengths.reshape(-1))
        cell = obs_row * P + self.patch_of(obs_times)  # non-decreasing: times increase within a row
        counts = torch.bincount(cell, minlength=B * C * P)
        z = (self.variable(cell_row % C) + self.patch_position(cell_patch)
             + self.count(torch.log1p(counts.to(dtype))[:, None]))
        filled = torch.nonzero(counts > 0).squeeze(1)
        if filled.numel():
            tokens = self.value(values[observed].to(dtype)[:, None]) + self.variable(obs_row % C)
            tokens = self.obs_norm(tokens + self.token_ff(tokens))
            query = self.encode_norm(z[filled] + self.patch_query)
            encoded = read_by_row(self.encode, query, self.ends[cell_patch[filled]] * steps,
                                  torch.arange(len(filled), device=device), torch.ones_like(filled), tokens,
                                  obs_times.to(torch.float64) * steps, Ragged(counts[filled]))
            z = z.index_add(0, filled, encoded)
        z = torch.where((counts > 0)[:, None], z, z + self.empty)
        return z.view(B, C, P, d), (counts > 0).view(B, C, P)

    def forward(self, values: torch.Tensor, times: torch.Tensor, lengths: torch.Tensor,
                query_times: torch.Tensor, query_lengths: torch.Tensor) -> torch.Tensor:
        """Forecasts (B, C, M) at ``query_times`` (contract: ``models/query_base.py``); padded
        query positions hold 0."""
        self.check_input(values, times, lengths, query_times, query_lengths)
        B, C, _ = values.shape
        M, P, d, device = query_times.shape[-1], self.n_patches, self.d_model, values.device
        steps = 1.0 / self.config["time_step"]
        z, observed = self.encode_patches(values, times, lengths)
        centres = (self.ends - self.width / 2) * steps
        for layer in self.layers:
            z = layer(z, centres, observed)

        asked = torch.arange(M, device=device) < query_lengths[..., None]  # (B, C, M)
        q_row = torch.repeat_interleave(torch.arange(B * C, device=device), query_lengths.reshape(-1))
        q_times = query_times[asked]
        z_rows = z.reshape(B * C, P, d)
        lead = lead_features(q_times, self.config["horizon"], self.lead_freqs, self.lead)
        q = self.variable(q_row % C) + lead + self.flat(z_rows.reshape(B * C, P * d))[q_row]
        if q.shape[0]:  # every query reads its own variable's patch tokens
            q = q + read_fixed_rows(self.read, self.query_norm(q), q_times.to(torch.float64) * steps,
                                    query_lengths.reshape(-1), self.patch_norm(z_rows), centres.expand(B * C, P))
        q = q + self.ff(q)
        out = torch.zeros(B, C, M, dtype=q.dtype, device=device)
        return out.masked_scatter(asked, self.head(q).squeeze(-1))
