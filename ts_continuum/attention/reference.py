"""The exact PyTorch path of continuous attention: the readable specification of the op.

Everything here works on the *extended* sequence: point 0 is the sink (or, for ``sink="none"``,
a copy of point 1 whose segment is switched off), points 1..T are the observations. Segment j
(j = 1..T, tensor index j - 1) joins points j-1 and j and has length Δ_j. For one query and one
segment with scores x = a_{j-1}, y = a_j, the closed form of docs/continuous-attention.md §2 gives

    weight on v_{j-1}:  wL_j = Δ_j e^{max(x,y)} (φ2(u) if x >= y else χ(u))
    weight on v_j:      wR_j = Δ_j e^{max(x,y)} (χ(u) if x >= y else φ2(u)),   u = -|x - y|

and o = Σ_j (wL_j v_{j-1} + wR_j v_j) / Σ_j (wL_j + wR_j). The backward pass is the closed form of
§4, recomputed from the saved row log-normaliser as FlashAttention does, so nothing of size T x T
outlives a tile (some sequences, or a chunk of queries): memory is O(T · tile) forward and backward.

Which segments a query integrates over is described by two numbers per query row: segments
``first <= j <= last`` (1-based). ``last`` is 0 for padded query rows, which then output 0.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .phi import all_moments, forward_moments

# Elements (batch x heads x query-chunk x keys) of one score tile: 8 MB in float32, so the ten or
# so tile-sized temporaries of a backward tile stay near 100 MB whatever T is. Four times that
# was 2-6 % less CPU time per call but added 356 MiB to a PatchTST training step's peak tensor
# memory (ETTh1, batch 128; now 94 MiB over softmax's 120, tests/test_op_memory.py).
TILE_ELEMENTS = 1 << 21


def query_chunk(batch_heads: int, keys: int) -> int:
    """Queries per tile so that one tile holds about ``TILE_ELEMENTS`` scores."""
    return max(1, TILE_ELEMENTS // max(1, batch_heads * keys))


def tiles(batch: int, heads: int, queries: int, keys: int | None = None) -> list[tuple[slice, slice]]:
    """(batch rows, query rows) of each tile, each holding about ``TILE_ELEMENTS`` scores.

    ``keys`` defaults to ``queries`` (self-attention). Whole sequences when one fits: many short
    sequences (PatchTST's channels x windows, 7168 sequences of 42 patches in an ETTm1 evaluation
    batch) then make a few contiguous tiles instead of one strided tile per query, which spent most
    of its time copying. Long sequences are split by query over the whole batch.
    """
    keys = queries if keys is None else keys
    per_sequence = heads * queries * (keys + 1)
    if batch * per_sequence <= TILE_ELEMENTS or per_sequence > TILE_ELEMENTS:
        step = query_chunk(batch * heads, keys)
        return [(slice(0, batch), slice(s, min(queries, s + step))) for s in range(0, queries, step)]
    rows = TILE_ELEMENTS // per_sequence
    return [(slice(b, min(batch, b + rows)), slice(0, queries)) for b in range(0, batch, rows)]


def _rows(x: torch.Tensor, rows: slice) -> torch.Tensor:
    """Batch rows of a per-batch tensor that may be shared by the whole batch (first dim 1)."""
    return x if x.shape[0] == 1 else x[rows]


def segment_log_lengths(last: torch.Tensor, first: int, log_delta: torch.Tensor) -> torch.Tensor:
    """log Δ_j for the segments a query row integrates over, -inf elsewhere.

    ``last``: (B|1, 1, C, 1) last valid segment per query row; ``log_delta``: (B|1, T) per segment.
    Returns (B|1, 1, C, T).
    """
    j = torch.arange(1, log_delta.shape[-1] + 1, device=log_delta.device)
    valid = (j >= first) & (j <= last)
    return torch.where(valid, log_delta[:, None, None, :], float("-inf"))


def _scores(q: torch.Tensor, k_ext: torch.Tensor, scale: float) -> tuple[torch.Tensor, ...]:
    """Per segment of one tile: (x, y) = the scores of its left and right end (views of one
    (B, H, C, T+1) product), whether the left end is the higher one, and u = -|x - y|."""
    a = torch.matmul(q * scale, k_ext.transpose(-1, -2))
    x, y = a[..., :-1], a[..., 1:]
    return x, y, x >= y, (x - y).abs_().neg_()


def _to_points(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """(..., T) parts of segments 1..T -> (..., T+1) points 0..T: each segment's part on its left
    end goes to points 0..T-1, its part on its right end to points 1..T."""
    return F.pad(left, (0, 1)) + F.pad(right, (1, 0))


def forward_tile(
    q: torch.Tensor, k_ext: torch.Tensor, v_ext: torch.Tensor, log_len: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and row log-normaliser (LSE) for one tile of queries (all float32/64).

    Each point's two segment weights are summed before the product with the values, so the
    product runs over T+1 points, not 2T segment ends, and no copy of the values is made. The
    stabiliser m is the row maximum of log(Δ e^{max(x,y)}), so every weight is at most 1 whatever
    the segment lengths. Temporaries are updated in place where that saves a tile-sized buffer.
    """
    x, y, left_high, u = _scores(q, k_ext, scale)
    s = torch.maximum(x, y).add_(log_len)  # log(Δ e^{max(x,y)}), -inf off the integration range
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # rows without segments
    e = s.sub_(m).exp_()
    p_high, p_low = forward_moments(u)
    w = _to_points(torch.where(left_high, p_high, p_low).mul_(e), torch.where(left_high, p_low, p_high).mul_(e))
    z = w.sum(-1, keepdim=True)
    n = torch.matmul(w, v_ext)
    has = z > 0
    z_safe = torch.where(has, z, torch.ones_like(z))
    lse = torch.where(has, m + torch.log(z_safe), torch.zeros_like(m))
    return n.div_(z_safe), lse.squeeze(-1)


def backward_tile(
    q: torch.Tensor,
    k_ext: torch.Tensor,
    v_ext: torch.Tensor,
    out: torch.Tensor,
    grad_out: torch.Tensor,
    lse: torch.Tensor,
    log_len: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients for one tile of queries: dq, and this tile's contributions to dk_ext and dv_ext.

    As in the forward pass, each point's parts from its two segments are summed first: dA and the
    normalised weights are (..., T+1), and dk, dv come out per point.
    """
    x, y, left_high, u = _scores(q, k_ext, scale)
    c = torch.maximum(x, y).add_(log_len).sub_(lse.unsqueeze(-1)).exp_()  # Δ e^{max(x,y)} / Z
    p2, chi, p3, p23, psi = all_moments(u)
    p = _to_points(torch.where(left_high, p2, chi).mul_(c), torch.where(left_high, chi, p2).mul_(c))
    delta = (grad_out * out).sum(-1, keepdim=True)
    g = torch.matmul(grad_out, v_ext.transpose(-1, -2)).sub_(delta)  # dO · v_i - D
    g_left, g_right = g[..., :-1], g[..., 1:]
    # ∂wL/∂x, ∂wR/∂y: φ3 on the high endpoint, ψ3 on the low one; cross terms are φ2 - φ3.
    da_left = torch.where(left_high, p3, psi).mul_(g_left).addcmul_(g_right, p23).mul_(c)
    da_right = torch.where(left_high, psi, p3).mul_(g_right).addcmul_(g_left, p23).mul_(c)
    da = _to_points(da_left, da_right)
    dq = torch.matmul(da, k_ext).mul_(scale)
    dk = torch.matmul(da.transpose(-1, -2), q).mul_(scale)
    dv = torch.matmul(p.transpose(-1, -2), grad_out)
    return dq, dk, dv


class SegmentLayout:
    """Which segments each query row integrates over, independent of the head dimension.

    ``lengths``: (B,) valid keys (``None``: all ``keys``); ``q_valid``: (B,) valid query rows.
    Without ``q_valid`` the queries are the observations when ``queries == keys`` (rows past
    ``lengths`` are padding) and all valid otherwise. Causal needs ``queries == keys``.
    """

    def __init__(
        self, lengths: torch.Tensor | None, queries: int, causal: bool, first: int, device,
        keys: int | None = None, q_valid: torch.Tensor | None = None,
    ):
        keys = queries if keys is None else keys
        self.first = first
        t = torch.arange(1, queries + 1, device=device)
        total = (lengths if lengths is not None else torch.full((1,), keys, device=device)).view(-1, 1)
        last = torch.minimum(t, total) if causal else total.expand(-1, queries)
        if q_valid is not None:
            rows = q_valid.view(-1, 1)
        else:
            rows = total if keys == queries else torch.full((1, 1), queries, device=device)
        self.last = torch.where(t <= rows, last, torch.zeros_like(last))  # (B|1, Tq)

    def tile(self, rows: slice, queries: slice) -> torch.Tensor:
        return _rows(self.last, rows)[:, None, queries, None]


class ContinuousAttentionFunction(torch.autograd.Function):
    """Tiled forward, closed-form tiled backward: the exact path, O(T · tile) memory."""

    @staticmethod
    def forward(ctx, q, k_ext, v_ext, log_delta, layout, scale, kernels):
        fwd, _ = kernels
        B, H, T, _ = q.shape
        parts = tiles(B, H, T, k_ext.shape[2] - 1)
        if len(parts) == 1:  # one tile: no copies into preallocated outputs
            out, lse = fwd(q, k_ext, v_ext, segment_log_lengths(layout.last[:, None, :, None], layout.first, log_delta),
                           scale)
        else:
            out = q.new_empty(*q.shape[:-1], v_ext.shape[-1])
            lse = q.new_empty(B, H, T)
            for b, s in parts:
                log_len = segment_log_lengths(layout.tile(b, s), layout.first, _rows(log_delta, b))
                out[b, :, s], lse[b, :, s] = fwd(q[b, :, s], k_ext[b], v_ext[b], log_len, scale)
        ctx.save_for_backward(q, k_ext, v_ext, log_delta, out, lse)
        ctx.layout, ctx.scale, ctx.kernels, ctx.parts = layout, scale, kernels, parts
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out):
        q, k_ext, v_ext, log_delta, out, lse = ctx.saved_tensors
        _, bwd = ctx.kernels
        layout = ctx.layout
        if len(ctx.parts) == 1:
            log_len = segment_log_lengths(layout.last[:, None, :, None], layout.first, log_delta)
            return (*bwd(q, k_ext, v_ext, out, grad_out, lse, log_len, ctx.scale), None, None, None, None)
        dq = torch.empty_like(q)
        dk = torch.zeros_like(k_ext)
        dv = torch.zeros_like(v_ext)
        for b, s in ctx.parts:
            log_len = segment_log_lengths(layout.tile(b, s), layout.first, _rows(log_delta, b))
            dq_c, dk_c, dv_c = bwd(
                q[b, :, s], k_ext[b], v_ext[b], out[b, :, s], grad_out[b, :, s], lse[b, :, s], log_len, ctx.scale
            )
            dq[b, :, s] = dq_c
            dk[b] += dk_c
            dv[b] += dv_c
        return dq, dk, dv, None, None, None, None


EAGER_KERNELS = (forward_tile, backward_tile)
