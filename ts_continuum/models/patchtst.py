"""PatchTST (Nie et al., ICLR 2023), with softmax or continuous attention and irregular inputs.

Regular inputs follow the published model: channel independence, RevIN, patches of ``patch_len``
steps every ``stride`` steps with the last value repeated ``stride`` times at the end, a post-norm
Transformer encoder with BatchNorm, and a flatten head. Deviation: the published encoder passes
attention scores from layer to layer ("residual attention"); scores are not exposed by either
attention here, so both use plain attention.

Irregular inputs (docs/irregular.md): each channel's observed values are packed in time order,
patches are formed from ``patch_len`` consecutive *observations*, a patch's time is the mean time
of its observations, and the observations' offsets from that time (in patch lengths) enter the
patch embedding beside the values. Patch times (in strides) go to continuous attention and to
RoPE; learned positions index patches from the most recent one. Before the flatten head, the
encoded patches are read out at the regular patch times by linear interpolation in time (the
assumption continuous attention makes between observations), so every head input keeps its
meaning (how long before the forecast origin) whatever was dropped. On regular data the offsets
are constant and the read-out is the identity: the model equals the published one up to a bias.
"""

from __future__ import annotations

import torch
from torch import nn

from .base import ForecastModel
from .layers import Attention, BackendName, Dropout, Encoder, PosEncoding, RevIN, Sink
from .packing import interpolate_to_grid, pack, slot_index


class PatchTST(ForecastModel):
    """PatchTST with softmax or continuous attention, on regular or irregular inputs.

    The defaults are the published ETTh1 setting (lookback 336, patches of 16 steps every 8,
    d_model 16, 4 heads, 3 layers, d_ff 128, dropout 0.3, no head dropout).

    Args:
        n_channels: number of series C; each is patched and encoded on its own (channel independence).
        lookback: input length L, in steps.
        horizon: forecast length H, in steps.
        patch_len: steps per patch (on irregular inputs: observations per patch).
        stride: steps (irregular: observations) from one patch's start to the next.
        d_model: width of the patch tokens.
        n_heads: attention heads; must divide d_model (into an even head size with rope).
        n_layers: encoder layers.
        d_ff: hidden width of each layer's feed-forward block.
        dropout: dropout on the tokens, the attention output and the feed-forward block.
        head_dropout: dropout before the flatten head.
        individual: one flatten head per channel instead of one shared by all.
        attention: "softmax" or "continuous" (softmax integrated over keys and values linearly
            interpolated between patch times, so it sees time gaps); both own the same parameters.
        pos_encoding: "learned" (a vector per patch slot, counted from the most recent patch),
            "rope" (rotary, by patch time) or "none".
        sink: the extra point before the first patch in the continuous integral: "zero", "repeat"
            (a copy of the first patch), "learned" or "none". Softmax uses only "learned" (an extra
            learned key and value).
        revin: reversible instance normalisation of each series, over its observed values.
        revin_affine: RevIN learns a scale and shift per channel.
        attention_backend: continuous attention's implementation: "auto" (the Triton kernel on
            CUDA where it applies, else compiled torch), "torch" (exact, eager) or "triton".
            Softmax ignores it.
    """

    def __init__(
        self,
        n_channels: int,
        lookback: int = 336,
        horizon: int = 96,
        patch_len: int = 16,
        stride: int = 8,
        d_model: int = 16,
        n_heads: int = 4,
        n_layers: int = 3,
        d_ff: int = 128,
        dropout: float = 0.3,
        head_dropout: float = 0.0,
        individual: bool = False,
        attention: Attention = "softmax",
        pos_encoding: PosEncoding = "learned",
        sink: Sink = "zero",
        revin: bool = True,
        revin_affine: bool = False,
        attention_backend: BackendName = "auto",
    ):
        super().__init__(locals(), positive=("patch_len", "stride"))
        if lookback < patch_len:
            raise ValueError(f"lookback ({lookback}) must be at least patch_len ({patch_len})")
        self.patch_len, self.stride = patch_len, stride
        self.n_patches = (lookback + stride - patch_len) // stride + 1
        # times of the regular patches (centres, in strides, relative to the last input step = 0)
        centres = (torch.arange(self.n_patches) * stride - (lookback - 1) + (patch_len - 1) / 2) / stride
        self.register_buffer("patch_grid", centres, persistent=False)
        self.revin = RevIN(n_channels, affine=revin_affine) if revin else None
        self.embed = nn.Linear(2 * patch_len, d_model)  # [values, time offsets]
        if pos_encoding == "learned":
            self.pos = nn.Parameter(torch.empty(self.n_patches, d_model).uniform_(-0.02, 0.02))
        self.dropout = Dropout(dropout)
        self.encoder = Encoder(
            n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff, dropout=dropout, norm="batch",
            attention=attention, rope=pos_encoding == "rope", sink=sink, backend=attention_backend,
        )
        # the flatten head: shared by all channels, or one per channel (PatchTST's `individual`)
        self.head_dropout = Dropout(head_dropout)
        self.head = nn.ModuleList(
            nn.Linear(self.n_patches * d_model, horizon) for _ in range(n_channels if individual else 1)
        )

    def forward(
        self, x: torch.Tensor, x_mask: torch.Tensor | None = None, x_time: torch.Tensor | None = None
    ) -> torch.Tensor:
        """x: (B, L, C) scaled values (anything, NaN included, where ``x_mask`` is False);
        x_mask: (B, L, C) bool, True = observed; x_time: (B, L) or (L,) times in nominal steps
        relative to the forecast origin (last input slot = 0, strictly increasing; unused when the window
        is complete and unit-spaced). Returns the forecast (B, horizon, C)."""
        regular = self.check_input(x, x_mask, x_time)
        B, L, C = x.shape
        stats = None
        if self.revin is not None:
            x, stats = self.revin.normalize(x, x_mask)
        series = x.permute(0, 2, 1).reshape(B * C, L)
        if regular:
            tokens, times, lengths = self._regular_patches(series)
            counts = None
        else:
            mask = (x_mask if x_mask is not None else torch.ones_like(x, dtype=torch.bool)).permute(0, 2, 1)
            t = self.input_times(x_time, x)[:, None, :].expand(B, C, L).reshape(B * C, L)
            tokens, times, lengths, counts = self._irregular_patches(series, mask.reshape(B * C, L), t)
        z = self.encoder(self.dropout(tokens), times, lengths)
        if times is not None:  # irregular: read the patches out at the regular patch times
            z = interpolate_to_grid(z, times, counts, self.patch_grid)
        z = self.head_dropout(z.flatten(start_dim=-2)).view(B, C, -1)
        if len(self.head) == 1:
            y = self.head[0](z)
        else:
            y = torch.stack([head(z[:, c]) for c, head in enumerate(self.head)], dim=1)
        y = y.permute(0, 2, 1)
        if self.revin is not None:
            y = self.revin.denormalize(y, stats)
        return y

    def _offsets(self, patch_times: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        centre = patch_times.mean(-1, keepdim=True)
        return (patch_times - centre) / self.patch_len, centre.squeeze(-1) / self.stride

    def _regular_patches(self, series: torch.Tensor):
        padded = torch.cat([series, series[:, -1:].expand(-1, self.stride)], dim=1)
        values = padded.unfold(1, self.patch_len, self.stride)  # (N, n_patches, P)
        grid = torch.arange(self.patch_len, device=series.device, dtype=series.dtype)
        offsets, _ = self._offsets(grid)
        feats = torch.cat([values, offsets.expand_as(values)], dim=-1)
        tokens = self.embed(feats)
        if self.pos_encoding == "learned":
            tokens = tokens + self.pos
        return tokens, None, None

    def _irregular_patches(self, series: torch.Tensor, mask: torch.Tensor, times: torch.Tensor):
        N, L = series.shape
        counts, (values, t) = pack(mask, series, times)
        if bool((counts == 0).any()):
            raise ValueError("every channel needs at least one observed value in the lookback window")
        # End padding: repeat the last observation, one nominal step apart (PatchTST's "end" padding);
        # rows with fewer observations than a patch repeat it until the first patch is full.
        i = torch.arange(L + self.stride, device=series.device)
        last = (counts - 1)[:, None]
        src = torch.minimum(i[None, :], last)
        values = torch.gather(values, 1, src)
        t = torch.gather(t, 1, src) + (i[None, :] - last).clamp_min(0).to(t.dtype)
        spans = torch.clamp(counts, min=self.patch_len - self.stride) + self.stride - self.patch_len
        n_patches = spans // self.stride + 1
        pv = values.unfold(1, self.patch_len, self.stride)[:, : self.n_patches]
        pt = t.unfold(1, self.patch_len, self.stride)[:, : self.n_patches]
        offsets, patch_time = self._offsets(pt)
        # offsets in the values' dtype: x_time may be float64 (numpy) or float32 beside a half model
        tokens = self.embed(torch.cat([pv, offsets.to(pv.dtype)], dim=-1))
        if self.pos_encoding == "learned":
            tokens = tokens + self.pos[slot_index(n_patches, self.n_patches)]
        # padded patches keep whatever times packing left there (finite): attention ignores them
        lengths = None if bool((n_patches == self.n_patches).all()) else n_patches
        return tokens, patch_time, lengths, n_patches
