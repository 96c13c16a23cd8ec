"""The fused kernel with queries at their own times (Tq != T, non-causal) against the exact path.

Outputs and gradients to q, k, v and the learned sink parameters, for fewer and more queries than
keys, one query, one key, irregular times, ragged key lengths and ragged query lengths (padded
query rows output 0 and give no gradient, as the exact path's tests in test_op_cross.py check),
every sink mode, float32 and float16 in the interpreter; bfloat16 and long sequences on a GPU.
Shapes cross the interpreter's 16-wide blocks in both counts.
"""

from __future__ import annotations

import pytest
import torch

triton = pytest.importorskip("triton")

from kernel_cases import (  # noqa: E402
    INTERPRET, SINKS, assert_float32_match, assert_half_match, gpu, make_case, needs_gpu, run,
)

import triton.language as tl  # noqa: E402,F401  (visible to the jit spies below, as the interpreter requires)

from ts_continuum import continuous_attention  # noqa: E402
from ts_continuum.attention import backends  # noqa: E402
from ts_continuum.kernels import continuous_bwd, continuous_fwd, tuning  # noqa: E402
from ts_continuum.kernels.autograd import triton_backend  # noqa: E402

# (Tq, T, key lengths, query lengths): fewer queries than keys and more, both ragged (a batch row
# with no valid query, one with a single key).
CROSS = [(5, 37, [37, 20], [5, 2]), (40, 9, [9, 1], [40, 0])]


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("Tq,T,lengths,q_lengths", CROSS)
def test_every_sink_fewer_and_more_queries_ragged_float32(sink, Tq, T, lengths, q_lengths):
    tensors, kw = make_case(B=2, H=2, T=T, Tq=Tq, lengths=lengths, q_lengths=q_lengths, seed=SINKS.index(sink) + Tq)
    assert_float32_match(tensors, sink, **kw)


@pytest.mark.parametrize("Tq,T,sink", [(1, 1, "zero"), (1, 1, "none"), (1, 33, "learned"), (7, 1, "repeat"),
                                       (7, 1, "none"), (17, 2, "none")])
def test_one_query_or_one_key_float32(Tq, T, sink):
    """sink "none" with one key is the zero-length integral (every query gets v_1); with two keys
    one segment."""
    tensors, kw = make_case(B=2, H=1, T=T, Tq=Tq, seed=10 * Tq + T)
    assert_float32_match(tensors, sink, **kw)


@pytest.mark.parametrize("times", ["regular", "shared", "per_batch"])
def test_every_times_layout_float32(times):
    tensors, kw = make_case(B=3, H=1, T=23, Tq=11, times=times, lengths=[23, 17, 2], q_lengths=[11, 3, 6], seed=3)
    assert_float32_match(tensors, "zero", **kw)


@pytest.mark.parametrize("Tq,T", [(15, 29), (16, 31), (17, 16), (31, 15), (33, 47)])
def test_counts_at_block_boundaries_float32(Tq, T):
    """Query counts and key counts around the interpreter's 16-row blocks and the dK/dV pass's
    15-point tiles, so that full and partial query blocks meet interior and boundary segment blocks."""
    tensors, kw = make_case(B=1, H=2, T=T, Tq=Tq, seed=Tq + T)
    assert_float32_match(tensors, "learned", **kw)


@pytest.mark.skipif(not INTERPRET, reason="block sizes are autotuned on a GPU")
def test_gpu_sized_blocks_float32(monkeypatch):
    monkeypatch.setattr(tuning, "INTERPRETER_BLOCKS", {"BLOCK_M": 32, "BLOCK_N": 64})
    tensors, kw = make_case(B=2, H=1, T=70, Tq=45, lengths=[70, 40], q_lengths=[45, 33], seed=32)
    assert_float32_match(tensors, "repeat", **kw)


@pytest.mark.parametrize("Tq,T,lengths,q_lengths", CROSS)
def test_float16_within_flash_attention_rule(Tq, T, lengths, q_lengths):
    tensors, kw = make_case(B=2, H=2, T=T, Tq=Tq, D=32, lengths=lengths, q_lengths=q_lengths, seed=11)
    assert_half_match(tensors, "learned", torch.float16, atol=2e-3, **kw)


@pytest.mark.parametrize("mode", ["pass", "deterministic"])
@pytest.mark.parametrize("Tq,T,lengths,q_lengths", CROSS)
def test_other_dq_modes_float32(monkeypatch, mode, Tq, T, lengths, q_lengths):
    """The default (atomic) dQ runs in every other test; the dQ pass loops over the keys, the
    deterministic one-pass mode over the Tq query rows in turn."""
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", mode)
    tensors, kw = make_case(B=2, H=2, T=T, Tq=Tq, lengths=lengths, q_lengths=q_lengths, seed=21)
    assert_float32_match(tensors, "learned", **kw)


def test_padded_query_rows_output_zero_and_pass_no_gradient():
    """Read off the kernel itself, not only through the comparison: rows past q_lengths are 0 in
    the output and in dq, whatever the output gradient asks of them."""
    tensors, kw = make_case(B=2, H=2, T=20, Tq=18, q_lengths=[18, 5], seed=4)
    out, dq, *_ = run("triton", tensors, torch.float32, "learned", **kw)
    assert (out[1, :, 5:] == 0).all() and (dq[1, :, 5:] == 0).all()
    assert (out[1, :, :5] != 0).all() and (dq[1, :, :5] != 0).any()


def test_backend_triton_takes_queries_at_their_own_times(monkeypatch):
    """The kernel, not a fallback or a refusal, answers Tq != T."""
    chosen = []
    real = backends.select

    def spy(*args, **kwargs):
        chosen.append(real(*args, **kwargs))
        return chosen[-1]

    monkeypatch.setattr(backends, "select", spy)
    tensors, kw = make_case(B=1, H=1, T=6, Tq=3, seed=2)
    out = continuous_attention(*tensors[:3], backend="triton", **kw)
    assert chosen == [triton_backend] and out.shape == (1, 1, 3, 16)


# The interpreter runs a jit function's source in its module's globals: the spies, the functions
# they wrap and what they record live here.
MASKED_FLAGS: dict[str, list[bool]] = {"forward": [], "dq": []}
_FORWARD_BLOCK = continuous_fwd._forward_block
_DQ_BLOCK = continuous_bwd._dq_block


@triton.jit
def _forward_block_spy(q, k_base, v_base, delta_base, j0, last, m_i, z_i, acc, T, scale, FIRST,
                       HEAD_DIM, DOT_PRECISION, BLOCK_N, MASKED):
    MASKED_FLAGS["forward"].append(bool(getattr(MASKED, "value", MASKED)))
    return _FORWARD_BLOCK(q, k_base, v_base, delta_base, j0, last, m_i, z_i, acc, T, scale, FIRST,
                          HEAD_DIM, DOT_PRECISION, BLOCK_N, MASKED)


@triton.jit
def _dq_block_spy(q, do, lse, delta, k_base, v_base, delta_base, j0, last, dq, T, scale, FIRST,
                  HEAD_DIM, DOT_PRECISION, BLOCK_N, MASKED):
    MASKED_FLAGS["dq"].append(bool(getattr(MASKED, "value", MASKED)))
    return _DQ_BLOCK(q, do, lse, delta, k_base, v_base, delta_base, j0, last, dq, T, scale, FIRST,
                     HEAD_DIM, DOT_PRECISION, BLOCK_N, MASKED)


@pytest.mark.skipif(not INTERPRET, reason="spies on the kernels' Python source (interpreter only)")
@pytest.mark.parametrize("q_lengths,masked", [(None, 0), ([20], 4)])
def test_rows_beyond_the_queries_leave_blocks_interior(monkeypatch, q_lengths, masked):
    """24 queries in 16-row blocks over 64 keys: the second query block has 8 rows beyond Tq, which
    are never stored and must not send its 4 segment blocks down the masked path (the forward and
    dQ pass's loops; with few forecast queries every block is such a partial one). Padded query rows
    (q_lengths) must: their output is 0."""
    for seen in MASKED_FLAGS.values():
        seen.clear()
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", "pass")
    monkeypatch.setattr(continuous_fwd, "_forward_block", _forward_block_spy)
    monkeypatch.setattr(continuous_bwd, "_dq_block", _dq_block_spy)
    tensors, kw = make_case(B=1, H=1, T=64, Tq=24, q_lengths=q_lengths, seed=5)
    assert_float32_match(tensors, "zero", **kw)
    for name, seen in MASKED_FLAGS.items():
        assert len(seen) == 8 and sum(seen) == masked, f"{name}: masked flags {seen}"


# ---- GPU only (benchmarks/speed/gpu_check.sh) ----


@gpu
@needs_gpu
@pytest.mark.parametrize("dtype,D", [(torch.bfloat16, 64), (torch.bfloat16, 128), (torch.float16, 64)])
@pytest.mark.parametrize("Tq", [1, 96])
def test_gpu_half_precision_long_keys(dtype, D, Tq):
    tensors, kw = make_case(B=2, H=2, T=2048, Tq=Tq, D=D, lengths=[2048, 1300], q_lengths=[Tq, Tq // 2 + 1],
                            seed=D + Tq)
    atol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    assert_half_match(tensors, "learned", dtype, atol=atol, **kw)


@gpu
@needs_gpu
def test_gpu_float32_more_queries_than_keys():
    tensors, kw = make_case(B=1, H=2, T=300, Tq=1000, D=64, seed=7)
    assert_float32_match(tensors, "zero", atol=1e-4, rtol=1e-4, **kw)

