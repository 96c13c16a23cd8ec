"""Building blocks shared by the forecasting models: attention, encoder layer, norms, RevIN.

Softmax and continuous attention share one module with one parameter set, so a model can be
switched from one to the other (also on a trained checkpoint) and the two are compared fairly.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
import torch.nn.functional as F
from torch import nn

from ..attention.backends import BACKENDS, BackendName
from ..attention.choices import check_choice
from ..attention.op import SINKS, Sink, attend
from ..attention.rope import apply_rope
from .dropout import Dropout
from .feed_forward import FeedForward

# The models' string options. Literal types, so the CLI lists the choices and refuses a typo when
# parsing; the tuples drive the checks for Python callers, so each list is written once (the sinks
# are continuous_attention's own). Layers call the op's unchecked entry (``attend``): the models check
# their input once, before any layer runs.
Attention = Literal["softmax", "continuous"]
PosEncoding = Literal["learned", "rope", "none"]
ATTENTIONS: tuple[str, ...] = get_args(Attention)
POS_ENCODINGS: tuple[str, ...] = get_args(PosEncoding)


class _TimedAttention(nn.Module):
    """What self- and query attention share: heads, the softmax/continuous switch, rotary positions,
    the sink (one parameter set for both kinds) and the two attention computations."""

    def __init__(self, d_model: int, n_heads: int, attention: Attention, rope: bool, sink: Sink, dropout: float,
                 backend: BackendName):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        if rope and self.head_dim % 2:  # fail at construction, not at the first forward pass
            raise ValueError(f"rotary positions (pos_encoding='rope') need an even head dimension, got d_model "
                             f"{d_model} / n_heads {n_heads} = {self.head_dim}; change d_model or n_heads")
        self.attention = check_choice("attention", attention, ATTENTIONS)
        self.sink = check_choice("sink", sink, SINKS)
        self.rope, self.backend = rope, check_choice("backend", backend, BACKENDS)

    def _output_layers(self, d_model: int, dropout: float) -> None:
        """The output projection, dropout and sink parameters, made after the subclass's input
        projections (the order the weights are drawn in, so a seed gives the same model as before)."""
        self.out = nn.Linear(d_model, d_model)
        self.dropout = Dropout(dropout)
        if self.sink == "learned":
            self.sink_k = nn.Parameter(0.02 * torch.randn(self.n_heads, self.head_dim))
            self.sink_v = nn.Parameter(0.02 * torch.randn(self.n_heads, self.head_dim))

    def _attend(self, q, k, v, times, lengths, q_lengths):
        """(B, H, Tq, D) outputs. Continuous: the op's unchecked entry (the model checked its input
        once; the op's own checks would wait on the device in every layer). Softmax: keys masked by
        ``lengths``, the learned sink as an extra key/value, padded query rows (``q_lengths``) 0."""
        learned = self.sink == "learned"
        if self.attention == "continuous":
            return attend(q, k, v, times=times, causal=False, sink=self.sink, sink_k=self.sink_k if learned else None,
                          sink_v=self.sink_v if learned else None, sink_gap=1.0, lengths=lengths,
                          q_lengths=q_lengths, scale=None, backend=self.backend)
        B, H, T = k.shape[:3]
        mask = None
        if lengths is not None:  # keys only: padded query rows still see valid keys (no NaN)
            mask = (torch.arange(T, device=q.device) < lengths[:, None])[:, None, None, :]
        if learned:
            k = torch.cat([self.sink_k[None, :, None].expand(B, H, 1, -1).to(k.dtype), k], dim=2)
            v = torch.cat([self.sink_v[None, :, None].expand(B, H, 1, -1).to(v.dtype), v], dim=2)
            if mask is not None:
                mask = F.pad(mask, (1, 0), value=True)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        if q_lengths is not None:  # padded query rows output 0, as in the continuous op
            o = o.masked_fill((torch.arange(q.shape[2], device=q.device) >= q_lengths[:, None])[:, None, :, None], 0.0)
        return o


class MultiHeadAttention(_TimedAttention):
    """Multi-head self-attention over tokens with timestamps, softmax or continuous.

    ``sink`` shapes the continuous integral (docs/continuous-attention.md). Softmax attention has
    no integral, so only ``sink="learned"`` means something there: an extra learned key/value
    token (the same parameters the continuous sink uses, so both kinds own identical parameters).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        attention: Attention = "softmax",
        rope: bool = False,
        sink: Sink = "zero",
        dropout: float = 0.0,
        backend: BackendName = "auto",
    ):
        super().__init__(d_model, n_heads, attention, rope, sink, dropout, backend)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self._output_layers(d_model, dropout)

    def forward(self, x: torch.Tensor, times: torch.Tensor | None, lengths: torch.Tensor | None) -> torch.Tensor:
        """x: (B, T, d_model); times: (B, T), (T,) or None (regular); lengths: (B,) or None."""
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rope:
            # positions from the first token (always valid: padding is on the right), as on the
            # regular path: scores between tokens see only differences, but a learned sink key is
            # not rotated, so the origin must not depend on which path ran
            pos = times - times[..., :1] if times is not None else torch.arange(T, device=x.device, dtype=torch.float32)
            q, k = apply_rope(q, pos), apply_rope(k, pos)
        o = self._attend(q, k, v, times, lengths, None)
        return self.dropout(self.out(o.transpose(1, 2).reshape(B, T, -1)))


class QueryAttention(_TimedAttention):
    """Multi-head attention of queries at their own times over timestamped tokens, softmax or
    continuous (each query integrates over the whole interpolated token sequence).

    Rotary positions, when on, rotate queries and keys by their times (relative to one origin per
    row), so scores see query time minus token time. ``sink`` as in :class:`MultiHeadAttention`.
    """

    def __init__(self, d_model: int, n_heads: int, attention: Attention = "softmax", rope: bool = False,
                 sink: Sink = "none", dropout: float = 0.0, backend: BackendName = "auto"):
        super().__init__(d_model, n_heads, attention, rope, sink, dropout, backend)
        self.q = nn.Linear(d_model, d_model)
        self.kv = nn.Linear(d_model, 2 * d_model)
        self._output_layers(d_model, dropout)

    def forward(self, x: torch.Tensor, x_times: torch.Tensor, x_lengths: torch.Tensor | None,
                tokens: torch.Tensor, times: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        """x: (R, M, d) queries at ``x_times`` (R, M), ``x_lengths`` (R,) valid; tokens: (R, N, d) at
        ``times`` (R, N), ``lengths`` (R,) valid (at least 1). Returns (R, M, d)."""
        R, M, _ = x.shape
        N = tokens.shape[1]
        q = self.q(x).view(R, M, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(tokens).view(R, N, 2, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.rope:
            origin = times[:, :1]
            q, k = apply_rope(q, x_times - origin), apply_rope(k, times - origin)
        o = self._attend(q, k, v, times, lengths, x_lengths)
        return self.dropout(self.out(o.transpose(1, 2).reshape(R, M, -1)))


class MaskedBatchNorm(nn.Module):
    """BatchNorm over (batch x tokens) per feature, as PatchTST, counting valid tokens only."""

    def __init__(self, d_model: int, momentum: float = 0.1, eps: float = 1e-5):
        super().__init__()
        self.bn = nn.BatchNorm1d(d_model, momentum=momentum, eps=eps)

    def forward(self, x: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
        if valid is None:
            return self.bn(x.reshape(-1, x.shape[-1])).view_as(x)
        out = torch.zeros_like(x)
        out[valid] = self.bn(x[valid])
        return out


class MaskedLayerNorm(nn.LayerNorm):
    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:  # noqa: D102
        return super().forward(x)


class EncoderLayer(nn.Module):
    """Post-norm Transformer encoder layer (PatchTST's layout: BatchNorm after each residual)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, norm: str = "batch", **attn_kwargs):
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, **attn_kwargs)
        self.ff = FeedForward(d_model, d_ff, dropout)
        norm_cls = {"batch": MaskedBatchNorm, "layer": MaskedLayerNorm}[check_choice("norm", norm, ("batch", "layer"))]
        self.norm1, self.norm2 = norm_cls(d_model), norm_cls(d_model)

    def forward(self, x, times, lengths, valid):
        x = self.norm1(x + self.attn(x, times, lengths), valid)
        return self.norm2(x + self.ff(x), valid)


class Encoder(nn.Module):
    def __init__(self, n_layers: int, **layer_kwargs):
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(**layer_kwargs) for _ in range(n_layers))

    def forward(self, x, times=None, lengths=None):
        valid = None
        if lengths is not None:
            valid = torch.arange(x.shape[1], device=x.device) < lengths[:, None]
        for layer in self.layers:
            x = layer(x, times, lengths, valid)
        return x

    def set_attention(self, kind: Attention) -> None:
        kind = check_choice("attention", kind, ATTENTIONS)
        for layer in self.layers:
            layer.attn.attention = kind


class RevIN(nn.Module):
    """Reversible instance normalisation per series, over observed values only."""

    def __init__(self, n_channels: int, affine: bool = False, eps: float = 1e-5):
        super().__init__()
        self.eps, self.affine = eps, affine
        if affine:
            self.weight = nn.Parameter(torch.ones(n_channels))
            self.bias = nn.Parameter(torch.zeros(n_channels))

    def normalize(self, x: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, tuple]:
        """x: (B, L, C) (NaN allowed where mask is False) -> normalised x (unobserved entries 0, or
        ``bias`` when affine) and the statistics (detached: no gradient flows through them)."""
        if mask is None:
            mean = x.mean(1, keepdim=True)
            std = torch.sqrt(x.var(1, keepdim=True, unbiased=False) + self.eps)
        else:
            w = mask.to(x.dtype)  # a channel without observations is refused by ForecastModel.check_input
            count = w.sum(1, keepdim=True).clamp_min(1.0)
            x0 = torch.where(mask, x, torch.zeros_like(x))
            mean = x0.sum(1, keepdim=True) / count
            var = (torch.where(mask, x - mean, torch.zeros_like(x)) ** 2).sum(1, keepdim=True) / count
            std = torch.sqrt(var + self.eps)
        z = (x - mean) / std
        if mask is not None:  # unobserved entries may be NaN: 0 * NaN would make the affine weight's gradient NaN
            z = torch.where(mask, z, torch.zeros_like(z))
        if self.affine:
            z = z * self.weight + self.bias
        return z, (mean.detach(), std.detach())

    def denormalize(self, y: torch.Tensor, stats: tuple) -> torch.Tensor:
        mean, std = stats
        if self.affine:
            y = (y - self.bias) / (self.weight + self.eps * self.eps)
        return y * std + mean
