"""The kernel's segment moments (kernels/moments.py) against the exact path's, in float64.

The kernels evaluate them with approximate exp/reciprocal on a GPU and, below |u| < 1, polynomials of
lower degree than the exact path's Taylor series (lower still for half-precision inputs); this
checks each variant on u in [-60, 0] directly, which the end-to-end half-precision tests cannot:
their tolerance is the inputs' rounding.
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
NAMES = ["φ2", "χ", "φ2 (bwd)", "χ (bwd)", "φ23"]


@triton.jit
def _moments_kernel(U, OUT, SHORT: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    u = tl.load(U + i)
    p2, chi = moments.forward_moments(u, SHORT)
    b2, bchi, b23 = moments.backward_moments(u, SHORT)
    tl.store(OUT + 0 * N + i, p2)
    tl.store(OUT + 1 * N + i, chi)
    tl.store(OUT + 2 * N + i, b2)
    tl.store(OUT + 3 * N + i, bchi)
    tl.store(OUT + 4 * N + i, b23)


def kernel_moments(u64: torch.Tensor, short: bool) -> list[torch.Tensor]:
    """The kernel's moments at u64 (rounded to float32), in float64, in NAMES' order."""
    out = torch.empty(5 * len(u64), dtype=torch.float32, device=DEVICE)
    _moments_kernel[(1,)](u64.float().to(DEVICE), out, SHORT=short, N=len(u64))
    return list(out.view(5, -1).cpu().double())


# The 7-term Taylor series the short polynomial replaced reached 1.9e-5: this bound catches it.
@pytest.mark.parametrize("short,rtol", [(False, 2e-6), (True, 6e-6)])
def test_moments_match_the_exact_path(short, rtol):
    """Relative error of every moment over both branches (|u| < 1 series, closed forms beyond), and
    of the derivatives the backward forms from them (∂w_hi/∂a_hi ∝ φ3 = φ2 - φ23, ∂w_lo/∂a_lo ∝ ψ3 =
    χ - φ23) relative to their weight, the scale a score gradient's terms have: ψ3 itself is far
    smaller than χ at large |u|, where the difference cancels."""
    u64 = -torch.cat([torch.linspace(0, 1.5, N // 2, dtype=torch.float64),
                      torch.logspace(0.2, 1.78, N // 2, dtype=torch.float64)])
    p2, chi, p3, p23, psi = phi.all_moments(u64)
    want = [*phi.forward_moments(u64), p2, chi, p23]
    got = kernel_moments(u64, short)
    for name, g, w in zip(NAMES, got, want):
        err = ((g - w).abs() / w.abs()).max().item()
        assert err < rtol, f"{name}: max relative error {err:.2e} >= {rtol:.0e} (short series: {short})"
    _, _, g2, gchi, g23 = got
    for name, g, w, weight in (("φ3", g2 - g23, p3, p2), ("ψ3", gchi - g23, psi, chi)):
        err = ((g - w).abs() / weight).max().item()
        assert err < rtol, f"{name} = weight - φ23: error {err:.2e} of the weight >= {rtol:.0e} (short: {short})"


@triton.jit
def _series_kernel(U, OUT, SHORT: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    u = tl.load(U + i)
    tl.store(OUT + i, moments._phi2_series(u, SHORT))
    tl.store(OUT + N + i, moments._phi3_series(u, SHORT))


@pytest.mark.parametrize("short,degree", [(False, 5), (True, 4)])
def test_series_are_the_chebyshev_interpolants(short, degree):
    """Where the kernel's coefficients come from: the polynomial of that degree interpolating φ2 (φ3)
    of the exact path at the Chebyshev points of [-1, 0]."""
    from numpy.polynomial import chebyshev

    u64 = torch.linspace(-1, 0, N, dtype=torch.float64)
    out = torch.empty(2 * N, dtype=torch.float32, device=DEVICE)
    _series_kernel[(1,)](u64.float().to(DEVICE), out, SHORT=short, N=N)
    got = out.view(2, N).cpu().double()
    moment = [lambda u: phi.forward_moments(torch.from_numpy(u))[0].numpy(),
              lambda u: phi.all_moments(torch.from_numpy(u))[2].numpy()]
    for name, g, f in zip(["φ2", "φ3"], got, moment):
        want = torch.from_numpy(chebyshev.Chebyshev.interpolate(f, degree, domain=[-1, 0])(u64.numpy()))
        err = ((g - want).abs() / want).max().item()
        assert err < 4e-7, f"{name}: kernel polynomial differs from the degree-{degree} interpolant by {err:.1e}"


def test_moments_stay_finite_at_the_extremes():
    """u = 0 (equal scores) and |u| far beyond any real score gap: the kernels evaluate both branches
    everywhere and let the selects discard the one that is inf or NaN there; nothing may leak."""
    u64 = -torch.tensor([0.0, 1e-30, 1e-7, 0.999999, 1.0, 1.000001, 1e4, 1e10, 1e30] * (N // 9)
                        + [0.5] * (N - 9 * (N // 9)), dtype=torch.float64)
    p2, chi, _, p23, _ = phi.all_moments(u64)
    want = [*phi.forward_moments(u64), p2, chi, p23]
    for name, g, w in zip(NAMES, kernel_moments(u64, False), want):
        assert torch.isfinite(g).all(), f"{name}: {g[~torch.isfinite(g)][:3].tolist()} at extreme u"
        torch.testing.assert_close(g, w, rtol=2e-6, atol=1e-30, msg=lambda m, name=name: f"{name}: {m}")
