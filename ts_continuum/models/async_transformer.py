"""A Transformer for asynchronous multivariate series: every variable at its own times, forecasts
at any (time, variable).

Tokens are observations: each variable's history is a sequence of (time, value) tokens, never put
on a shared grid. Every layer (pre-norm, residual), in order:

1. attention over time within each variable's sequence, softmax or continuous (the integral over
   the values interpolated between the variable's own observation times), with rotary positions
   by real time when ``pos_encoding="rope"``;
2. attention across variables: each variable's summary (the mean of its tokens, a learned vector
   for a variable never observed) attends to the other variables' summaries of the same series,
   and the result is added to every token of the variable, so the variables inform each other;
3. with ``window_mixing``: the same mixing within windows of time (``models/window_mixing.py``):
   each variable's tokens in a window take from the variables observed in that window;
4. with ``series_attention``: softmax attention of every token over all the tokens of its series
   (every variable, rotary positions by real time), so a variable sees what the others did *when*,
   not only their summaries;
5. a feed-forward block.

A query (time s, variable c) starts from variable c's embedding, an embedding of the lead time s
(time after the forecast origin) and c's final summary after one more mixing across variables (so a
variable never observed is forecast from the others), reads variable c's tokens by attention at
its own time (the query-time form of the op: the query integrates over the whole interpolated
history; rotary positions make the scores see s minus each observation's time) and goes through a
feed-forward block to a value (with ``series_attention`` it also reads all of its series' tokens).
Attention over time within a variable is the only part that switches between softmax and
continuous: the variable mixing is over a set, and a series' tokens of different variables are not
one curve to interpolate along, so both stay softmax.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .feed_forward import FeedForward
from .layers import Attention, BackendName, Dropout, MultiHeadAttention, PosEncoding, QueryAttention, Sink
from .query_base import QueryModel, refuse_grid_positions
from .ragged import Ragged, read_by_row
from .window_mixing import TimeWindows


class VariableMixer(nn.Module):
    """Softmax attention across the variables of each series, on per-variable summaries."""

    def __init__(self, d_model: int, n_heads: int, dropout: float):
        super().__init__()
        self.n_heads = n_heads
        self.norm = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = Dropout(dropout)

    def forward(self, summary: torch.Tensor, observed: torch.Tensor | None = None) -> torch.Tensor:
        """summary: (B, C, d) -> (B, C, d) what each variable takes from the others; ``observed``
        (B, C): only these variables (and each variable itself) are attended to."""
        B, C, d = summary.shape
        q, k, v = self.qkv(self.norm(summary)).view(B, C, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        mask = None
        if observed is not None:
            mask = (observed[:, None, :] | torch.eye(C, dtype=torch.bool, device=summary.device))[:, None]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.dropout(self.out(o.transpose(1, 2).reshape(B, C, d)))


class AsyncLayer(nn.Module):
    """Attention over time within each variable, mixing across variables, feed-forward."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, series_attention: bool = False,
                 window_mixing: bool = False, **attn_kwargs):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, **attn_kwargs)
        self.mixer = VariableMixer(d_model, n_heads, dropout)
        self.mixed_to_tokens = nn.Linear(d_model, d_model)
        self.window_mixer = VariableMixer(d_model, n_heads, dropout) if window_mixing else None
        self.window_to_tokens = nn.Linear(d_model, d_model) if window_mixing else None
        self.series_norm = nn.LayerNorm(d_model) if series_attention else None
        self.series_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, attention="softmax",
                                              rope=attn_kwargs["rope"], sink="none") if series_attention else None
        if self.series_attn is not None:
            self.series_attn.switchable = False  # a series' tokens of all variables are not one curve
        self.ff = FeedForward(d_model, d_ff, dropout, pre_norm=True)

    def forward(self, h: torch.Tensor, times: torch.Tensor, ragged: Ragged, summary_of,
                series: Ragged | None = None, windows: TimeWindows | None = None) -> torch.Tensor:
        """h: (T, d) the observed rows' tokens, flat; times: (T,) in position steps; ``summary_of``
        maps row means (R, d) to every series' (B, C, d) and the mixed result back to rows;
        ``series``: the same tokens grouped by series (needed with series attention); ``windows``:
        the tokens' cells of time (needed with window mixing)."""
        h = h + attend_by_row(self.attn, self.norm(h), times, ragged)
        mixed = summary_of(ragged.mean(h), self.mixer)
        h = h + self.mixed_to_tokens(mixed)[ragged.row]
        if self.window_mixer is not None:
            h = h + self.window_to_tokens(windows.broadcast(self.window_mixer(windows.mean(h), windows.observed)))
        if self.series_attn is not None:
            h = h + attend_by_row(self.series_attn, self.series_norm(h), times, series)
        return h + self.ff(h)


def attend_by_row(attn: MultiHeadAttention, x: torch.Tensor, times: torch.Tensor, ragged: Ragged) -> torch.Tensor:
    """Self-attention of the flat tokens ``x`` (T, d) within each row of ``ragged``, per bucket of
    similar length; returns (T, d)."""
    attended = torch.zeros_like(x)
    for rows in ragged.buckets:
        index, lengths = ragged.gather_index(rows)
        full = bool((lengths == index.shape[1]).all())
        out = attn(x[index], times[index], None if full else lengths)
        attended = ragged.scatter(out, rows, attended)
    return attended


class AsyncTransformer(QueryModel):
    """Forecasts at any (time, variable) from each variable's own observations (module docstring).

    Args:
        n_variables: number of variables C.
        d_model, n_heads, n_layers, d_ff, dropout: the Transformer's sizes.
        attention: "softmax" or "continuous" for the attention over time (same parameters).
        pos_encoding: "rope" (rotary positions by real time, queries and tokens alike) or "none"
            (the tokens carry no time; continuous attention still sees the gaps through its integral).
        sink: the extra point before a variable's first observation in the continuous integral
            ("none": integrate over the observed span only; see docs/continuous-attention.md).
        time_step: the data's time unit per position step: rotary angles and the sink's gap are
            counted in steps of this many time units (1/12 of an hour: 5 minutes for PhysioNet).
        horizon: the span of lead times the lead-time embedding is scaled to (data's time unit).
        attention_backend: "auto", "torch" or "triton" for continuous attention.
        series_attention: also let every token, and every query, attend to all the tokens of its
            series (every variable; softmax with the positions above): the variables inform each
            other observation by observation, not only through their summaries. Costs attention
            over a whole series' history (about 240 tokens a PhysioNet stay) in every layer.
        window_mixing: the width (data's time unit) of windows counted back from the forecast
            origin within which the variables also inform each other (each variable's mean in the
            window attends to the others observed in it; t-PatchGNN uses 8 hours on PhysioNet);
            0 turns it off.
    """

    def __init__(
        self,
        n_variables: int,
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
        series_attention: bool = False,
        window_mixing: float = 0.0,
    ):
        super().__init__(locals())
        refuse_grid_positions(pos_encoding)
        if not (time_step > 0 and math.isfinite(time_step)) or not (horizon > 0 and math.isfinite(horizon)):
            raise ValueError(f"time_step and horizon must be positive numbers, got {time_step!r}, {horizon!r}")
        self.d_model = d_model
        self.variable = nn.Embedding(n_variables, d_model)
        self.value = nn.Linear(1, d_model)
        self.unobserved = nn.Parameter(torch.zeros(d_model))
        self.lead_freqs = nn.Parameter(torch.randn(d_model // 2) * 2.0)  # learned periodic lead-time features
        self.lead = nn.Linear(d_model // 2 * 2 + 1, d_model)
        attn = dict(attention=attention, rope=pos_encoding == "rope", sink=sink, backend=attention_backend)
        if not isinstance(series_attention, bool):
            raise ValueError(f"series_attention must be True or False, got {series_attention!r}")
        if isinstance(window_mixing, bool) or not (isinstance(window_mixing, (int, float)) and window_mixing >= 0
                                                    and math.isfinite(window_mixing)):
            raise ValueError(f"window_mixing must be a window width >= 0 in the data's time unit (0: off), "
                             f"got {window_mixing!r}")
        self.layers = nn.ModuleList(AsyncLayer(d_model, n_heads, d_ff, dropout, series_attention, window_mixing > 0,
                                               **attn) for _ in range(n_layers))
        self.final_mixer = VariableMixer(d_model, n_heads, dropout)
        self.summary_to_query = nn.Linear(d_model, d_model)
        self.query_norm, self.token_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.read = QueryAttention(d_model, n_heads, dropout=dropout, **attn)
        self.series_read = QueryAttention(d_model, n_heads, dropout=dropout, attention="softmax", rope=attn["rope"],
                                          sink="none") if series_attention else None
        if self.series_read is not None:
            self.series_read.switchable = False
        self.ff = FeedForward(d_model, d_ff, dropout, pre_norm=True)
        self.head = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, 1))

    def lead_embedding(self, lead: torch.Tensor) -> torch.Tensor:
        """(...,) lead times (data's unit) -> (..., d) features: linear and learned periodic."""
        return lead_features(lead, self.config["horizon"], self.lead_freqs, self.lead)

    def forward(self, values: torch.Tensor, times: torch.Tensor, lengths: torch.Tensor,
                query_times: torch.Tensor, query_lengths: torch.Tensor) -> torch.Tensor:
        """Forecasts (B, C, M) at ``query_times`` (contract: ``models/query_base.py``); padded
        query positions hold 0."""
        self.check_input(values, times, lengths, query_times, query_lengths)
        B, C, N = values.shape
        M = query_times.shape[-1]
        dtype = self.value.weight.dtype
        steps = 1.0 / self.config["time_step"]
        flat_len = lengths.reshape(-1)
        rows = torch.nonzero(flat_len > 0).squeeze(1)  # observed (series, variable) rows, flat in B x C
        variable_of_row = rows % C
        unobserved = (self.variable.weight + self.unobserved).repeat(B, 1)  # (B*C, d)

        def summary_of(row_means: torch.Tensor, mixer: nn.Module | None = None) -> torch.Tensor:
            """Row means -> every (series, variable)'s summary; with ``mixer``, what each observed
            row takes from the other variables of its series."""
            summary = unobserved.index_copy(0, rows, row_means.to(unobserved.dtype))
            return summary if mixer is None else mixer(summary.view(B, C, -1)).reshape(B * C, -1)[rows]

        h = torch.zeros(0, self.d_model, dtype=dtype, device=values.device)
        series = None
        if rows.numel():
            ragged = Ragged(flat_len[rows])
            if self.series_read is not None:  # tokens are flat series by series: one row per series with history
                series_len = lengths.sum(-1)
                in_series = torch.nonzero(series_len > 0).squeeze(1)
                series = Ragged(series_len[in_series])
            observed = torch.arange(N, device=values.device) < lengths[..., None]
            h_times = times[observed].to(torch.float64) * steps
            h = self.value(values[observed].to(dtype)[:, None]) + self.variable(variable_of_row)[ragged.row]
            windows = None
            if self.config["window_mixing"] > 0:
                windows = TimeWindows(times[observed], rows[ragged.row], C, self.config["window_mixing"])
            for layer in self.layers:
                h = layer(h, h_times, ragged, summary_of, series, windows)
            summary = summary_of(ragged.mean(h))
        else:
            summary = unobserved
        summary = summary + self.final_mixer(summary.view(B, C, -1)).reshape(B * C, -1)  # unobserved ones too

        asked = torch.arange(M, device=values.device) < query_lengths[..., None]  # (B, C, M)
        flat_q_len = query_lengths.reshape(-1)
        q_row = torch.repeat_interleave(torch.arange(B * C, device=values.device), flat_q_len)
        q_times = query_times[asked]
        q = self.variable(q_row % C) + self.lead_embedding(q_times) + self.summary_to_query(summary)[q_row]
        if rows.numel() and q.shape[0]:
            qn, hn, q_steps = self.query_norm(q), self.token_norm(h), q_times.to(torch.float64) * steps
            read = read_by_row(self.read, qn, q_steps, offsets_of(flat_q_len)[rows], flat_q_len[rows], hn, h_times,
                              ragged)
            if self.series_read is not None:  # queries are series-major too
                series_q = query_lengths.sum(-1)
                read = read + read_by_row(self.series_read, qn, q_steps, offsets_of(series_q)[in_series],
                                         series_q[in_series], hn, h_times, series)
            q = q + read
        q = q + self.ff(q)
        out = torch.zeros(B, C, M, dtype=q.dtype, device=values.device)
        return out.masked_scatter(asked, self.head(q).squeeze(-1))


def lead_features(lead: torch.Tensor, horizon: float, freqs: nn.Parameter, linear: nn.Linear) -> torch.Tensor:
    """(...,) lead times -> (..., d): ``linear`` of the lead scaled by ``horizon`` and its sines and
    cosines at the learned ``freqs``."""
    x = (lead / horizon).to(linear.weight.dtype)[..., None]
    angles = x * freqs
    return linear(torch.cat([x, torch.sin(angles), torch.cos(angles)], dim=-1))


def offsets_of(counts: torch.Tensor) -> torch.Tensor:
    """Where each of consecutive runs of ``counts`` items starts in their flat concatenation."""
    return torch.cumsum(counts, 0) - counts
