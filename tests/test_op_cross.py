"""Queries at their own times (Tq != T): the exact path against the quadrature oracle, the
self-attention call, gradients and the argument checks (the kernel's: tests/test_kernel_cross.py)."""

from __future__ import annotations

import pytest
import torch
from oracle import quadrature_attention

from ts_continuum import continuous_attention
from ts_continuum.attention import backends, reference

SINKS = ["zero", "repeat", "none", "learned"]


def make_inputs(B=3, H=2, Tq=4, T=6, D=3, Dv=2, seed=0, per_batch_times=True, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Tq, D, generator=g, dtype=dtype)
    k = torch.randn(B, H, T, D, generator=g, dtype=dtype)
    v = torch.randn(B, H, T, Dv, generator=g, dtype=dtype)
    gaps = 0.2 + 2.5 * torch.rand(B if per_batch_times else 1, T, generator=g, dtype=torch.float64)
    times = (torch.cumsum(gaps, -1) + 3.0).to(dtype)
    times = times if per_batch_times else times[0]
    sink_k = torch.randn(H, D, generator=g, dtype=dtype)
    sink_v = torch.randn(H, Dv, generator=g, dtype=dtype)
    return q, k, v, times, sink_k, sink_v


def sink_kwargs(sink, sink_k, sink_v):
    return dict(sink=sink, sink_k=sink_k, sink_v=sink_v) if sink == "learned" else dict(sink=sink)


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("Tq", [1, 3, 9])
@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("per_batch_times", [False, True])
def test_matches_quadrature_of_the_defining_integral(sink, Tq, ragged, per_batch_times):
    seed = SINKS.index(sink) * 100 + 10 * Tq + ragged
    q, k, v, times, sk, sv = make_inputs(Tq=Tq, T=6, seed=seed, per_batch_times=per_batch_times)
    lengths = torch.tensor([6, 4, 1]) if ragged else None
    q_lengths = torch.tensor([Tq, max(Tq - 2, 0), 1]) if ragged else None
    kw = dict(times=times, lengths=lengths, q_lengths=q_lengths, sink_gap=0.7, scale=0.8,
              **sink_kwargs(sink, sk, sv))
    got = continuous_attention(q, k, v, backend="torch", **kw)
    want = quadrature_attention(q, k, v, **kw)
    assert got.shape == (3, 2, Tq, 2)
    if q_lengths is not None:
        pad = torch.arange(Tq)[None, :] >= q_lengths[:, None]
        assert (got[pad[:, None, :, None].expand_as(got)] == 0).all(), "padded query rows must output 0"
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-8)


def test_equal_counts_without_q_lengths_is_the_self_attention_call_bit_for_bit():
    q, k, v, times, _, _ = make_inputs(Tq=6, T=6, dtype=torch.float32)
    lengths = torch.tensor([6, 4, 2])
    for causal in (False, True):
        a = continuous_attention(q, k, v, times=times, lengths=lengths, causal=causal, backend="torch")
        b = continuous_attention(q, k, v, times=times, lengths=lengths, causal=causal, q_lengths=None,
                                 backend="torch")
        assert torch.equal(a, b)
    # q_lengths equal to lengths names the same padded rows: the same numbers again
    a = continuous_attention(q, k, v, times=times, lengths=lengths, backend="torch")
    b = continuous_attention(q, k, v, times=times, lengths=lengths, q_lengths=lengths, backend="torch")
    assert torch.equal(a, b)


def test_each_query_gets_the_output_a_self_attention_row_with_that_query_gets():
    """Non-causal rows depend only on their own query: any selection of self-attention queries,
    asked as cross-attention queries, gives those rows."""
    q, k, v, times, sk, sv = make_inputs(Tq=6, T=6, seed=3)
    lengths = torch.tensor([6, 5, 3])
    idx = torch.tensor([2, 0, 2, 1, 1, 0, 2, 2, 0])  # more queries than keys, repeated rows
    for sink in SINKS:
        kw = dict(times=times, lengths=lengths, **sink_kwargs(sink, sk, sv))
        full = continuous_attention(q, k, v, backend="torch", **kw)
        cross = continuous_attention(q[:, :, idx], k, v, backend="torch", **kw)
        torch.testing.assert_close(cross, full[:, :, idx], atol=1e-12, rtol=1e-12)


def test_queries_beyond_key_lengths_are_answered_when_q_lengths_says_so():
    """With Tq = T the rows past ``lengths`` are padding by default; q_lengths makes them queries."""
    q, k, v, times, _, _ = make_inputs(Tq=6, T=6, seed=5)
    lengths = torch.tensor([6, 2, 3])
    out = continuous_attention(q, k, v, times=times, lengths=lengths, q_lengths=torch.full((3,), 6),
                               backend="torch")
    want = quadrature_attention(q, k, v, times=times, lengths=lengths, q_lengths=torch.full((3,), 6))
    torch.testing.assert_close(out, want, atol=1e-9, rtol=1e-8)
    assert (out[1, :, 2:].abs() > 0).all()


@pytest.mark.parametrize("sink", SINKS)
def test_gradcheck_float64(sink):
    q, k, v, times, sk, sv = make_inputs(B=2, Tq=4, T=5, seed=7)
    lengths, q_lengths = torch.tensor([5, 3]), torch.tensor([4, 2])
    for t in (q, k, v, sk, sv):
        t.requires_grad_(True)

    def f(q, k, v, sk, sv):
        return continuous_attention(q, k, v, times=times, lengths=lengths, q_lengths=q_lengths, backend="torch",
                                    **sink_kwargs(sink, sk, sv))

    assert torch.autograd.gradcheck(f, (q, k, v, sk, sv), atol=1e-8)


def test_padded_queries_and_keys_hold_anything_and_receive_no_gradient():
    q, k, v, times, _, _ = make_inputs(B=2, Tq=5, T=6, seed=9)
    lengths, q_lengths = torch.tensor([6, 3]), torch.tensor([5, 2])
    clean = continuous_attention(q, k, v, times=times, lengths=lengths, q_lengths=q_lengths, backend="torch")
    q2, k2, v2, t2 = q.clone(), k.clone(), v.clone(), times.clone()
    q2[1, :, 2:], k2[1, :, 3:], v2[1, :, 3:], t2[1, 3:] = float("nan"), float("nan"), float("nan"), float("nan")
    for t in (q2, k2, v2):
        t.requires_grad_(True)
    out = continuous_attention(q2, k2, v2, times=t2, lengths=lengths, q_lengths=q_lengths, backend="torch")
    assert torch.equal(out, clean)
    out.backward(torch.ones_like(out))
    assert (q2.grad[1, :, 2:] == 0).all() and (k2.grad[1, :, 3:] == 0).all() and (v2.grad[1, :, 3:] == 0).all()
    assert all(torch.isfinite(t.grad).all() for t in (q2, k2, v2))


def test_a_batch_row_without_queries_outputs_zeros():
    q, k, v, times, _, _ = make_inputs(B=2, Tq=3, T=4, seed=2)
    for sink in ("zero", "none"):
        out = continuous_attention(q, k, v, times=times, q_lengths=torch.tensor([3, 0]), sink=sink, backend="torch")
        assert (out[1] == 0).all() and (out[0].abs() > 0).all()


def test_one_key_without_sink_gives_its_value_to_every_query():
    """sink='none' with one key: a zero-length integral, defined by its limit v_1."""
    q, k, v, times, _, _ = make_inputs(B=2, Tq=5, T=1, seed=4)
    out = continuous_attention(q, k, v, times=times, sink="none", q_lengths=torch.tensor([5, 3]), backend="torch")
    torch.testing.assert_close(out[0], v[0].expand(-1, 5, -1))
    torch.testing.assert_close(out[1, :, :3], v[1].expand(-1, 3, -1))
    assert (out[1, :, 3:] == 0).all()


def test_query_tiles_change_nothing(monkeypatch):
    q, k, v, times, sk, sv = make_inputs(B=2, Tq=13, T=7, seed=11)
    lengths, q_lengths = torch.tensor([7, 4]), torch.tensor([13, 6])
    seen = []
    real = reference.forward_tile

    def spy(q_tile, *rest):
        seen.append(tuple(q_tile.shape[:3]))
        return real(q_tile, *rest)

    def run():
        qs, ks, vs = (t.clone().requires_grad_(True) for t in (q, k, v))
        out = continuous_attention(qs, ks, vs, times=times, lengths=lengths, q_lengths=q_lengths, sink="learned",
                                   sink_k=sk, sink_v=sv, backend="torch")
        out.backward(torch.cos(torch.arange(out.numel(), dtype=out.dtype)).view_as(out))
        return out, qs.grad, ks.grad, vs.grad

    whole = run()
    monkeypatch.setattr(reference, "TILE_ELEMENTS", 2 * 2 * 8 * 4)  # 4 queries per tile, over 8 key points
    monkeypatch.setattr(backends, "EAGER_KERNELS", (spy, reference.backward_tile))
    tiled = run()
    assert seen == [(2, 2, 4), (2, 2, 4), (2, 2, 4), (2, 2, 1)]
    for a, b in zip(whole, tiled):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("batch,heads,queries,keys", [(7168, 16, 1, 42), (896, 4, 96, 42), (3, 2, 24, 5000),
                                                      (1, 1, 3000, 2), (64, 8, 512, 96)])
def test_tiles_cover_every_query_once_within_the_budget(batch, heads, queries, keys):
    covered = torch.zeros(batch, queries, dtype=torch.int32)
    for b, s in reference.tiles(batch, heads, queries, keys):
        covered[b, s] += 1
        rows, chunk = b.stop - b.start, s.stop - s.start
        assert rows * heads * chunk * (keys + 1) <= max(reference.TILE_ELEMENTS, heads * (keys + 1) * rows)
    assert (covered == 1).all()


def test_compiled_path_matches_the_eager_one():
    q, k, v, times, _, _ = make_inputs(B=2, Tq=5, T=7, seed=12, dtype=torch.float32)
    lengths, q_lengths = torch.tensor([7, 4]), torch.tensor([5, 2])
    leaves = [[t.clone().requires_grad_(True) for t in (q, k, v)] for _ in range(2)]
    outs = []
    for (qq, kk, vv), backend in zip(leaves, ("torch", "auto")):
        out = continuous_attention(qq, kk, vv, times=times, lengths=lengths, q_lengths=q_lengths, backend=backend)
        out.backward(torch.ones_like(out))
        outs.append((out, qq.grad, kk.grad, vv.grad))
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_no_gradient_reaches_the_times():
    q, k, v, times, _, _ = make_inputs(B=1, Tq=2, T=4)
    times = times.clone().requires_grad_(True)
    with pytest.warns(UserWarning, match="no gradient flows to times"):
        continuous_attention(q.requires_grad_(True), k, v, times=times, backend="torch").sum().backward()
    assert times.grad is None and q.grad is not None


@pytest.mark.parametrize("change,match", [
    (dict(causal=True), "causal=True needs one query per key"),
    (dict(k=torch.zeros(2, 2, 6, 3)), r"k must have shape \(B, H, T, D\) = \(3, 2, T, 3\)"),
    (dict(k=torch.zeros(3, 1, 6, 3)), r"k must have shape"),
    (dict(k=torch.zeros(3, 2, 6, 4)), r"k must have shape"),
    (dict(v=torch.zeros(3, 2, 5, 2)), r"v must have shape \(B, H, T, Dv\) = \(3, 2, 6\)"),
    (dict(q_lengths=torch.tensor([4, 5, 1])), r"q_lengths must lie in \[0, Tq=4\]"),
    (dict(q_lengths=torch.tensor([4, -1, 1])), r"q_lengths must lie in \[0, Tq=4\]"),
    (dict(q_lengths=torch.tensor([4, 1])), r"q_lengths must have shape \(B,\) = \(3,\)"),
    (dict(q_lengths=torch.tensor([4.0, 1.0, 1.0])), "q_lengths must be an integer tensor"),
])
def test_clear_errors(change, match):
    q, k, v, times, _, _ = make_inputs(Tq=4, T=6, dtype=torch.float32)
    kw = dict(q=q, k=k, v=v, times=times)
    kw.update(change)
    with pytest.raises(ValueError, match=match):
        continuous_attention(kw.pop("q"), kw.pop("k"), kw.pop("v"), backend="torch", **kw)
