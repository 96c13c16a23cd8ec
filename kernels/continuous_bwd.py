"""Backward kernels: preprocess (delta = rowsum(O · dO)), a dK/dV pass and a dQ pass.

Closed form of docs/continuous-attention.md §4, recomputed from the saved LSE as FlashAttention
does. The dK/dV pass keeps a block of points resident and loops over query blocks; the dQ pass
keeps a query block resident and loops over segment blocks, like the forward. Separate passes
write disjoint rows, so no atomics are needed and the result does not depend on scheduling.

Each point gets gradient from two segments: as the right endpoint of segment i and as the left
endpoint of segment i+1. A dK/dV program therefore works on BLOCK_N segments p0..p0+BLOCK_N-1 but
owns only the BLOCK_N-1 points p0..p0+BLOCK_N-2, whose both segments lie in its tile (neighbouring
tiles overlap by one segment, 1/BLOCK_N extra work). Left-endpoint contributions accumulate per
segment, one row after the point they belong to; a single exact 0/1 ``tl.dot`` moves them up one
row at the end of the program (``tl.gather`` would do the same; this is once per program, off the
hot loop). Neighbour scores and values come from K and V loaded twice, aligned and shifted by one
row, as in the forward (see continuous_fwd.py for why).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .continuous_fwd import batch_stride, dot_precision
from .moments import all_moments, segment_shape
from .tuning import KEY_MAJOR, QUERY_MAJOR, launch_blocks, length_bucket, tuned

PREPROCESS_ROWS = 64


@triton.jit
def _preprocess_kernel(OUT, DO, DELTA, T, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = bh * T * HEAD_DIM + rows[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    mask = rows[:, None] < T
    o = tl.load(OUT + offs, mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + bh * T + rows, tl.sum(o * do, 1), mask=rows < T)


@triton.jit
def _segment_gradients(x, y, log_len, valid, lse, g_l, g_r):
    """Per-segment partials for one tile: (∂L/∂a_left, ∂L/∂a_right, P_left, P_right).

    ``g_l``, ``g_r`` are dO · v - delta at the left and right endpoints; P are the normalised
    weights wL / Z and wR / Z that the value gradient needs.
    """
    top, u, left_high = segment_shape(x, y, log_len)
    c = tl.where(valid, tl.exp(top - lse[:, None]), 0.0)  # Δ e^{max(x, y)} / Z
    p2, chi, p3, p23, psi = all_moments(u)
    da_l = c * (g_l * tl.where(left_high, p3, psi) + g_r * p23)
    da_r = c * (g_l * p23 + g_r * tl.where(left_high, psi, p3))
    return da_l, da_r, c * tl.where(left_high, p2, chi), c * tl.where(left_high, chi, p2)


@tuned(KEY_MAJOR)
@triton.jit
def _dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, LOG_DELTA, LAST, DK, DV,
    T, H, stride_delta_b, stride_last_b, scale, FIRST, T_BUCKET,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    p0 = tl.program_id(0) * (BLOCK_N - 1)  # owns points p0 .. p0 + BLOCK_N - 2
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    seg = p0 + cols  # column c: segment p0 + c, joining points p0 + c - 1 and p0 + c
    seg_in = (seg >= 1) & (seg <= T)
    right = seg[:, None] * HEAD_DIM + dims[None, :]
    left = right - HEAD_DIM
    k_base = K + bh * (T + 1) * HEAD_DIM
    v_base = V + bh * (T + 1) * HEAD_DIM
    k_r = tl.load(k_base + right, mask=seg_in[:, None], other=0.0)
    k_l = tl.load(k_base + left, mask=seg_in[:, None], other=0.0)
    v_r = tl.load(v_base + right, mask=seg_in[:, None], other=0.0)
    v_l = tl.load(v_base + left, mask=seg_in[:, None], other=0.0)
    log_len = tl.load(LOG_DELTA + b * stride_delta_b + seg - 1, mask=seg_in, other=0.0)

    dk_r = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)  # by segment: right endpoint p0 + c
    dk_l = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)  # by segment: left endpoint p0 + c - 1
    dv_r = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv_l = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    qd_base = bh * T * HEAD_DIM
    for m0 in range(0, T, BLOCK_M):
        rows = m0 + tl.arange(0, BLOCK_M)
        row_in = rows < T
        last = tl.load(LAST + b * stride_last_b + rows, mask=row_in, other=0)
        if tl.max(last, 0) >= p0:  # else no row of this block reaches these segments
            offs = qd_base + rows[:, None] * HEAD_DIM + dims[None, :]
            q = tl.load(Q + offs, mask=row_in[:, None], other=0.0)
            do = tl.load(DO + offs, mask=row_in[:, None], other=0.0)
            lse = tl.load(LSE + bh * T + rows, mask=row_in, other=0.0)
            delta = tl.load(DELTA + bh * T + rows, mask=row_in, other=0.0)
            y = tl.dot(q, tl.trans(k_r), input_precision=DOT_PRECISION) * scale
            x = tl.dot(q, tl.trans(k_l), input_precision=DOT_PRECISION) * scale
            g_r = tl.dot(do, tl.trans(v_r), input_precision=DOT_PRECISION) - delta[:, None]
            g_l = tl.dot(do, tl.trans(v_l), input_precision=DOT_PRECISION) - delta[:, None]
            valid = (seg[None, :] >= FIRST) & (seg[None, :] <= last[:, None])
            da_l, da_r, p_l, p_r = _segment_gradients(x, y, log_len, valid, lse, g_l, g_r)
            dk_l += tl.dot(tl.trans(da_l.to(q.dtype)), q, input_precision=DOT_PRECISION)
            dk_r += tl.dot(tl.trans(da_r.to(q.dtype)), q, input_precision=DOT_PRECISION)
            dv_l += tl.dot(tl.trans(p_l.to(do.dtype)), do, input_precision=DOT_PRECISION)
            dv_r += tl.dot(tl.trans(p_r.to(do.dtype)), do, input_precision=DOT_PRECISION)

    # Point p0 + c collects segment p0 + c (right end) and segment p0 + c + 1 (left end): move
    # the left-end rows up by one with an exact 0/1 matrix product.
    shift = (cols[None, :] == cols[:, None] + 1).to(tl.float32)
    dk = (dk_r + tl.dot(shift, dk_l, input_precision="ieee")) * scale
    dv = dv_r + tl.dot(shift, dv_l, input_precision="ieee")
    point = p0 + cols
    own = (cols < BLOCK_N - 1) & (point <= T)
    offs = bh * (T + 1) * HEAD_DIM + point[:, None] * HEAD_DIM + dims[None, :]
    tl.store(DK + offs, dk.to(DK.dtype.element_ty), mask=own[:, None])
    tl.store(DV + offs, dv.to(DV.dtype.element_ty), mask=own[:, None])


@tuned(QUERY_MAJOR)
@triton.jit
def _dq_kernel(
    Q, K, V, DO, LSE, DELTA, LOG_DELTA, LAST, DQ,
    T, H, stride_delta_b, stride_last_b, scale, FIRST, T_BUCKET,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    row_in = rows < T
    offs = bh * T * HEAD_DIM + rows[:, None] * HEAD_DIM + dims[None, :]
    q = tl.load(Q + offs, mask=row_in[:, None], other=0.0)
    do = tl.load(DO + offs, mask=row_in[:, None], other=0.0)
    lse = tl.load(LSE + bh * T + rows, mask=row_in, other=0.0)
    delta = tl.load(DELTA + bh * T + rows, mask=row_in, other=0.0)
    last = tl.load(LAST + b * stride_last_b + rows, mask=row_in, other=0)
    k_base = K + bh * (T + 1) * HEAD_DIM
    v_base = V + bh * (T + 1) * HEAD_DIM
    delta_base = LOG_DELTA + b * stride_delta_b

    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for j0 in range(1, tl.max(last, 0) + 1, BLOCK_N):
        seg = j0 + cols
        seg_in = seg <= T
        right = seg[:, None] * HEAD_DIM + dims[None, :]
        left = right - HEAD_DIM
        k_r = tl.load(k_base + right, mask=seg_in[:, None], other=0.0)
        k_l = tl.load(k_base + left, mask=seg_in[:, None], other=0.0)
        v_r = tl.load(v_base + right, mask=seg_in[:, None], other=0.0)
        v_l = tl.load(v_base + left, mask=seg_in[:, None], other=0.0)
        y = tl.dot(q, tl.trans(k_r), input_precision=DOT_PRECISION) * scale
        x = tl.dot(q, tl.trans(k_l), input_precision=DOT_PRECISION) * scale
        g_r = tl.dot(do, tl.trans(v_r), input_precision=DOT_PRECISION) - delta[:, None]
        g_l = tl.dot(do, tl.trans(v_l), input_precision=DOT_PRECISION) - delta[:, None]
        log_len = tl.load(delta_base + seg - 1, mask=seg_in, other=0.0)
        valid = (seg[None, :] >= FIRST) & (seg[None, :] <= last[:, None])
        da_l, da_r, _, _ = _segment_gradients(x, y, log_len, valid, lse, g_l, g_r)
        dq += tl.dot(da_l.to(k_l.dtype), k_l, input_precision=DOT_PRECISION)
        dq += tl.dot(da_r.to(k_r.dtype), k_r, input_precision=DOT_PRECISION)
    tl.store(DQ + offs, (dq * scale).to(DQ.dtype.element_ty), mask=row_in[:, None])


def backward(
    q: torch.Tensor, k_ext: torch.Tensor, v_ext: torch.Tensor, out: torch.Tensor, grad_out: torch.Tensor,
    lse: torch.Tensor, log_delta: torch.Tensor, last: torch.Tensor, first: int, scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk_ext, dv_ext) in the inputs' dtypes; inputs contiguous, as for :func:`forward`."""
    B, H, T, D = q.shape
    delta = torch.empty_like(lse)
    _preprocess_kernel[(triton.cdiv(T, PREPROCESS_ROWS), B * H)](
        out, grad_out, delta, T, HEAD_DIM=D, BLOCK_M=PREPROCESS_ROWS
    )
    dq = torch.empty_like(q)
    dk = torch.empty_like(k_ext)
    dv = torch.empty_like(v_ext)
    shared = (T, H, batch_stride(log_delta), batch_stride(last), scale, first, length_bucket(T))
    meta = dict(HEAD_DIM=D, DOT_PRECISION=dot_precision(q.dtype), **launch_blocks())
    grid_kv = lambda m: (triton.cdiv(T + 1, m["BLOCK_N"] - 1), B * H)  # noqa: E731
    _dkdv_kernel[grid_kv](q, k_ext, v_ext, grad_out, lse, delta, log_delta, last, dk, dv, *shared, **meta)
    grid_q = lambda m: (triton.cdiv(T, m["BLOCK_M"]), B * H)  # noqa: E731
    _dq_kernel[grid_q](q, k_ext, v_ext, grad_out, lse, delta, log_delta, last, dq, *shared, **meta)
    return dq, dk, dv
