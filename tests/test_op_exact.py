"""The exact torch path against the quadrature oracle and the properties of docs §5."""

from __future__ import annotations


import pytest
import torch
from oracle import quadrature_attention

from ts_continuum import continuous_attention
from ts_continuum.attention import backends, reference

SINKS = ["zero", "repeat", "none", "learned"]


def make_inputs(B=2, H=2, T=6, D=3, Dv=None, seed=0, dtype=torch.float64, irregular=True, per_batch_times=True):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, D, generator=g, dtype=dtype)
    k = torch.randn(B, H, T, D, generator=g, dtype=dtype)
    v = torch.randn(B, H, T, Dv or D, generator=g, dtype=dtype)
    times = None
    if irregular:
        gaps = 0.2 + 2.5 * torch.rand(B if per_batch_times else 1, T, generator=g, dtype=torch.float64)
        times = (torch.cumsum(gaps, -1) + 3.0).to(dtype)
        times = times if per_batch_times else times[0]
    sink_k = torch.randn(H, D, generator=g, dtype=dtype)
    sink_v = torch.randn(H, Dv or D, generator=g, dtype=dtype)
    return q, k, v, times, sink_k, sink_v


def sink_kwargs(sink, sink_k, sink_v):
    return dict(sink=sink, sink_k=sink_k, sink_v=sink_v) if sink == "learned" else dict(sink=sink)


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("ragged", [False, True])
@pytest.mark.parametrize("times_kind", ["regular", "shared", "per_batch"])
def test_matches_quadrature_of_the_defining_integral(sink, causal, ragged, times_kind):
    seed = SINKS.index(sink) * 100 + 10 * causal + ragged
    q, k, v, times, sk, sv = make_inputs(
        B=3, T=6, Dv=2, seed=seed, irregular=times_kind != "regular", per_batch_times=times_kind == "per_batch"
    )
    lengths = torch.tensor([6, 4, 1]) if ragged else None
    kw = dict(times=times, causal=causal, lengths=lengths, sink_gap=0.7, scale=0.8, **sink_kwargs(sink, sk, sv))
    got = continuous_attention(q, k, v, backend="torch", **kw)
    want = quadrature_attention(q, k, v, **kw)
    if lengths is not None:
        pad = torch.arange(6)[None, :] >= lengths[:, None]
        assert (got[pad[:, None, :, None].expand_as(got)] == 0).all(), "padded query rows must output 0"
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-8)


def test_regular_times_none_equals_integer_times():
    q, k, v, _, _, _ = make_inputs(T=5)
    t = torch.arange(1.0, 6.0, dtype=torch.float64)
    a = continuous_attention(q, k, v, backend="torch")
    b = continuous_attention(q, k, v, times=t, backend="torch")
    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("sink", ["zero", "repeat", "none"])
@pytest.mark.parametrize("causal", [False, True])
def test_zero_query_gives_trapezoid_time_average(sink, causal):
    _, k, v, times, _, _ = make_inputs(B=2, T=5)
    q = torch.zeros_like(k)
    out = continuous_attention(q, k, v, times=times, causal=causal, sink=sink, backend="torch")
    for b in range(2):
        tau, vv = times[b], v[b]
        if sink != "none":
            v0 = torch.zeros_like(vv[:, :1]) if sink == "zero" else vv[:, :1]
            tau, vv = torch.cat([tau[:1] - 1.0, tau]), torch.cat([v0, vv], dim=1)
        off = 0 if sink == "none" else 1
        for t in range(5):
            end = t + off if causal else 4 + off
            if end == 0:
                want = vv[:, 0]
            else:
                seg = torch.diff(tau[: end + 1])
                mid = 0.5 * (vv[:, :end] + vv[:, 1 : end + 1])
                want = (seg[None, :, None] * mid).sum(1) / seg.sum()
            torch.testing.assert_close(out[b, :, t], want, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_constant_spacing_cancels_without_sink(causal):
    q, k, v, _, _, _ = make_inputs(T=7)
    base = continuous_attention(q, k, v, causal=causal, sink="none", backend="torch")
    for c in (0.25, 3.0, 1e3):
        t = 5.0 + c * torch.arange(7, dtype=torch.float64)
        got = continuous_attention(q, k, v, times=t, causal=causal, sink="none", backend="torch")
        torch.testing.assert_close(got, base, atol=1e-11, rtol=1e-10)


def test_constant_spacing_does_not_cancel_with_a_sink():
    """The sink segment has a fixed length, so rescaling the observations' spacing must matter."""
    q, k, v, _, _, _ = make_inputs(T=7)
    a = continuous_attention(q, k, v, sink="zero", backend="torch")
    b = continuous_attention(q, k, v, times=3.0 * torch.arange(7, dtype=torch.float64), sink="zero", backend="torch")
    assert (a - b).abs().max() > 1e-3


def _point_form_small_score_approximation(q, k, v, times, eps):
    """softmax(a + b) with b_i = log of the Δ weights plus the second-difference term (sink none)."""
    a = eps * torch.einsum("td,sd->ts", q, k) * q.shape[-1] ** -0.5
    d = torch.diff(times)  # Δ_2..Δ_T (segment i joins i-1 and i)
    T = a.shape[-1]
    left = torch.cat([torch.zeros(1, dtype=d.dtype), d])  # Δ_i, absent for the first point
    right = torch.cat([d, torch.zeros(1, dtype=d.dtype)])  # Δ_{i+1}, absent for the last point
    a_prev = torch.cat([a[:, :1], a[:, :-1]], dim=1)
    a_next = torch.cat([a[:, 1:], a[:, -1:]], dim=1)
    w = (left + right) / 2
    b = torch.log(w) + (left * (a_prev - a) + right * (a_next - a)) / (6 * w)
    assert b.shape == (T, T)
    return torch.softmax(a + b, dim=-1) @ v


def test_small_scores_match_second_difference_expansion():
    q, k, v, times, _, _ = make_inputs(B=1, H=1, T=6)
    q, k, v, times = q[0, 0], k[0, 0], v[0, 0], times[0]
    errs = []
    for eps in (1e-2, 1e-3):
        got = continuous_attention(
            (eps * q)[None, None], k[None, None], v[None, None], times=times, sink="none", backend="torch"
        )[0, 0]
        errs.append((got - _point_form_small_score_approximation(q, k, v, times, eps)).abs().max().item())
    assert errs[0] < 1e-3
    assert errs[0] / errs[1] > 50, f"error must fall as eps² (got {errs})"


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_float64(sink, causal):
    q, k, v, times, sk, sv = make_inputs(B=2, H=2, T=5, D=3, Dv=2, seed=7)
    lengths = torch.tensor([5, 3])
    for t in (q, k, v, sk, sv):
        t.requires_grad_(True)

    def f(q, k, v, sk, sv):
        kw = sink_kwargs(sink, sk, sv)
        return continuous_attention(q, k, v, times=times, causal=causal, lengths=lengths, backend="torch", **kw)

    assert torch.autograd.gradcheck(f, (q, k, v, sk, sv), atol=1e-8)


def test_repeat_sink_is_a_learned_sink_holding_the_first_point_and_routes_its_gradient_there():
    """The repeat sink's gradient must reach the first observation: exactly the learned sink's
    gradient (with the sink set to that observation) added to the first point's own."""
    q, k, v, times, _, _ = make_inputs(B=1, T=4, Dv=2)
    w = torch.randn(1, 2, 4, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    k, v = k.requires_grad_(True), v.requires_grad_(True)
    (continuous_attention(q, k, v, times=times, sink="repeat", backend="torch") * w).sum().backward()
    k2, v2 = k.detach().clone().requires_grad_(True), v.detach().clone().requires_grad_(True)
    sk, sv = k2[0, :, 0].detach().clone().requires_grad_(True), v2[0, :, 0].detach().clone().requires_grad_(True)
    out = continuous_attention(q, k2, v2, times=times, sink="learned", sink_k=sk, sink_v=sv, backend="torch")
    (out * w).sum().backward()
    assert sk.grad.abs().sum() > 0 and sv.grad.abs().sum() > 0
    torch.testing.assert_close(k.grad[:, :, 1:], k2.grad[:, :, 1:], atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(k.grad[0, :, 0], k2.grad[0, :, 0] + sk.grad, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(v.grad[0, :, 0], v2.grad[0, :, 0] + sv.grad, atol=1e-12, rtol=1e-12)


def test_lengths_equal_cut_sequences_and_ignore_padding_content():
    q, k, v, times, _, _ = make_inputs(B=3, T=8)
    lengths = torch.tensor([8, 5, 2])
    for causal in (False, True):
        q2, k2, v2 = q.clone(), k.clone(), v.clone()
        for b, L in enumerate(lengths.tolist()):  # garbage (NaN) in the padding must not leak
            q2[b, :, L:], k2[b, :, L:], v2[b, :, L:] = float("nan"), float("nan"), float("nan")
        t2 = times.clone()
        t2[2, 2:] = float("nan")
        out = continuous_attention(q2, k2, v2, times=t2, lengths=lengths, causal=causal, backend="torch")
        for b, L in enumerate(lengths.tolist()):
            cut = continuous_attention(
                q[b : b + 1, :, :L], k[b : b + 1, :, :L], v[b : b + 1, :, :L],
                times=times[b, :L], causal=causal, backend="torch",
            )
            torch.testing.assert_close(out[b : b + 1, :, :L], cut, atol=1e-12, rtol=1e-12)
            assert (out[b, :, L:] == 0).all()


def test_padding_receives_no_gradient():
    q, k, v, times, _, _ = make_inputs(B=2, T=6)
    for t in (q, k, v):
        t.requires_grad_(True)
    continuous_attention(q, k, v, times=times, lengths=torch.tensor([6, 3]), backend="torch").sum().backward()
    for t in (q, k, v):
        assert (t.grad[1, :, 3:] == 0).all() and torch.isfinite(t.grad).all()


@pytest.mark.parametrize("causal", [False, True])
def test_query_chunking_changes_nothing(monkeypatch, causal):
    q, k, v, times, _, _ = make_inputs(B=2, T=11, seed=3)
    lengths = torch.tensor([11, 7])
    seen = []
    real = reference.forward_tile

    def spy(q_tile, *rest):
        seen.append(q_tile.shape[2])
        return real(q_tile, *rest)

    def run():
        qs, ks, vs = (t.clone().requires_grad_(True) for t in (q, k, v))
        out = continuous_attention(qs, ks, vs, times=times, lengths=lengths, causal=causal, backend="torch")
        out.backward(torch.ones_like(out))
        return out, qs.grad, ks.grad, vs.grad

    whole = run()
    monkeypatch.setattr(reference, "TILE_ELEMENTS", 2 * 2 * 12 * 3)  # 3 queries per tile
    monkeypatch.setattr(backends, "EAGER_KERNELS", (spy, reference.backward_tile))
    chunked = run()
    assert seen and max(seen) == 3, "tiles must hold at most the chunk of queries"
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("per_batch", [False, True])
def test_sequence_tiles_change_nothing(monkeypatch, causal, per_batch):
    """Many short sequences are tiled by whole sequences (batch rows), per-batch times and lengths
    sliced with them; shared times and lengths broadcast."""
    q, k, v, times, sink_k, sink_v = make_inputs(B=5, T=11, seed=4, per_batch_times=per_batch)
    lengths = torch.tensor([11, 7, 11, 3, 9]) if per_batch else None
    seen = []
    real = reference.forward_tile

    def spy(q_tile, *rest):
        seen.append(tuple(q_tile.shape[:3]))
        return real(q_tile, *rest)

    def run():
        qs, ks, vs = (t.clone().requires_grad_(True) for t in (q, k, v))
        out = continuous_attention(qs, ks, vs, times=times, lengths=lengths, causal=causal, backend="torch",
                                   sink="learned", sink_k=sink_k, sink_v=sink_v)
        out.backward(torch.cos(torch.arange(out.numel(), dtype=out.dtype)).view_as(out))
        return out, qs.grad, ks.grad, vs.grad

    whole = run()
    monkeypatch.setattr(reference, "TILE_ELEMENTS", 2 * 2 * 11 * 12)  # two whole sequences per tile
    monkeypatch.setattr(backends, "EAGER_KERNELS", (spy, reference.backward_tile))
    tiled = run()
    assert seen == [(2, 2, 11), (2, 2, 11), (1, 2, 11)]
    for a, b in zip(whole, tiled):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("batch,heads,seq", [(7168, 16, 42), (896, 4, 42), (3, 2, 5000), (1, 1, 3), (64, 8, 512)])
def test_tiles_cover_every_score_once_within_the_budget(batch, heads, seq):
    covered = torch.zeros(batch, seq, dtype=torch.int32)
    parts = reference.tiles(batch, heads, seq)
    for b, s in parts:
        covered[b, s] += 1
        rows, queries = b.stop - b.start, s.stop - s.start
        assert rows * heads * queries * seq <= max(reference.TILE_ELEMENTS, heads * seq * rows)
    assert (covered == 1).all()
    if heads * seq * (seq + 1) <= reference.TILE_ELEMENTS:
        assert all(s == slice(0, seq) for _, s in parts), "short sequences are tiled whole"


def test_query_chunk_bounds_tile_size():
    keys = reference.TILE_ELEMENTS // 512 + 1  # a few queries per tile (16385 when tiles held 2^23 scores)
    assert reference.query_chunk(128, keys) * 128 * keys <= reference.TILE_ELEMENTS
    assert reference.query_chunk(10**9, 10**6) == 1


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), (torch.bfloat16, 2e-2)])
def test_half_precision_close_to_float32(dtype, tol):
    q, k, v, times, _, _ = make_inputs(B=2, H=2, T=16, D=8, dtype=torch.float32)
    ref = continuous_attention(q, k, v, times=times, causal=True, backend="torch")
    got = continuous_attention(q.to(dtype), k.to(dtype), v.to(dtype), times=times, causal=True, backend="torch")
    assert got.dtype == dtype
    # the inputs' own rounding bounds what any implementation can reach; compare against that
    rounded = continuous_attention(
        *(t.to(dtype).float() for t in (q, k, v)), times=times, causal=True, backend="torch"
    )
    torch.testing.assert_close(got.float(), rounded, atol=tol, rtol=0)
    torch.testing.assert_close(got.float(), ref, atol=5 * tol, rtol=0)


def test_float32_matches_float64():
    q, k, v, times, _, _ = make_inputs(B=2, H=2, T=20, D=8)
    ref = continuous_attention(q, k, v, times=times, causal=True, backend="torch")
    got = continuous_attention(q.float(), k.float(), v.float(), times=times.float(), causal=True, backend="torch")
    torch.testing.assert_close(got.double(), ref, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_huge_scores_stay_finite_and_select_the_argmax_region(causal):
    """Scores are linear along each segment, so at large magnitudes the integral concentrates at
    the highest-scoring point in each row's range (the zero sink: score 0, value 0)."""
    q, k, v, times, _, _ = make_inputs(B=2, H=1, T=6, D=2, seed=3)
    lengths = torch.tensor([6, 4])
    for dtype in (torch.float32, torch.float64):
        for mag in (1e2, 1e4, 1e6):  # the output nears the argmax point's value as 1/mag
            qs = (q * mag).to(dtype).requires_grad_(True)
            out = continuous_attention(qs, k.to(dtype), v.to(dtype), times=times, causal=causal, lengths=lengths,
                                       backend="torch")
            out.sum().backward()
            assert torch.isfinite(out).all() and torch.isfinite(qs.grad).all()
        scores = (q @ k.transpose(-1, -2))[:, 0] * q.shape[-1] ** -0.5
        checked = 0
        for b in range(2):
            for t in range(int(lengths[b])):
                s = torch.cat([torch.zeros(1, dtype=scores.dtype), scores[b, t, : (t + 1 if causal else lengths[b])]])
                top2 = s.topk(min(2, len(s))).values
                if len(top2) > 1 and mag * (top2[0] - top2[1]) < 50:
                    continue  # a near tie: the mass splits between two points
                best = int(s.argmax())
                want = torch.zeros_like(v[b, 0, 0]) if best == 0 else v[b, 0, best - 1]
                torch.testing.assert_close(out[b, 0, t].double(), want, atol=1e-3, rtol=0)
                checked += 1
        assert checked >= 6, checked


@pytest.mark.parametrize("sink", ["repeat", "none", "learned"])
@pytest.mark.parametrize("causal", [False, True])
def test_constant_values_come_out_unchanged_at_any_magnitude(sink, causal):
    """Attention is an average: if every value (the sink's included) is c, every valid row is c,
    whatever the scores. A normaliser that counted the wrong segments would break this."""
    q, k, _, times, sk, _ = make_inputs(B=3, T=7, seed=11)
    c = -1.75
    v, sv = torch.full((3, 2, 7, 2), c, dtype=torch.float64), torch.full((2, 2), c, dtype=torch.float64)
    lengths = torch.tensor([7, 4, 1])
    valid = torch.arange(7)[None, :] < lengths[:, None]
    for mag in (1.0, 1e2, 1e4):
        out = continuous_attention(q * mag, k, v, times=times, causal=causal, lengths=lengths, backend="torch",
                                   **sink_kwargs(sink, sk, sv))
        rows = out.permute(0, 2, 1, 3)[valid]
        torch.testing.assert_close(rows, torch.full_like(rows, c), atol=1e-9, rtol=0)
