"""Forward kernel: one program per (query block, batch x head), streaming over segment blocks.

Queries and keys are counted apart (``TQ`` query rows, ``T`` keys): self-attention has TQ = T,
queries at their own times (cross-attention, non-causal) any TQ.

Segment form of docs/continuous-attention.md §2: a block of segments j0..j0+BLOCK_N-1 needs the
scores and values of its right endpoints (points j0..) and of its left endpoints (points j0-1..).

Neighbour access, the main design choice: K and V are loaded twice, aligned (right endpoints) and
shifted one row back (left endpoints), and the left scores come from a second ``tl.dot``. This
costs one extra QK^T and one extra PV product per tile; the alternatives save them. Measured on an
H200 (benchmarks/results/2026-11-30-h200/variants, bf16, 16 shapes, T 336..16384, D 16..128):
shifting the aligned scores with ``tl.gather`` and carrying the previous block's last score column
made the forward 1.24-1.86x slower (median 1.50x); also merging the two value products into one over
gathered per-point weights, 1.38-2.00x (median 1.64x). This points to the per-element moment
arithmetic on the CUDA cores, not the tensor-core products, as what bounds the kernel (an operation
count agrees: the results README there), so the gathers (shuffles through shared memory) cost more
than the products they remove. Those variants were deleted after the
measurement (commit e8dbcf5 has them and ``kernel_bench.py --variants``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .moments import forward_moments, segment_shape
from .tuning import DYNAMIC, FORWARD, TunedKernel, length_bucket


@triton.jit
def query_program(TQ, H, BLOCK_M: tl.constexpr):
    """(query block, batch x head, batch) of this program in a 1-D grid over TQ query rows, query
    blocks fastest: neighbouring programs share K and V in L2, and B x H may exceed the 65535 limit
    of grid axis 1."""
    pid = tl.program_id(0)
    blocks = tl.cdiv(TQ, BLOCK_M)
    bh = (pid // blocks).to(tl.int64)
    return pid % blocks, bh, bh // H


@triton.jit
def load_segments(base, seg, T, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr):
    """Rows ``seg`` (right endpoints) and ``seg - 1`` (left endpoints) of a (T + 1, HEAD_DIM) tensor;
    rows beyond T read as 0 when MASKED (interior blocks skip the predicates)."""
    right = seg[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    if MASKED:
        seg_in = (seg <= T)[:, None]
        r = tl.load(base + right, mask=seg_in, other=0.0)
        l_ = tl.load(base + right - HEAD_DIM, mask=seg_in, other=0.0)
    else:
        r = tl.load(base + right)
        l_ = tl.load(base + right - HEAD_DIM)
    return l_, r


@triton.jit
def load_vector(base, index, bound, MASKED: tl.constexpr):
    """base[index]; entries with index >= bound read as 0 when MASKED."""
    if MASKED:
        r = tl.load(base + index, mask=index < bound, other=0.0)
    else:
        r = tl.load(base + index)
    return r


@triton.jit
def segment_products(
    q, k_base, delta_base, seg, T,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, MASKED: tl.constexpr,
):
    """Keys at both ends of segments ``seg``, the segments' log2 lengths and the unscaled products
    q·k of the query rows with their left (x) and right (y) ends (segment_shape scales them)."""
    k_l, k_r = load_segments(k_base, seg, T, HEAD_DIM, MASKED)
    log2_len = load_vector(delta_base - 1, seg, T + 1, MASKED)
    y = tl.dot(q, tl.trans(k_r), input_precision=DOT_PRECISION)
    x = tl.dot(q, tl.trans(k_l), input_precision=DOT_PRECISION)
    return k_l, k_r, log2_len, x, y


@triton.jit
def block_ranges(last, row_in, FIRST, BLOCK_N: tl.constexpr):
    """Bounds (interior_start, interior_end, stop) that split the segment blocks j0 = 1, 1 + BLOCK_N, ..
    a query block takes into masked blocks [1, interior_start), interior blocks [interior_start,
    interior_end) and masked blocks [interior_end, stop). Interior: every row integrates over every
    segment of the block, so it needs no masks (15 % fewer instructions per element:
    benchmarks/speed/sass_report.py). Padded query rows (last = 0) keep a block masked, as their output
    must be 0; rows beyond TQ (``row_in`` false, never stored) do not: their zero queries give
    finite scores, so a partial row block (every block when TQ < BLOCK_M, as for a few forecast
    queries) still takes the interior path.

    Why three loops rather than one loop that branches per block: Triton software-pipelines only
    straight-line loop bodies (cp.async prefetch of the next K/V tiles) reliably; with a branch in
    the body, Triton 3.6 (the H200 image's) compiled plain loads (benchmarks/speed/sass_report.py: LDG
    instead of LDGSTS). Triton 3.9 pipelined both forms; the three loops also cost it 5
    instructions per element fewer at D = 64."""
    stop = tl.max(last, 0) + 1
    start = 1 + tl.cdiv(FIRST - 1, BLOCK_N) * BLOCK_N  # the first block with j0 >= FIRST
    fewest = tl.min(tl.where(row_in, last, stop - 1), 0)
    end = 1 + (fewest // BLOCK_N) * BLOCK_N  # blocks before it end by every stored row's last
    has = end > start
    return tl.where(has, start, stop), tl.where(has, end, stop), stop


@triton.jit
def _forward_block(
    q, k_base, v_base, delta_base, j0, last, m_i, z_i, acc, T, scale, FIRST,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr,
):
    """One block of segments j0 .. j0 + BLOCK_N - 1 (segment j joins points j-1 and j) folded into
    the running max m_i (log2 units), normaliser z_i and output accumulator acc."""
    seg = j0 + tl.arange(0, BLOCK_N)
    _, _, log2_len, x, y = segment_products(q, k_base, delta_base, seg, T, HEAD_DIM, DOT_PRECISION, MASKED)
    top, u, left_high = segment_shape(x, y, log2_len[None, :], scale)
    if MASKED:  # e^-inf = 0 removes a segment
        top = tl.where((seg[None, :] >= FIRST) & (seg[None, :] <= last[:, None]), top, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(top, 1))
    m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no segment yet
    e = tl.exp2(top - m_ref[:, None])
    p_high, p_low = forward_moments(u, DOT_PRECISION != "ieee")  # half-precision inputs: shorter series
    w_l = e * tl.where(left_high, p_high, p_low)
    w_r = e * tl.where(left_high, p_low, p_high)
    alpha = tl.exp2(m_i - m_ref)
    z_i = z_i * alpha + tl.sum(w_l + w_r, 1)

    v_l, v_r = load_segments(v_base, seg, T, HEAD_DIM, MASKED)
    acc = acc * alpha[:, None]
    acc += tl.dot(w_l.to(v_l.dtype), v_l, input_precision=DOT_PRECISION)
    acc += tl.dot(w_r.to(v_r.dtype), v_r, input_precision=DOT_PRECISION)
    return m_new, z_i, acc


@triton.jit(do_not_specialize=DYNAMIC)
def _forward_kernel(
    Q, K, V, LOG2_DELTA, LAST, OUT, LSE,
    T, TQ, H, stride_delta_b, stride_last_b, scale, FIRST, T_BUCKET, TQ_BUCKET,
    HEAD_DIM: tl.constexpr, DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    pid_m, bh, b = query_program(TQ, H, BLOCK_M)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    row_in = rows < TQ

    q = tl.load(Q + bh * TQ * HEAD_DIM + rows[:, None] * HEAD_DIM + dims[None, :], mask=row_in[:, None], other=0.0)
    last = tl.load(LAST + b * stride_last_b + rows, mask=row_in, other=0)
    k_base = K + bh * (T + 1) * HEAD_DIM
    v_base = V + bh * (T + 1) * HEAD_DIM
    delta_base = LOG2_DELTA + b * stride_delta_b

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    z_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # Segments beyond the block's largest `last` take no part: the causal and ragged saving.
    # Blocks in order, as one loop would take them; interior blocks skip the masks.
    start, end, stop = block_ranges(last, row_in, FIRST, BLOCK_N)
    for j0 in range(1, start, BLOCK_N):
        m_i, z_i, acc = _forward_block(q, k_base, v_base, delta_base, j0, last, m_i, z_i, acc, T, scale,
                                       FIRST, HEAD_DIM, DOT_PRECISION, BLOCK_N, True)
    for j0 in range(start, end, BLOCK_N):
        m_i, z_i, acc = _forward_block(q, k_base, v_base, delta_base, j0, last, m_i, z_i, acc, T, scale,
                                       FIRST, HEAD_DIM, DOT_PRECISION, BLOCK_N, False)
    for j0 in range(end, stop, BLOCK_N):
        m_i, z_i, acc = _forward_block(q, k_base, v_base, delta_base, j0, last, m_i, z_i, acc, T, scale,
                                       FIRST, HEAD_DIM, DOT_PRECISION, BLOCK_N, True)

    has = z_i > 0.0
    z_safe = tl.where(has, z_i, 1.0)
    out = acc / z_safe[:, None]
    lse = tl.where(has, m_i + tl.log2(z_safe), 0.0)
    tl.store(OUT + bh * TQ * HEAD_DIM + rows[:, None] * HEAD_DIM + dims[None, :], out.to(OUT.dtype.element_ty),
             mask=row_in[:, None])
    tl.store(LSE + bh * TQ + rows, lse, mask=row_in)


_FORWARD = TunedKernel(_forward_kernel, FORWARD)


def dot_precision(dtype: torch.dtype) -> str:
    """Exact float32 products for float32 inputs (the GPU default would be TF32)."""
    return "ieee" if dtype == torch.float32 else "tf32"


def batch_stride(t: torch.Tensor) -> int:
    """Row stride of a (B|1, N) tensor, 0 when it is shared by the whole batch."""
    return 0 if t.shape[0] == 1 else t.stride(0)


def forward(
    q: torch.Tensor, k_ext: torch.Tensor, v_ext: torch.Tensor, log2_delta: torch.Tensor,
    last: torch.Tensor, first: int, scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output (B, H, Tq, D) in q's dtype and the row log-normaliser (B, H, Tq) in float32, in log2
    units as the kernels work (log2 Z = LSE · log2 e).

    Inputs contiguous: q (B, H, Tq, D), k_ext and v_ext (B, H, T + 1, D); ``log2_delta`` (log2 of
    the segment lengths) float32 (B|1, T) and ``last`` int32 (B|1, Tq).
    """
    B, H, Tq, D = q.shape
    T = k_ext.shape[2] - 1
    out = torch.empty_like(q)
    lse = torch.empty(B, H, Tq, device=q.device, dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(Tq, meta["BLOCK_M"]) * B * H,)  # noqa: E731
    _FORWARD.launch(
        grid, D, q.dtype,
        q, k_ext, v_ext, log2_delta, last, out, lse,
        T, Tq, H, batch_stride(log2_delta), batch_stride(last), scale, first, length_bucket(T), length_bucket(Tq),
        HEAD_DIM=D, DOT_PRECISION=dot_precision(q.dtype),
    )
    return out, lse
