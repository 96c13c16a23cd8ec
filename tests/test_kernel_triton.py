"""The fused Triton kernel against the exact torch path: outputs and gradients in every mode.

Without a GPU the kernel runs in the Triton interpreter (tests/conftest.py sets TRITON_INTERPRET),
on small shapes whose lengths cross the interpreter's 16-wide blocks. On a GPU machine
(TS_CONTINUUM_GPU_TESTS=1) the same tests run compiled on CUDA tensors; benchmarks/speed/gpu_check.sh
runs the ``gpu`` tests: bfloat16, head dims 64/128, long sequences, the O(T) memory footprint.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402,F401  (visible to the jit spies below, as the interpreter requires)

from kernel_cases import (  # noqa: E402
    DEVICE, INTERPRET, NAMES, SINKS, assert_float32_match, assert_half_match, gpu, make_case, needs_gpu, run,
)

from ts_continuum import continuous_attention  # noqa: E402
from ts_continuum.attention import backends  # noqa: E402
from ts_continuum.kernels import continuous_bwd, continuous_fwd, moments, tuning  # noqa: E402
from ts_continuum.kernels.autograd import triton_backend  # noqa: E402


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("causal", [False, True])
def test_every_sink_and_direction_float32(sink, causal):
    tensors, kw = make_case(T=37, seed=SINKS.index(sink) + 10 * causal)
    assert_float32_match(tensors, sink, causal=causal, **kw)


@pytest.mark.parametrize("times", ["regular", "shared", "per_batch"])
@pytest.mark.parametrize("causal", [False, True])
def test_ragged_lengths_and_every_times_layout_float32(times, causal):
    tensors, kw = make_case(B=3, T=40, times=times, lengths=[40, 17, 1], seed=3)
    assert_float32_match(tensors, "zero", causal=causal, **kw)


@pytest.mark.parametrize("T", [1, 2, 15, 16, 17, 29, 31, 64])
@pytest.mark.parametrize("sink", ["none", "learned"])
def test_lengths_at_block_boundaries_float32(T, sink):
    """Odd T are bidirectional. Blocks whose every row takes every segment skip the masks; T = 31
    (forward, dQ: 16-segment blocks) and T = 29 (dK/dV: tiles every 15 points) put a full row
    block's last segment one short of such a block's end."""
    tensors, kw = make_case(B=1, H=2, T=T, seed=T)
    assert_float32_match(tensors, sink, causal=T % 2 == 0, **kw)


@pytest.mark.skipif(not INTERPRET, reason="block sizes are autotuned on a GPU")
@pytest.mark.parametrize("block_m,block_n", [(32, 64), (64, 32), (64, 64)])
def test_gpu_sized_blocks_float32(monkeypatch, block_m, block_n):
    """The GPU's block shapes (wider than the interpreter's 16 x 16) give the same results."""
    monkeypatch.setattr(tuning, "INTERPRETER_BLOCKS", {"BLOCK_M": block_m, "BLOCK_N": block_n})
    tensors, kw = make_case(B=2, H=1, T=70, lengths=[70, 40], seed=block_m)
    assert_float32_match(tensors, "repeat", causal=True, **kw)


def test_head_dim_32_and_custom_scale_float32():
    tensors, kw = make_case(B=1, H=3, T=33, D=32, seed=5)
    # 32-term dot products at scale 0.9: dq's round-off reaches 5e-6 (the default 3e-6 fits D <= 16)
    assert_float32_match(tensors, "repeat", causal=True, scale=0.9, atol=1e-5, rtol=1e-5, **kw)


@pytest.mark.parametrize("causal", [False, True])
def test_negative_scale_float32(causal):
    """The kernel's segment moments assume scale >= 0; the op negates q for a negative one."""
    tensors, kw = make_case(B=1, H=2, T=20, seed=11)
    assert_float32_match(tensors, "zero", causal=causal, scale=-0.8, **kw)


def test_large_scores_and_long_segments_stay_exact_float32():
    """Scores of tens and segments of very different lengths: the running max must carry the range."""
    (q, *rest), kw = make_case(B=1, H=1, T=48, seed=9)
    kw["times"] = torch.cumsum(torch.logspace(-2, 2, 48), 0).to(DEVICE)
    assert_float32_match([8 * q, *rest], "zero", atol=1e-4, rtol=1e-4, **kw)


@pytest.mark.parametrize("rise", [0.02, 2.0])
@pytest.mark.parametrize("causal", [False, True])
def test_scores_rising_along_the_sequence_float32(rise, causal):
    """Scores rising by ``rise`` per point: the running maximum grows a little (0.02) or by far more
    than float32 could hold unrescaled (2.0: up to 128 over the sequence, beyond e^88) in every
    block. Both cases caught mutations of a lazily rescaling forward (FlashAttention-4's scheme;
    not kept: on sm_90 its block-wide test cost what its skipped multiplies saved)."""
    T = 64
    (q, k, *rest), kw = make_case(B=1, H=2, T=T, seed=12)
    ramp = rise * torch.arange(T, device=DEVICE, dtype=torch.float32)
    q, k = q.clone(), 0.1 * k
    q[..., 0] = 4.0  # default scale 1/4: the scores are about the ramp
    k[..., 0] += ramp
    assert_float32_match([q, k, *rest], "learned", atol=1e-4, rtol=1e-4, causal=causal, **kw)


@pytest.mark.parametrize("causal", [False, True])
def test_float32_forward_uses_the_full_moment_series(causal):
    """Float32 inputs must take the degree-5 series, not the shorter one meant for half precision,
    whose error (2e-6) is under assert_float32_match's tolerance on ordinary inputs.

    Keys alternate between +e1 and -e1, so every segment has the score gap |u| = 0.95, where the two
    series' errors in the ratio of a segment's endpoint weights φ2 : χ differ most (2.4e-6 against
    7e-8), and the values' first component alternates ±1, so that component of the output is
    (φ2 - χ) / (φ2 + χ) in every row with a segment, whatever the segment lengths and the rounding of
    their exponentials. The float32 kernel gets it within about 1e-8 of the float64 exact path; with
    the short series it is about 9e-7 off."""
    B, H, T, D = 1, 2, 40, 16
    (_, _, v, *_), kw = make_case(B=B, H=H, T=T, D=D, seed=13)
    sign = torch.where(torch.arange(T, device=DEVICE) % 2 == 0, 1.0, -1.0)
    q, k = torch.zeros(B, H, T, D, device=DEVICE), torch.zeros(B, H, T, D, device=DEVICE)
    q[..., 0] = 0.95 * 2  # default scale 1/4: scores ±0.475
    k[..., 0] = sign
    v = 0.1 * v
    v[..., 0] = sign
    want = continuous_attention(q.double(), k.double(), v.double(), sink="none", causal=causal,
                                backend="torch", **{n: t.double() for n, t in kw.items()})
    got = continuous_attention(q, k, v, sink="none", causal=causal, backend="triton", **kw).double()
    err = (got[..., 0] - want[..., 0]).abs().max().item()
    assert err < 3e-7, f"float32 kernel's weight ratio {err:.1e} off the float64 exact path"


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sink", ["zero", "learned"])
def test_float16_within_flash_attention_rule(causal, sink):
    tensors, kw = make_case(B=2, H=2, T=45, D=32, lengths=[45, 30], seed=11)
    assert_half_match(tensors, sink, torch.float16, atol=2e-3, causal=causal, **kw)


# The interpreter runs a jit function's source in its module's globals (closures are lost), so the
# spies and what they record live here.
SHORT_FLAGS: dict[str, list[bool]] = {"forward": [], "backward": []}


@triton.jit
def _forward_moments_spy(u, SHORT):
    SHORT_FLAGS["forward"].append(bool(getattr(SHORT, "value", SHORT)))
    return moments.forward_moments(u, SHORT)


@triton.jit
def _backward_moments_spy(u, SHORT):
    SHORT_FLAGS["backward"].append(bool(getattr(SHORT, "value", SHORT)))
    return moments.backward_moments(u, SHORT)


@pytest.mark.skipif(not INTERPRET, reason="spies on the kernels' Python source (interpreter only)")
@pytest.mark.parametrize("dtype,short", [(torch.float32, False), (torch.float16, True)])
def test_each_pass_takes_the_moment_series_meant_for_its_precision(monkeypatch, dtype, short):
    """The short series is for half-precision inputs only. Its error (1e-6 at most) lies under what
    float32 gradients can resolve end to end (the float32 forward has its own numerical test above), so
    the choice each pass makes is read directly: spies record the SHORT flag every call passes."""
    for seen in SHORT_FLAGS.values():
        seen.clear()
    monkeypatch.setattr(continuous_fwd, "forward_moments", _forward_moments_spy)
    monkeypatch.setattr(continuous_bwd, "backward_moments", _backward_moments_spy)
    tensors, kw = make_case(B=1, H=1, T=37, D=16, seed=14)
    run("triton", tensors, dtype, "learned", causal=True, **kw)
    for name, seen in SHORT_FLAGS.items():
        assert seen and set(seen) == {short}, f"{name} pass took SHORT={sorted(set(seen))} for {dtype}"


class NoDqPass:
    def launch(self, *args, **kwargs):
        raise AssertionError("the dQ pass ran in a one-pass mode")


@pytest.fixture
def default_dq(monkeypatch):
    """TS_CONTINUUM_DQ unset (whatever the calling shell says), as every other test here runs."""
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", None)


@pytest.fixture(params=["pass", "deterministic"])
def other_dq(request, monkeypatch):
    """The dQ modes other than the default atomic one, which every other test here runs; the dQ
    pass is made to fail if it ran in the one-pass mode."""
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", request.param)
    if request.param != "pass":
        monkeypatch.setattr(continuous_bwd, "_DQ", NoDqPass())
    return request.param


def test_default_dq_mode_is_one_pass_and_deterministic_when_torch_asks(default_dq, monkeypatch):
    monkeypatch.setattr(continuous_bwd, "_DQ", NoDqPass())
    assert continuous_bwd.dq_mode() == "atomic"
    tensors, kw = make_case(B=1, H=1, T=20, seed=2)
    assert_float32_match(tensors, "zero", **kw)
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        assert continuous_bwd.dq_mode() == "deterministic"
    finally:
        torch.use_deterministic_algorithms(was)


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("causal", [False, True])
def test_other_dq_modes_every_sink_and_direction_float32(other_dq, sink, causal):
    tensors, kw = make_case(B=2, H=2, T=37, lengths=[37, 22], seed=21)
    assert_float32_match(tensors, sink, causal=causal, **kw)


@pytest.mark.parametrize("T", [1, 15, 16, 31, 47])
def test_other_dq_modes_lengths_at_block_boundaries_float32(other_dq, T):
    """dK/dV programs own BLOCK_N - 1 segments each: T around multiples of 15 and 16."""
    tensors, kw = make_case(B=2, H=1, T=T, lengths=[T, max(1, T - 3)], seed=T)
    assert_float32_match(tensors, "none", causal=True, **kw)


def test_other_dq_modes_float16_within_flash_attention_rule(other_dq):
    tensors, kw = make_case(B=2, H=2, T=45, D=32, lengths=[45, 30], seed=11)
    assert_half_match(tensors, "learned", torch.float16, atol=2e-3, causal=True, **kw)


@pytest.fixture(params=["atomic", "deterministic", "pass"])
def keys_rows(request, monkeypatch):
    """The dK/dV pass on key-major tiles (S^T = K Q^T, continuous_bwd.KEYS_ROWS), in every dQ mode."""
    monkeypatch.setattr(continuous_bwd, "KEYS_ROWS", True)
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", request.param)
    return request.param


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("causal", [False, True])
def test_key_major_tiles_every_sink_and_direction_float32(keys_rows, sink, causal):
    tensors, kw = make_case(B=2, H=1, T=37, lengths=[37, 22], seed=31)
    assert_float32_match(tensors, sink, causal=causal, **kw)


@pytest.mark.parametrize("T", [1, 15, 16, 31])
def test_key_major_tiles_lengths_at_block_boundaries_float32(keys_rows, T):
    tensors, kw = make_case(B=2, H=1, T=T, lengths=[T, max(1, T - 3)], seed=T)
    assert_float32_match(tensors, "learned", causal=True, **kw)


def test_key_major_tiles_float16_and_queries_at_their_own_times(keys_rows):
    tensors, kw = make_case(B=2, H=2, T=45, D=32, lengths=[45, 30], seed=12)
    assert_half_match(tensors, "learned", torch.float16, atol=2e-3, causal=True, **kw)
    tensors, kw = make_case(B=2, H=1, T=29, Tq=21, q_lengths=[21, 9], lengths=[29, 18], seed=13)
    assert_float32_match(tensors, "zero", **kw)


@pytest.mark.skipif(not INTERPRET, reason="block sizes are autotuned on a GPU")
def test_key_major_tiles_gpu_sized_blocks_float32(monkeypatch):
    monkeypatch.setattr(continuous_bwd, "KEYS_ROWS", True)
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", None)
    monkeypatch.setattr(tuning, "INTERPRETER_BLOCKS", {"BLOCK_M": 32, "BLOCK_N": 64})
    tensors, kw = make_case(B=2, H=1, T=70, lengths=[70, 40], seed=32)
    assert_float32_match(tensors, "repeat", causal=True, **kw)


def test_unknown_dq_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", "fused")
    q = torch.randn(1, 1, 8, 16, device=DEVICE, requires_grad=True)
    out = continuous_attention(q, q, q, backend="triton")
    with pytest.raises(ValueError, match="TS_CONTINUUM_DQ must be one of atomic, deterministic, pass .or unset.; "
                                         "got 'fused'"):
        out.sum().backward()


def test_chosen_configs_names_every_kernel():
    chosen = tuning.chosen_configs()
    assert {"_forward_kernel", "_dkdv_kernel", "_dkdv_kernel+atomic_dq", "_dkdv_kernel+ordered_dq",
            "_dq_kernel"} <= set(chosen)
    if DEVICE == "cpu":  # the interpreter runs fixed blocks: nothing tuned
        assert not any(chosen.values())


def test_backend_triton_dispatches_to_the_kernel():
    """Guards every comparison here: backend="triton" must not quietly be the torch path."""
    q = torch.randn(1, 1, 4, 16, device=DEVICE)
    assert backends.select("triton", q, 16, 16) is triton_backend
    if DEVICE == "cpu":
        assert backends.select("auto", q, 16, 16) is not triton_backend


@pytest.mark.parametrize("D,Dv", [(4, 4), (8, 24), (48, 20)])
@pytest.mark.parametrize("sink", ["zero", "learned"])
def test_head_dims_between_the_compiled_widths_are_padded_exactly_float32(D, Dv, sink):
    """PatchTST's published ETT models have head dim 4; other widths are zero-padded to 16/32/64/128."""
    g = torch.Generator().manual_seed(D + Dv)
    B, H, T = 2, 2, 21
    q, k = (torch.randn(B, H, T, D, generator=g) for _ in range(2))
    v, do = (torch.randn(B, H, T, Dv, generator=g) for _ in range(2))
    sink_k, sink_v = torch.randn(H, D, generator=g), torch.randn(H, Dv, generator=g)
    _, kw = make_case(B=B, T=T, lengths=[T, 13], seed=D)
    tensors = [t.to(DEVICE) for t in (q, k, v, sink_k, sink_v, do)]
    assert_float32_match(tensors, sink, causal=True, **kw)
    assert run("triton", tensors, torch.float32, sink, **kw)[0].shape == (B, H, T, Dv)


@pytest.mark.parametrize(
    "shape,dtype,match",
    [((2, 2, 8, 160), torch.float32, "head dim 160"), ((2, 2, 8, 16), torch.float64, "dtype"),
     (None, None, "head dim 16 / value dim 192")],
)
def test_unsupported_inputs_are_a_clear_error(shape, dtype, match):
    if shape is None:
        q = k = torch.randn(1, 1, 8, 16, device=DEVICE)
        v = torch.randn(1, 1, 8, 192, device=DEVICE)
    else:
        q = k = v = torch.randn(*shape, dtype=dtype, device=DEVICE)
    with pytest.raises(ValueError, match=f"does not support these inputs: {match}.*backend='torch'"):
        continuous_attention(q, k, v, backend="triton")


@pytest.mark.skipif(not INTERPRET, reason="the interpreter's limitation")
def test_bfloat16_in_the_interpreter_is_a_clear_error():
    q = torch.randn(1, 1, 8, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="bfloat16 outside a GPU"):
        continuous_attention(q, q, q, backend="triton")


def test_triton_backend_on_cpu_without_the_interpreter_is_a_clear_error():
    code = (
        "import torch\n"
        "from ts_continuum import continuous_attention\n"
        "q = torch.randn(1, 1, 4, 16)\n"
        "try:\n"
        "    continuous_attention(q, q, q, backend='triton')\n"
        "except ValueError as e:\n"
        "    print('ValueError:', e)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "ValueError: backend='triton' is unavailable" in res.stdout and "TRITON_INTERPRET=1" in res.stdout


# ---- GPU only (benchmarks/speed/gpu_check.sh) ----


@gpu
@needs_gpu
@pytest.mark.parametrize("dtype,D", [(torch.bfloat16, 64), (torch.bfloat16, 128), (torch.float16, 64)])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_half_precision_long_sequences(dtype, D, causal):
    tensors, kw = make_case(B=2, H=2, T=2048, D=D, lengths=[2048, 1300], seed=D + causal)
    atol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    assert_half_match(tensors, "learned", dtype, atol=atol, causal=causal, **kw)


@gpu
@needs_gpu
@pytest.mark.parametrize("causal,Tq", [(True, None), (False, 96)])
def test_gpu_deterministic_dq_is_the_same_bits_every_run(monkeypatch, causal, Tq):
    """Many key blocks add into every query tile; in turn, the sums come out the same each run."""
    monkeypatch.setattr(continuous_bwd, "DQ_MODE", "deterministic")
    tensors, kw = make_case(B=2, H=4, T=4096, Tq=Tq, D=64, lengths=[4096, 3000], seed=3)
    first, second = (run("triton", tensors, torch.bfloat16, "learned", causal=causal, **kw) for _ in range(2))
    for name, a, b in zip(NAMES, first, second):
        assert torch.equal(a, b), f"{name} differs between two runs"


@gpu
@needs_gpu
@pytest.mark.parametrize("T,causal", [(2048, False), (2048, True), (777, False)])
def test_gpu_float32_matches_exact_path(T, causal):
    tensors, kw = make_case(B=1, H=2, T=T, D=64, seed=T + causal)
    assert_float32_match(tensors, "zero", atol=1e-4, rtol=1e-4, causal=causal, **kw)


def test_auto_backend_picks_the_kernel_for_cuda_inputs_it_supports():
    """Only the inputs' device and dtype decide, so a stand-in CUDA tensor tests it without a GPU."""
    from types import SimpleNamespace

    def on_cuda(dtype):
        return SimpleNamespace(device=torch.device("cuda"), dtype=dtype)

    assert backends.select("auto", on_cuda(torch.bfloat16), 64, 64) is triton_backend
    assert backends.select("auto", on_cuda(torch.float64), 64, 64) is not triton_backend
    assert backends.select("auto", on_cuda(torch.float32), 4, 4) is triton_backend  # PatchTST's head dim, padded
    assert backends.select("auto", on_cuda(torch.float32), 192, 192) is not triton_backend
    assert backends.select("auto", SimpleNamespace(device=torch.device("cpu"), dtype=torch.float32), 64, 64) \
        is not triton_backend


@gpu
@needs_gpu
def test_gpu_memory_is_linear_in_length():
    """At T = 16384 a single float32 T x T tile would take 1 GiB; the kernel needs O(T · D)."""
    B, H, T, D = 1, 2, 16384, 64
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    run_once = lambda: continuous_attention(q, k, v, causal=True, backend="triton").sum().backward()  # noqa: E731
    run_once()  # autotuning and compilation allocate scratch space
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    run_once()
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    assert extra < 40 * q.numel() * q.element_size(), f"{extra / 2**20:.0f} MiB extra for T={T}"


@pytest.mark.parametrize("Tq,causal,lengths,q_lengths", [
    (13, True, [0, 1, 5, 12, 13], None), (13, False, [0, 1, 5, 12, 13], None),
    (4, False, [1, 5, 12, 13, 13], [4, 4, 0, 2, 1]), (30, False, [1, 5, 12, 13, 13], [30, 7, 0, 29, 16]),
])
def test_first_rows_lists_the_rows_that_take_each_segment(Tq, causal, lengths, q_lengths):
    """The dK/dV kernel visits, for a segment tile of T keys, only the query rows
    [first_rows[p], first_rows[T + 1]) that take segment p; checked against every row's `last` for
    self-attention (causal and not) and for Tq queries, ragged keys and queries, including 0 and T."""
    from ts_continuum.attention.reference import SegmentLayout

    T = 13
    lengths = torch.tensor(lengths)
    q_valid = None if q_lengths is None else torch.tensor(q_lengths)
    last = SegmentLayout(lengths, Tq, causal, 1, "cpu", keys=T, q_valid=q_valid).last.to(torch.int32)
    reach = continuous_bwd.first_rows(last, T)
    assert reach.shape == (len(lengths), T + 2) and reach.dtype == torch.int32
    for b in range(len(lengths)):
        for p in range(T + 2):
            takes = torch.nonzero(last[b] >= max(p, 1)).flatten().tolist()  # rows that take segment p
            if p > T or not takes:
                assert reach[b, p] == reach[b, T + 1]
            else:
                assert list(range(reach[b, p], reach[b, T + 1])) == takes, (b, p)


def test_rocm_gpus_fall_back_and_launches_follow_the_inputs_device(monkeypatch):
    """Both checks run without a GPU: a CUDA device object needs no driver until it is used."""
    from types import SimpleNamespace

    from ts_continuum.kernels.autograd import on_device, unsupported_reason

    on_gpu = SimpleNamespace(dtype=torch.float16, device=torch.device("cuda", 1))
    assert unsupported_reason(on_gpu, 64, 64) == ""
    monkeypatch.setattr(torch.version, "hip", "6.2")
    assert "ROCm" in unsupported_reason(on_gpu, 64, 64)
    guard = on_device(on_gpu)
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1  # Triton launches on the current device
    assert not isinstance(on_device(SimpleNamespace(device=torch.device("cpu"))), torch.cuda.device)
