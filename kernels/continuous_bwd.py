"""Backward kernels: preprocess (delta = rowsum(O · dO)), a dK/dV pass and a dQ pass.

Closed form of docs/continuous-attention.md §4, recomputed from the saved LSE as FlashAttention
does. The dK/dV pass keeps a block of points resident and loops over query blocks (``TQ`` query
rows); the dQ pass keeps a query block resident and loops over segment blocks (``T`` keys), like
the forward. Separate passes
write disjoint rows, so no atomics are needed and the result does not depend on scheduling.

Each point gets gradient from two segments: as the right endpoint of segment i and as the left
endpoint of segment i+1. A dK/dV program therefore works on BLOCK_N segments p0..p0+BLOCK_N-1 but
owns only the BLOCK_N-1 points p0..p0+BLOCK_N-2, whose both segments lie in its tile (neighbouring
tiles overlap by one segment, 1/BLOCK_N extra work). Inside the tile, column c of the per-point
gradient is the right-end partial of column c plus the left-end partial of column c+1. That
one-column shift is a product with a 0/1 matrix: each entry has one nonzero term, so it is exact
once the left partial is rounded to the input dtype (one rounding more than a float32 add; the
sum is rounded for the next product anyway, as in FlashAttention). It keeps one float32
accumulator each for dK and dV instead of a left and a right one (four BLOCK_N x D accumulators
spill registers at BLOCK_N = 64, D = 64 on sm_90: benchmarks/speed/register_report.py) and trades two
BLOCK_N x BLOCK_M x D products for two BLOCK_M x BLOCK_N x BLOCK_N ones. ``tl.gather`` along the
key axis would shift without a product or the rounding, but in the forward it cost more than the
products it saved (continuous_fwd.py). Neighbour scores and values come from K and V loaded twice,
aligned and shifted by one row, as in the forward.

dQ has three implementations (``TS_CONTINUUM_DQ``):

- ``atomic`` (default): the dK/dV pass adds each tile's dQ share into a float32 buffer with atomics,
  as FlashAttention-2 does, so the backward evaluates the segment moments once, not twice (the
  forward+backward 26 % fewer instructions per score element at D = 64: benchmarks/speed/sass_report.py).
  Its sums depend on the order the programs run in: not bitwise reproducible.
- ``deterministic``: the same, but the key blocks add to each query tile in key order, each
  waiting on a per-tile counter for its predecessor (FlashAttention-3's deterministic backward), so
  two runs give the same bits. The default instead when ``torch.use_deterministic_algorithms`` is on.
- ``pass``: a separate dQ pass that evaluates the moments a second time; reproducible too.

The scale is applied to dQ once, at the end, rather than to every tile. Which of ``deterministic``
and ``pass`` is faster is for a GPU to say (benchmarks/speed/kernel_bench.py times every mode).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .continuous_fwd import (
    batch_stride, block_ranges, dot_precision, load_segments, load_vector, query_program,
    segment_products,
)
from .moments import FAST_ASM, backward_moments, segment_shape
from .tuning import DYNAMIC, KEY_MAJOR, KEY_MAJOR_ATOMIC_DQ, QUERY_MAJOR, TunedKernel, length_bucket

PREPROCESS_ROWS = 64
DQ_MODES = ("atomic", "deterministic", "pass")
# read from the environment once, at import; tests and benchmarks set the attribute itself.
# None: "atomic", or "deterministic" while torch.use_deterministic_algorithms is on.
DQ_MODE = os.environ.get("TS_CONTINUUM_DQ") or None
# The dK/dV pass's tile orientation: False (default) query rows x segments, True segments x query
# rows (S^T = K Q^T, FlashAttention-2/3's backward). Not autotuned: in Triton 3.6 no config of the
# key-major tiles beats the default one at D = 128 without spilling (benchmarks/results/2026-12-05-sass);
# kept, tested, for the measurements and for a later Triton.
KEYS_ROWS = False


@triton.jit(do_not_specialize=["TQ", "H"])
def _preprocess_kernel(OUT, DO, DELTA, TQ, H, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    pid_m, bh, _ = query_program(TQ, H, BLOCK_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = bh * TQ * HEAD_DIM + rows[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    mask = rows[:, None] < TQ
    o = tl.load(OUT + offs, mask=mask, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(DELTA + bh * TQ + rows, tl.sum(o * do, 1), mask=rows < TQ)


@triton.jit
def wait_for_turn(turn, count):
    """Spin until every warp of ``count`` earlier programs has passed ``*turn`` (pass_turn), with
    acquire semantics: their additions are then visible.

    Why PTX rather than a Triton ``while`` with atomics: a loop nested in the dK/dV loop's body, and
    a CTA-wide barrier there (tl.debug_barrier), stopped Triton (3.6 and 3.9) from software-
    pipelining the loop's Q/dO loads (LDG instead of LDGSTS: benchmarks/speed/sass_report.py). So each
    warp releases on its own (pass_turn) and waiters count warps: %ntid.x / 32 per program. The
    interpreter runs programs one after another (a program's predecessors have finished when it
    runs) and counts programs."""
    if FAST_ASM:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 v, n; mov.u32 n, %ntid.x; shr.u32 n, n, 5; mul.lo.u32 n, n, $2; "
            "WAIT: ld.acquire.gpu.global.u32 v, [$1]; setp.lt.u32 p, v, n; @p bra WAIT; mov.u32 $0, v; }",
            "=r,l,r", [turn, count], dtype=tl.int32, is_pure=False, pack=1)
    else:
        while tl.atomic_add(turn, 0) < count:
            pass


@triton.jit
def pass_turn(turn):
    """Add 1 to ``*turn`` per warp (release), once the warp's lanes have issued their additions
    (bar.warp.sync orders them before lane 0's release)."""
    if FAST_ASM:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .u32 lane; bar.warp.sync -1; mov.u32 lane, %laneid; setp.eq.u32 p, lane, 0; "
            "@p red.release.gpu.global.add.u32 [$1], 1; mov.u32 $0, 0; }",
            "=r,l", [turn], dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.atomic_add(turn, 1)


@triton.jit
def _segment_gradients(
    x, y, log2_len, lse, scale, g_l, g_r, keep, MASKED: tl.constexpr, SHORT: tl.constexpr,
):
    """Per-segment partials for one tile: (∂L/∂a_left, ∂L/∂a_right, P_left, P_right).

    ``x``, ``y`` are the unscaled products q·k and ``lse`` the forward's log2 normaliser
    (moments.segment_shape); ``g_l``, ``g_r`` are dO · v - delta at the left and right endpoints; P are the normalised
    weights wL / Z and wR / Z that the value gradient needs. ``log2_len`` and ``lse`` come broadcastable
    to the tile, whichever axis holds the segments. MASKED: remove the segments where ``keep`` is false
    (interior tiles have none). SHORT: half-precision inputs (moments.py).
    """
    top, u, left_high = segment_shape(x, y, log2_len, scale)
    if MASKED:  # e^-inf = 0 removes a segment
        top = tl.where(keep, top, float("-inf"))
    c = tl.exp2(top - lse)  # Δ e^{max(a, b)} / Z
    p2, chi, p23 = backward_moments(u, SHORT)
    p_l = c * tl.where(left_high, p2, chi)
    p_r = c * tl.where(left_high, chi, p2)
    # ∂P_l/∂a_l = P_l - h, ∂P_l/∂a_r = ∂P_r/∂a_l = h, ∂P_r/∂a_r = P_r - h with h = c φ23
    # (moments.backward_moments), so ∂L/∂a_l = g_l P_l + h (g_r - g_l) and ∂L/∂a_r = g_r P_r - h (g_r - g_l)
    cross = (c * p23) * (g_r - g_l)
    return g_l * p_l + cross, g_r * p_r - cross, p_l, p_r


@triton.jit
def _dkdv_block(
    Q, DO, LSE, DELTA, DQ, LAST, TURN, qd_base, lse_base, last_base, m0, seg, TQ, FIRST, scale, key_block,
    k_l, k_r, v_l, v_r, log2_len, shift, k_dq, dk, dv,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, ATOMIC_DQ: tl.constexpr,
    ORDERED_DQ: tl.constexpr, KEYS_ROWS: tl.constexpr, MASKED: tl.constexpr,
):
    """Query block m0's contribution to the resident points' dK, dV (and to its rows' dQ, unscaled)."""
    rows = m0 + tl.arange(0, BLOCK_M)
    offs = qd_base + rows[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    last = rows  # read only when MASKED
    if MASKED:
        last = tl.load(LAST + last_base + rows, mask=rows < TQ, other=0)
        row_in = (rows < TQ)[:, None]
        q = tl.load(Q + offs, mask=row_in, other=0.0)
        do = tl.load(DO + offs, mask=row_in, other=0.0)
    else:
        q = tl.load(Q + offs)
        do = tl.load(DO + offs)
    lse = load_vector(LSE + lse_base, rows, TQ, MASKED)
    delta = load_vector(DELTA + lse_base, rows, TQ, MASKED)
    short = DOT_PRECISION != "ieee"
    if KEYS_ROWS:  # tiles S^T = K Q^T: segments along rows, query rows along columns
        y = tl.dot(k_r, tl.trans(q), input_precision=DOT_PRECISION)
        x = tl.dot(k_l, tl.trans(q), input_precision=DOT_PRECISION)
        g_r = tl.dot(v_r, tl.trans(do), input_precision=DOT_PRECISION) - delta[None, :]
        g_l = tl.dot(v_l, tl.trans(do), input_precision=DOT_PRECISION) - delta[None, :]
        keep = (seg[:, None] >= FIRST) & (seg[:, None] <= last[None, :])
        da_l, da_r, p_l, p_r = _segment_gradients(x, y, log2_len[:, None], lse[None, :], scale, g_l, g_r, keep,
                                                  MASKED, short)
        # row c: point p0 + c (shift is transposed here: (shift @ partial)[c] = partial[c + 1])
        da_t = (da_r + tl.dot(shift, da_l.to(q.dtype), input_precision=DOT_PRECISION)).to(q.dtype)
        p_t = p_r + tl.dot(shift, p_l.to(do.dtype), input_precision=DOT_PRECISION)
        dk += tl.dot(da_t, q, input_precision=DOT_PRECISION)
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=DOT_PRECISION)
        da = tl.trans(da_t)
    else:
        y = tl.dot(q, tl.trans(k_r), input_precision=DOT_PRECISION)
        x = tl.dot(q, tl.trans(k_l), input_precision=DOT_PRECISION)
        g_r = tl.dot(do, tl.trans(v_r), input_precision=DOT_PRECISION) - delta[:, None]
        g_l = tl.dot(do, tl.trans(v_l), input_precision=DOT_PRECISION) - delta[:, None]
        keep = (seg[None, :] >= FIRST) & (seg[None, :] <= last[:, None])
        da_l, da_r, p_l, p_r = _segment_gradients(x, y, log2_len[None, :], lse[:, None], scale, g_l, g_r, keep,
                                                  MASKED, short)
        # column c: point p0 + c
        da = (da_r + tl.dot(da_l.to(q.dtype), shift, input_precision=DOT_PRECISION)).to(q.dtype)
        p = p_r + tl.dot(p_l.to(do.dtype), shift, input_precision=DOT_PRECISION)
        dk += tl.dot(tl.trans(da), q, input_precision=DOT_PRECISION)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=DOT_PRECISION)
    if ATOMIC_DQ:
        dq = tl.dot(da, k_dq, input_precision=DOT_PRECISION)
        if ORDERED_DQ:  # wait until key blocks 0 .. key_block - 1 have added theirs (query_block_ranges)
            turn = TURN + lse_base + m0
            wait_for_turn(turn, key_block)
        if MASKED:
            tl.atomic_add(DQ + offs, dq, mask=(rows < TQ)[:, None], sem="relaxed")
        else:
            tl.atomic_add(DQ + offs, dq, sem="relaxed")
        if ORDERED_DQ:
            pass_turn(turn)
    return dk, dv


@triton.jit
def query_block_ranges(reach, p0, T, FIRST, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Bounds (start, begin, end, stop) of the query blocks for the segment tile p0 .. p0 + BLOCK_N - 1
    (T keys): masked [start, begin), interior [begin, end), masked [end, stop).

    ``reach[p]`` (first_rows) is the first query row whose last segment is >= p, ``reach[T + 1]``
    the number of rows that take any segment: rows [reach[p], reach[T + 1]) take segment p.

    ``start`` never decreases with p0 and ``stop`` is the same for every tile, so the tiles that
    visit a query block are a prefix 0, 1, .. of the tiles: tile n is the (n + 1)-th to visit it
    (ordered dQ relies on that)."""
    rows = tl.load(reach + T + 1)
    start = (tl.load(reach + p0) // BLOCK_M) * BLOCK_M
    stop = tl.cdiv(rows, BLOCK_M) * BLOCK_M
    begin = tl.cdiv(tl.load(reach + tl.minimum(p0 + BLOCK_N - 1, T + 1)), BLOCK_M) * BLOCK_M
    end = (rows // BLOCK_M) * BLOCK_M  # full blocks only: the rows beyond are padding or beyond TQ
    has = (p0 >= FIRST) & (end > begin)
    return start, tl.where(has, begin, stop), tl.where(has, end, stop), stop


@triton.jit(do_not_specialize=DYNAMIC + ["stride_reach_b"])
def _dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, LOG2_DELTA, LAST, REACH, DK, DV, DQ, TURN,
    T, TQ, H, stride_delta_b, stride_last_b, stride_reach_b, scale, FIRST, T_BUCKET, TQ_BUCKET,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, ORDERED_DQ: tl.constexpr, KEYS_ROWS: tl.constexpr,
):
    pid = tl.program_id(0)
    blocks = tl.cdiv(T + 1, BLOCK_N - 1)
    key_block = pid % blocks  # key blocks fastest: a block's predecessors have lower program ids
    p0 = key_block * (BLOCK_N - 1)  # owns points p0 .. p0 + BLOCK_N - 2
    bh = (pid // blocks).to(tl.int64)
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
    log2_len = tl.load(LOG2_DELTA + b * stride_delta_b + seg - 1, mask=seg_in, other=0.0)

    # shift[r, c] = 1 where r = c + 1: (partial @ shift)[:, c] = partial[:, c + 1]
    shift = (cols[:, None] == cols[None, :] + 1).to(k_r.dtype)
    if KEYS_ROWS:  # (shift @ partial)[c, :] = partial[c + 1, :]
        shift = (cols[None, :] == cols[:, None] + 1).to(k_r.dtype)
    # One-pass dQ sums dA k over the points this program owns (their dA is whole here, column c of
    # da in _dkdv_block): K at those points, 0 in the last column (the next program's first point).
    # Unlike k_r, the sink point 0 (column 0 of program 0) is loaded: its dA reaches dQ too.
    k_dq = tl.load(k_base + right, mask=((cols < BLOCK_N - 1) & (seg <= T))[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)  # row c: point p0 + c
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    qd_base = bh * TQ * HEAD_DIM
    last_base = b * stride_last_b
    # Query blocks in order, as one loop with a branch per block would take them, in three
    # straight-line loops so that Triton pipelines the Q/dO loads (continuous_fwd.block_ranges):
    # masked blocks, interior blocks (every row takes every segment of the tile), masked blocks.
    # Blocks whose rows reach none of the tile's segments are not visited.
    start, begin, end, stop = query_block_ranges(REACH + b * stride_reach_b, p0, T, FIRST, BLOCK_M, BLOCK_N)
    for m0 in range(start, begin, BLOCK_M):
        dk, dv = _dkdv_block(Q, DO, LSE, DELTA, DQ, LAST, TURN, qd_base, bh * TQ, last_base, m0, seg, TQ, FIRST,
                             scale, key_block, k_l, k_r, v_l, v_r, log2_len, shift, k_dq, dk, dv,
                             HEAD_DIM, DOT_PRECISION, BLOCK_M, ATOMIC_DQ, ORDERED_DQ, KEYS_ROWS, True)
    for m0 in range(begin, end, BLOCK_M):
        dk, dv = _dkdv_block(Q, DO, LSE, DELTA, DQ, LAST, TURN, qd_base, bh * TQ, last_base, m0, seg, TQ, FIRST,
                             scale, key_block, k_l, k_r, v_l, v_r, log2_len, shift, k_dq, dk, dv,
                             HEAD_DIM, DOT_PRECISION, BLOCK_M, ATOMIC_DQ, ORDERED_DQ, KEYS_ROWS, False)
    for m0 in range(end, stop, BLOCK_M):
        dk, dv = _dkdv_block(Q, DO, LSE, DELTA, DQ, LAST, TURN, qd_base, bh * TQ, last_base, m0, seg, TQ, FIRST,
                             scale, key_block, k_l, k_r, v_l, v_r, log2_len, shift, k_dq, dk, dv,
                             HEAD_DIM, DOT_PRECISION, BLOCK_M, ATOMIC_DQ, ORDERED_DQ, KEYS_ROWS, True)

    point = p0 + cols
    own = (cols < BLOCK_N - 1) & (point <= T)
    offs = bh * (T + 1) * HEAD_DIM + point[:, None] * HEAD_DIM + dims[None, :]
    tl.store(DK + offs, (dk * scale).to(DK.dtype.element_ty), mask=own[:, None])
    tl.store(DV + offs, dv.to(DV.dtype.element_ty), mask=own[:, None])


@triton.jit
def _dq_block(
    q, do, lse, delta, k_base, v_base, delta_base, j0, last, dq, T, scale, FIRST,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
):
    seg = j0 + tl.arange(0, BLOCK_N)
    k_l, k_r, log2_len, x, y = segment_products(q, k_base, delta_base, seg, T, HEAD_DIM, DOT_PRECISION, MASKED)
    v_l, v_r = load_segments(v_base, seg, T, HEAD_DIM, MASKED)
    g_r = tl.dot(do, tl.trans(v_r), input_precision=DOT_PRECISION) - delta[:, None]
    g_l = tl.dot(do, tl.trans(v_l), input_precision=DOT_PRECISION) - delta[:, None]
    keep = (seg[None, :] >= FIRST) & (seg[None, :] <= last[:, None])  # read only when MASKED
    da_l, da_r, _, _ = _segment_gradients(x, y, log2_len[None, :], lse[:, None], scale, g_l, g_r, keep, MASKED,
                                          DOT_PRECISION != "ieee")
    dq += tl.dot(da_l.to(k_l.dtype), k_l, input_precision=DOT_PRECISION)
    dq += tl.dot(da_r.to(k_r.dtype), k_r, input_precision=DOT_PRECISION)
    return dq


@triton.jit(do_not_specialize=DYNAMIC)
def _dq_kernel(
    Q, K, V, DO, LSE, DELTA, LOG2_DELTA, LAST, DQ,
    T, TQ, H, stride_delta_b, stride_last_b, scale, FIRST, T_BUCKET, TQ_BUCKET,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m, bh, b = query_program(TQ, H, BLOCK_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    row_in = rows < TQ
    offs = bh * TQ * HEAD_DIM + rows[:, None] * HEAD_DIM + dims[None, :]
    q = tl.load(Q + offs, mask=row_in[:, None], other=0.0)
    do = tl.load(DO + offs, mask=row_in[:, None], other=0.0)
    lse = tl.load(LSE + bh * TQ + rows, mask=row_in, other=0.0)
    delta = tl.load(DELTA + bh * TQ + rows, mask=row_in, other=0.0)
    last = tl.load(LAST + b * stride_last_b + rows, mask=row_in, other=0)
    k_base = K + bh * (T + 1) * HEAD_DIM
    v_base = V + bh * (T + 1) * HEAD_DIM
    delta_base = LOG2_DELTA + b * stride_delta_b

    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    start, end, stop = block_ranges(last, row_in, FIRST, BLOCK_N)  # three straight-line loops, as the forward's
    for j0 in range(1, start, BLOCK_N):
        dq = _dq_block(q, do, lse, delta, k_base, v_base, delta_base, j0, last, dq, T, scale, FIRST,
                       HEAD_DIM, DOT_PRECISION, BLOCK_N, True)
    for j0 in range(start, end, BLOCK_N):
        dq = _dq_block(q, do, lse, delta, k_base, v_base, delta_base, j0, last, dq, T, scale, FIRST,
                       HEAD_DIM, DOT_PRECISION, BLOCK_N, False)
    for j0 in range(end, stop, BLOCK_N):
        dq = _dq_block(q, do, lse, delta, k_base, v_base, delta_base, j0, last, dq, T, scale, FIRST,
                       HEAD_DIM, DOT_PRECISION, BLOCK_N, True)
    tl.store(DQ + offs, (dq * scale).to(DQ.dtype.element_ty), mask=row_in[:, None])


_DKDV = TunedKernel(_dkdv_kernel, KEY_MAJOR)
# reset_to_zero: the autotuner's timing runs would otherwise add into DQ too (and, ordered, find
# the turn counters at their end and never wait).
_DKDV_ATOMIC_DQ = TunedKernel(_dkdv_kernel, KEY_MAJOR_ATOMIC_DQ, reset_to_zero=["DQ"], name="_dkdv_kernel+atomic_dq")
_DKDV_ORDERED_DQ = TunedKernel(_dkdv_kernel, KEY_MAJOR_ATOMIC_DQ, reset_to_zero=["DQ", "TURN"],
                               name="_dkdv_kernel+ordered_dq")
_DQ = TunedKernel(_dq_kernel, QUERY_MAJOR)


def dq_mode() -> str:
    """The dQ implementation this backward takes (module docstring)."""
    if DQ_MODE is None:
        return "deterministic" if torch.are_deterministic_algorithms_enabled() else "atomic"
    if DQ_MODE not in DQ_MODES:
        raise ValueError(f"TS_CONTINUUM_DQ must be one of {', '.join(DQ_MODES)} (or unset); got {DQ_MODE!r}")
    return DQ_MODE


def first_rows(last: torch.Tensor, keys: int) -> torch.Tensor:
    """(B|1, keys + 2) int32 from ``last`` (B|1, Tq): entry p is the first query row whose last segment
    is >= p, entry keys + 1 the number of rows that take any segment.

    Relies on the layout of attention/reference.SegmentLayout: the rows that take segments are a
    prefix of the query rows (padding rows have last = 0) and their last segment never decreases
    along it (causal: min(row + 1, length); bidirectional and cross-attention: length), so the rows
    taking segment p are the contiguous range [entry p, entry keys + 1)."""
    taking = last > 0
    ordered = torch.where(taking, last, torch.full_like(last, keys + 2))  # padding sorts last
    p = torch.arange(keys + 2, device=last.device, dtype=last.dtype).expand(last.shape[0], -1).contiguous()
    return torch.searchsorted(ordered, p).to(torch.int32).contiguous()


def backward(
    q: torch.Tensor, k_ext: torch.Tensor, v_ext: torch.Tensor, out: torch.Tensor, grad_out: torch.Tensor,
    lse: torch.Tensor, log2_delta: torch.Tensor, last: torch.Tensor, first: int, scale: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk_ext, dv_ext) in the inputs' dtypes; inputs contiguous, as for :func:`forward`, and
    ``lse`` the forward's (log2 units)."""
    B, H, Tq, D = q.shape
    T = k_ext.shape[2] - 1
    delta = torch.empty_like(lse)
    _preprocess_kernel[(triton.cdiv(Tq, PREPROCESS_ROWS) * B * H,)](
        out, grad_out, delta, Tq, H, HEAD_DIM=D, BLOCK_M=PREPROCESS_ROWS
    )
    dk = torch.empty_like(k_ext)
    dv = torch.empty_like(v_ext)
    buckets = (length_bucket(T), length_bucket(Tq))
    shared = (T, Tq, H, batch_stride(log2_delta), batch_stride(last), scale, first, *buckets)
    meta = dict(HEAD_DIM=D, DOT_PRECISION=dot_precision(q.dtype))
    grid_kv = lambda m: (triton.cdiv(T + 1, m["BLOCK_N"] - 1) * B * H,)  # noqa: E731
    inputs = (q, k_ext, v_ext, grad_out, lse, delta, log2_delta, last)
    reach = first_rows(last, T)
    shared_kv = (T, Tq, H, batch_stride(log2_delta), batch_stride(last), batch_stride(reach), scale, first,
                 *buckets)
    mode = dq_mode()
    if mode != "pass":
        dq32 = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
        ordered = mode == "deterministic"
        turn = torch.zeros(B * H, Tq, device=q.device, dtype=torch.int32) if ordered else reach  # unused: any int
        kernel = _DKDV_ORDERED_DQ if ordered else _DKDV_ATOMIC_DQ
        kernel.launch(grid_kv, D, q.dtype, *inputs, reach, dk, dv, dq32, turn, *shared_kv, **meta, ATOMIC_DQ=True,
                      ORDERED_DQ=ordered, KEYS_ROWS=KEYS_ROWS)
        return dq32.mul_(scale).to(q.dtype), dk, dv
    dq = torch.empty_like(q)
    _DKDV.launch(grid_kv, D, q.dtype, *inputs, reach, dk, dv, dq, reach, *shared_kv, **meta, ATOMIC_DQ=False,
                 ORDERED_DQ=False, KEYS_ROWS=KEYS_ROWS)
    grid_q = lambda m: (triton.cdiv(Tq, m["BLOCK_M"]) * B * H,)  # noqa: E731
    _DQ.launch(grid_q, D, q.dtype, *inputs, dq, *shared, **meta)
    return dq, dk, dv
