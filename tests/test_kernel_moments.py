"""The kernel's segment moments (kernels/moments.py) against the exact path's, in float64.

The kernels evaluate them with approximate exp/reciprocal on a GPU and, for half-precision
inputs, a 7-term Taylor series instead of 10; this checks each variant on u in [-60, 0] directly,
which the end-to-end half-precision tests cannot: their tolerance is the inputs' rounding.
"""

from __future__ import annotations

import os

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from ts_continuum.attention import phi  # noqa: E402
from ts_continuum.kernels import moments  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
N = 256
NAMES = ["φ2", "χ", "φ2 (all)", "χ (all)", "φ3", "φ23", "ψ3"]


@triton.jit
def _moments_kernel(U, OUT, SHORT: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    u = tl.load(U + i)
    p2, chi = moments.forward_moments(u, SHORT)
    a2, achi, a3, a23, apsi = moments.all_moments(u, SHORT)
    tl.store(OUT + 0 * N + i, p2)
    tl.store(OUT + 1 * N + i, chi)
    tl.store(OUT + 2 * N + i, a2)
    tl.store(OUT + 3 * N + i, achi)
    tl.store(OUT + 4 * N + i, a3)
    tl.store(OUT + 5 * N + i, a23)
    tl.store(OUT + 6 * N + i, apsi)


@pytest.mark.parametrize("short,rtol", [(False, 2e-6), (True, 3e-5)])
def test_moments_match_the_exact_path(short, rtol):
    """Relative error of every moment over both branches (|u| < 1 series, closed forms beyond)."""
    u64 = -torch.cat([torch.linspace(0, 1.5, N // 2, dtype=torch.float64),
                      torch.logspace(0.2, 1.78, N // 2, dtype=torch.float64)])
    want = [*phi.forward_moments(u64), *phi.all_moments(u64)]
    out = torch.empty(7 * N, dtype=torch.float32, device=DEVICE)
    _moments_kernel[(1,)](u64.float().to(DEVICE), out, SHORT=short, N=N)
    got = out.view(7, N).cpu().double()
    for name, g, w in zip(NAMES, got, want):
        err = ((g - w).abs() / w.abs()).max().item()
        assert err < rtol, f"{name}: max relative error {err:.2e} >= {rtol:.0e} (short series: {short})"
