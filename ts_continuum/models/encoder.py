"""An encoder-only Transformer whose tokens are the observation times themselves.

Each token is one time step at which at least one channel was observed: its values (RevIN-scaled,
unobserved channels zeroed) and the observation mask go through a linear embedding, so a missing
value is visible to the model as missing, never a silent zero; sinusoidal features of the token's
real time (relative to the forecast origin) are added: the value + time embedding. Token
timestamps also go to continuous attention and to RoPE; learned positions index tokens from the
most recent one. A pooled
summary (masked mean and last token) feeds a linear head to horizon x channels.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import ForecastModel
from .layers import Attention, BackendName, Dropout, Encoder, PosEncoding, RevIN, Sink
from .packing import pack, right_align, slot_index


class EncoderTransformer(ForecastModel):
    """Encoder-only Transformer with one token per observed time step, softmax or continuous attention.

    Args:
        n_channels: number of series C, embedded together (one token holds every channel's value).
        lookback: input length L, in steps.
        horizon: forecast length H, in steps.
        d_model: width of the tokens.
        n_heads: attention heads; must divide d_model (into an even head size with rope).
        n_layers: encoder layers.
        d_ff: hidden width of each layer's feed-forward block.
        dropout: dropout on the tokens, the attention output and the feed-forward block.
        attention: "softmax" or "continuous" (softmax integrated over keys and values linearly
            interpolated between token times, so it sees time gaps); both own the same parameters.
        pos_encoding: "learned" (a vector per slot, counted from the most recent token), "rope"
            (rotary, by token time) or "none"; a sinusoidal embedding of each token's time is
            added in every case.
        sink: the extra point before the first token in the continuous integral: "zero", "repeat"
            (a copy of the first token), "learned" or "none". Softmax uses only "learned" (an extra
            learned key and value).
        revin: reversible instance normalisation of each channel, over its observed values.
        attention_backend: continuous attention's implementation: "auto" (the Triton kernel on
            CUDA where it applies, else compiled torch), "torch" (exact, eager) or "triton".
            Softmax ignores it.
    """

    def __init__(
        self,
        n_channels: int,
        lookback: int = 96,
        horizon: int = 96,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int = 128,
        dropout: float = 0.1,
        attention: Attention = "softmax",
        pos_encoding: PosEncoding = "learned",
        sink: Sink = "zero",
        revin: bool = True,
        attention_backend: BackendName = "auto",
    ):
        super().__init__(locals())
        self.revin = RevIN(n_channels) if revin else None
        self.embed = nn.Linear(2 * n_channels, d_model)  # [values, observed mask]
        self.register_buffer("grid", torch.arange(-lookback + 1, 1, dtype=torch.float32), persistent=False)
        if pos_encoding == "learned":
            self.pos = nn.Parameter(torch.empty(lookback, d_model).uniform_(-0.02, 0.02))
        self.dropout = Dropout(dropout)
        self.encoder = Encoder(
            n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff, dropout=dropout, norm="layer",
            attention=attention, rope=pos_encoding == "rope", sink=sink, backend=attention_backend,
        )
        self.head = nn.Linear(2 * d_model, horizon * n_channels)

    def time_embedding(self, t: torch.Tensor) -> torch.Tensor:
        """Sinusoidal features of each token's real time (relative to the forecast origin)."""
        d = self.embed.out_features
        freqs = 10000.0 ** (-torch.arange(0, d, 2, device=t.device, dtype=torch.float32) / d)
        angles = t.to(torch.float32)[..., None] * freqs
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)[..., :d].to(self.embed.weight.dtype)

    def forward(
        self, x: torch.Tensor, x_mask: torch.Tensor | None = None, x_time: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x: (B, L, C) scaled values (anything where ``x_mask`` is False); x_mask: (B, L, C) bool;
        x_time: (B, L) or (L,) times in nominal steps relative to the forecast origin (last input
        slot = 0, strictly increasing; unused when the window is complete and unit-spaced). Returns
        (B, horizon, C)."""
        regular = self.check_input(x, x_mask, x_time)
        B, L, C = x.shape
        stats = None
        if self.revin is not None:
            x, stats = self.revin.normalize(x, x_mask)
        observed = x_mask if x_mask is not None else torch.ones_like(x, dtype=torch.bool)
        feats = torch.cat([torch.where(observed, x, torch.zeros_like(x)), observed.to(x.dtype)], dim=-1)
        if regular:
            times, lengths = None, None
            tokens = self.embed(feats) + self.time_embedding(self.grid)
            if self.pos_encoding == "learned":
                tokens = tokens + self.pos
        else:
            t = self.input_times(x_time, x)
            step_seen = observed.any(-1)
            lengths, (feats, times) = pack(step_seen, feats, t)
            if bool((lengths == 0).any()):
                raise ValueError("every window needs at least one observed time step")
            tokens = self.embed(feats) + self.time_embedding(times)
            if self.pos_encoding == "learned":
                tokens = tokens + self.pos[slot_index(lengths, L)]
            if bool((lengths == L).all()):
                lengths = None
        z = self.encoder(self.dropout(tokens), times, lengths)
        if lengths is None:
            pooled = torch.cat([z.mean(1), z[:, -1]], dim=-1)
        else:
            valid = (torch.arange(L, device=x.device) < lengths[:, None]).unsqueeze(-1)
            mean = (z * valid).sum(1) / lengths[:, None]
            pooled = torch.cat([mean, right_align(z, lengths)[:, -1]], dim=-1)
        y = self.head(pooled).view(B, self.horizon, C)
        if self.revin is not None:
            y = self.revin.denormalize(y, stats)
        return y
