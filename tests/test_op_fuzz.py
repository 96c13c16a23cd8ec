"""Property-based fuzzing of the exact path: shapes, irregular times, extreme score magnitudes."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ts_continuum import continuous_attention


@st.composite
def cases(draw):
    B, H, T, D = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 10)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    log_gaps = draw(st.lists(st.floats(-3, 3), min_size=T, max_size=T))
    return dict(
        shape=(B, H, T, D),
        seed=seed,
        gaps=[10.0**x for x in log_gaps],
        magnitude=10.0 ** draw(st.floats(-3, 4)),
        sink=draw(st.sampled_from(["zero", "repeat", "none", "learned"])),
        causal=draw(st.booleans()),
        lengths=draw(st.lists(st.integers(1, T), min_size=B, max_size=B)),
        sink_gap=10.0 ** draw(st.floats(-2, 2)),
    )


def leaves_of(c, dtype):
    g = torch.Generator().manual_seed(c["seed"])
    B, H, T, D = c["shape"]
    q, k, v = (torch.randn(B, H, T, D, generator=g, dtype=torch.float64) for _ in range(3))
    q = q * c["magnitude"]
    sk, sv = torch.randn(H, D, generator=g, dtype=torch.float64), torch.randn(H, D, generator=g, dtype=torch.float64)
    return [t.to(dtype).requires_grad_(True) for t in (q, k, v, sk, sv)]


def run(c, dtype):
    leaves = leaves_of(c, dtype)
    times = torch.cumsum(torch.tensor(c["gaps"], dtype=torch.float64), 0)
    kw = dict(sink=c["sink"], causal=c["causal"], lengths=torch.tensor(c["lengths"]), sink_gap=c["sink_gap"])
    if c["sink"] == "learned":
        kw.update(sink_k=leaves[3], sink_v=leaves[4])
    out = continuous_attention(*leaves[:3], times=times.to(dtype), backend="torch", **kw)
    out.backward(torch.ones_like(out))
    grads = [t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves]
    return out, grads


@settings(max_examples=80, deadline=None)
@given(cases())
def test_finite_outputs_and_gradients_for_any_magnitude(c):
    out, grads = run(c, torch.float32)
    assert torch.isfinite(out).all()
    for g in grads:
        assert torch.isfinite(g).all()
    # every output is a convex combination of the values (sink value included): never outside their range
    _, _, v, _, sv = leaves_of(c, torch.float64)
    bound = max(v.abs().max().item(), sv.abs().max().item())
    assert out.abs().max().item() <= bound * (1 + 1e-5)


@settings(max_examples=40, deadline=None)
@given(cases())
def test_float32_agrees_with_float64(c):
    c = dict(c, magnitude=min(c["magnitude"], 10.0))
    out32, _ = run(c, torch.float32)
    out64, _ = run(c, torch.float64)
    torch.testing.assert_close(out32.double(), out64, atol=1e-4, rtol=1e-4)
