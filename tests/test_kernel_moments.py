"""The kernel's segment moments (kernels/moments.py) against the exact path's, in float64.

The kernels evaluate them with approximate exp/reciprocal on a GPU and, below a cutoff, polynomials of
lower degree than the exact path's Taylor series (lower still, below lower cutoffs, for
half-precision inputs); this checks each variant on u in [-1000, 0] directly, which the end-to-end
half-precision tests cannot: their tolerance is the inputs' rounding.
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


def dense_grid(n: int) -> torch.Tensor:
    """n score gaps u <= 0 in float64: dense on [-1.5, 0] (every series branch and past it), the
    closed-form branch out to -1000 logarithmically, and clusters 1e-6 apart (relative) around each
    branch cutoff, where the two branches meet and the integration by parts cancels most."""
    cutoffs = [moments.FULL_CUTOFF, moments.SHORT_FORWARD_CUTOFF, moments.SHORT_BACKWARD_CUTOFF]
    near = torch.cat([c.value * (1 + 1e-6 * torch.arange(-40, 41, dtype=torch.float64)) for c in cutoffs])
    rest = n - len(near)
    return -torch.cat([torch.linspace(0, 1.5, rest // 2, dtype=torch.float64),
                       torch.logspace(0.18, 3, rest - rest // 2, dtype=torch.float64), near])


# Float32 inputs keep round-off (2e-6); half-precision ones get the issue-48 budget (3e-5: their
# weights are rounded to 4e-3 or 5e-4 before use; the short branches reach 1.1e-5 in the interpreter,
# more on a GPU, whose exp and reciprocal are approximate).
@pytest.mark.parametrize("short,rtol", [(False, 2e-6), (True, 3e-5)])
def test_moments_match_the_exact_path(short, rtol):
    """Relative error of every moment over both branches on a dense grid, and of the derivatives the
    backward forms from them (∂w_hi/∂a_hi ∝ φ3 = φ2 - φ23, ∂w_lo/∂a_lo ∝ ψ3 = χ - φ23) relative to
    their weight, the scale a score gradient's terms have: ψ3 itself is far smaller than χ at large
    |u|, where the difference cancels."""
    u64 = dense_grid(4096).float().double()  # the points float32 can hold: the kernel's input
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
def _weights_kernel(X, Y, OUT, scale, SHORT: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    x, y = tl.load(X + i), tl.load(Y + i)
    _, u, left_high = moments.segment_shape(x[None, :], y[None, :], tl.zeros([N], tl.float32), scale)
    p2, chi = moments.forward_moments(u, SHORT)
    tl.store(OUT + i[None, :], tl.where(left_high, p2, chi))  # the weight on the left endpoint
    tl.store(OUT + N + i[None, :], tl.where(left_high, chi, p2))


@pytest.mark.parametrize("short,rtol", [(False, 2e-6), (True, 3e-5)])
@pytest.mark.parametrize("offset", [0.0, 1e3, -1e3])
def test_weights_from_scores_far_from_zero(short, rtol, offset):
    """Products q·k of about ±1000 with gaps across both branches: the kernel takes the gap from the
    products as float32 holds them (exact for such neighbours) and loses nothing more than the
    moments' own error, against float64 from the same float32 products."""
    scale = 0.125
    gaps = dense_grid(1024) / scale  # product gaps whose scaled |u| covers every branch
    g = torch.Generator().manual_seed(0)
    sign = torch.where(torch.rand(len(gaps), generator=g, dtype=torch.float64) < 0.5, 1.0, -1.0)
    x = (offset + 0.5 * sign * gaps).float()
    y = (offset - 0.5 * sign * gaps).float()
    out = torch.empty(2 * len(gaps), dtype=torch.float32, device=DEVICE)
    _weights_kernel[(1,)](x.to(DEVICE), y.to(DEVICE), out, scale, SHORT=short, N=len(gaps))
    w_l, w_r = out.view(2, -1).cpu().double()
    x64, y64 = x.double(), y.double()
    p2, chi = phi.forward_moments(-(x64 - y64).abs() * scale)
    left_high = x64 >= y64
    for name, got, want in (("left", w_l, torch.where(left_high, p2, chi)),
                            ("right", w_r, torch.where(left_high, chi, p2))):
        err = ((got - want).abs() / want).max().item()
        assert err < rtol, f"{name} weight at offset {offset}: relative error {err:.2e} >= {rtol:.0e}"


@triton.jit
def _series_kernel(U, OUT, SHORT: tl.constexpr, N: tl.constexpr):
    i = tl.arange(0, N)
    u = tl.load(U + i)
    tl.store(OUT + i, moments._phi2_series(u, SHORT))
    tl.store(OUT + N + i, moments._phi3_series(u, SHORT))


@pytest.mark.parametrize("moment,short,degree,cutoff", [
    ("φ2", False, 5, moments.FULL_CUTOFF), ("φ3", False, 5, moments.FULL_CUTOFF),
    ("φ2", True, 2, moments.SHORT_FORWARD_CUTOFF), ("φ3", True, 3, moments.SHORT_BACKWARD_CUTOFF),
])
def test_series_are_the_chebyshev_interpolants(moment, short, degree, cutoff):
    """Where the kernel's coefficients come from: the polynomial of that degree interpolating φ2 (φ3)
    of the exact path at the Chebyshev points of [-cutoff, 0], the interval the series serves."""
    from numpy.polynomial import chebyshev

    cutoff = cutoff.value
    u64 = torch.linspace(-cutoff, 0, N, dtype=torch.float64)
    out = torch.empty(2 * N, dtype=torch.float32, device=DEVICE)
    _series_kernel[(1,)](u64.float().to(DEVICE), out, SHORT=short, N=N)
    got = out.view(2, N).cpu().double()[["φ2", "φ3"].index(moment)]
    exact = {"φ2": lambda u: phi.forward_moments(torch.from_numpy(u))[0].numpy(),
             "φ3": lambda u: phi.all_moments(torch.from_numpy(u))[2].numpy()}[moment]
    want = torch.from_numpy(chebyshev.Chebyshev.interpolate(exact, degree, domain=[-cutoff, 0])(u64.numpy()))
    err = ((got - want).abs() / want).max().item()
    assert err < 4e-7, f"{moment}: kernel polynomial differs from the degree-{degree} interpolant by {err:.1e}"


@pytest.mark.parametrize("short", [False, True])
def test_moments_stay_finite_at_the_extremes(short):
    """u = 0 (equal scores) and |u| far beyond any real score gap: the kernels evaluate both branches
    everywhere and let the selects discard the one that is inf or NaN there; nothing may leak."""
    u64 = -torch.tensor([0.0, 1e-30, 1e-7, 0.25, 0.5, 0.999999, 1.0, 1.000001, 1e4, 1e10, 1e30] * (N // 11)
                        + [0.75] * (N - 11 * (N // 11)), dtype=torch.float64)
    p2, chi, _, p23, _ = phi.all_moments(u64)
    want = [*phi.forward_moments(u64), p2, chi, p23]
    for name, g, w in zip(NAMES, kernel_moments(u64, short), want):
        assert torch.isfinite(g).all(), f"{name}: {g[~torch.isfinite(g)][:3].tolist()} at extreme u"
        torch.testing.assert_close(g, w, rtol=3e-5 if short else 2e-6, atol=1e-30,
                                   msg=lambda m, name=name: f"{name}: {m}")
