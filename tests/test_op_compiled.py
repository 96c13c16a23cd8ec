"""backend="auto" on the CPU runs the tiles under torch.compile: same numbers as the eager path."""

from __future__ import annotations

import pytest
import torch

from ts_continuum import continuous_attention
from ts_continuum.attention import backends


@pytest.mark.slow
def test_compiled_path_matches_eager_forward_and_backward(monkeypatch):
    monkeypatch.setenv(backends.COMPILE_ENV, "1")
    g = torch.Generator().manual_seed(0)
    B, H, T, D = 3, 2, 9, 4
    base = [torch.randn(B, H, T, D, generator=g) for _ in range(3)] + [torch.randn(H, D, generator=g) for _ in range(2)]
    times = torch.cumsum(0.3 + torch.rand(B, T, generator=g), -1)
    lengths = torch.tensor([9, 6, 2])

    def run(backend):
        q, k, v, sk, sv = (t.clone().requires_grad_(True) for t in base)
        out = continuous_attention(
            q, k, v, times=times, lengths=lengths, causal=True, sink="learned", sink_k=sk, sink_v=sv, backend=backend
        )
        out.backward(torch.cos(out))
        return [out] + [t.grad for t in (q, k, v, sk, sv)]

    eager = run("torch")
    compiled = run("auto")
    assert backends._compiled is not None and not backends._compiled.failed, "the compiled path must have run"
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_compile_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(backends.COMPILE_ENV, "0")
    q = torch.randn(1, 1, 4, 2)
    assert backends.select("auto", q, 2, 2).kernels is backends.EAGER_KERNELS
    monkeypatch.setenv(backends.COMPILE_ENV, "1")
    assert backends.select("auto", q, 2, 2).kernels is not backends.EAGER_KERNELS
