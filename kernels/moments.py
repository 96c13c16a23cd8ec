"""The segment moments of ts_continuum/attention/phi.py as Triton functions (float32, u <= 0).

Same branches and recurrences as the PyTorch path: below a cutoff (|u| < 1; shorter for half-precision
inputs, below) the highest moment is a polynomial (Horner; a Chebyshev interpolant of lower degree
than the exact path's Taylor series, same accuracy) and the lower ones follow by
φ_k = 1/k! + u φ_{k+1}; above, integration by parts from φ1 = (e^u - 1) / u upwards, which does not
cancel much there. Both branches are evaluated and selected,
as the tile is processed as a whole. On a GPU, exp and 1/u are the hardware's approximate
instructions (``exp`` and ``reciprocal`` below; ``tl.exp`` was one too), so
results agree with the exact path to float32 test tolerance, not bit for bit.
"""

import os

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
# The Triton interpreter cannot run PTX; it takes the plain division (same value to 1 ulp).
FAST_ASM = tl.constexpr(os.environ.get("TRITON_INTERPRET") != "1")


@triton.jit
def exp(x):
    """e^x as exp2: one MUFU.EX2 (ex2.approx.ftz) after the multiply by log2(e). ``tl.exp`` does
    the same multiply but compiles to ex2.approx without ftz, whose denormal fix-up makes it 5
    instructions on sm_90 (benchmarks/speed/sass_report.py); this kernel is bound by instruction issue,
    and results below 2^-126 flushed to 0 change nothing."""
    return tl.exp2(x * LOG2E)


@triton.jit
def reciprocal(x):
    """1/x as one MUFU.RCP (rcp.approx.ftz, 1 ulp); ``1.0 / x`` compiles to div.full, 9 instructions
    with its range fix-ups. Used for u <= -0.25, far from where approximation or ftz would matter."""
    if FAST_ASM:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                      is_pure=True, pack=1)
    else:
        r = 1.0 / x
    return r


# Series branch: not the Taylor series of the exact path but the polynomial that interpolates φ2
# (φ3) at the Chebyshev points of [-cutoff, 0], which spreads its error over the interval instead of
# piling it up at its end. Float32 inputs: cutoff 1, degree 5, float32 round-off (largest relative
# error over the moments 1e-6, as the exact path's 10-term Taylor series).
# Half-precision inputs (SHORT): the weights are rounded to bf16/fp16 (relative 4e-3/5e-4) before
# their products, so the moments need about 1e-5, not round-off: φ2 of degree 2 below |u| = 0.25
# (forward), φ3 of degree 3 below |u| = 0.5 (backward), integration by parts beyond, whose
# cancellation near the cutoffs sets the largest errors (1.1e-5, χ at u = -0.25 and φ23 at -0.5).
# 2 and 1 fused multiply-adds per score element fewer than degree 4 below 1 (benchmarks/speed/sass_report.py).
# tests/test_kernel_moments.py recomputes the coefficients and checks every moment's error.
FULL_CUTOFF = tl.constexpr(1.0)
SHORT_FORWARD_CUTOFF = tl.constexpr(0.25)
SHORT_BACKWARD_CUTOFF = tl.constexpr(0.5)


@triton.jit
def _phi2_series(u, SHORT: tl.constexpr):
    if SHORT:  # on [-0.25, 0]
        acc = u * 0.03868298072204136 + 0.16639065248873966
        acc = acc * u + 0.4999961754014165
    else:
        acc = u * 0.00013742419083939694 + 0.0013248179642057305
        acc = acc * u + 0.008301170445720114
        acc = acc * u + 0.04165925535928379
        acc = acc * u + 0.16666603660679408
        acc = acc * u + 0.4999999912630968
    return acc


@triton.jit
def _phi3_series(u, SHORT: tl.constexpr):
    if SHORT:  # on [-0.5, 0]
        acc = u * 0.002412932393482947 + 0.016555650718877768
        acc = acc * u + 0.08332234918756831
        acc = acc * u + 0.33333316204519114
    else:
        acc = u * 3.57863538008966e-05 + 0.0003822074431099053
        acc = acc * u + 0.0027704148726246385
        acc = acc * u + 0.016664967010782204
        acc = acc * u + 0.08333318871534894
        acc = acc * u + 0.33333333132761067
    return acc


@triton.jit
def _by_parts(u):
    """(e^u, 1/u, φ2, χ) beyond the series' cutoff by integration by parts (phi._by_parts).

    Unlike the torch path, no guard moves u inside the cutoff out first: there the values (inf or NaN at
    u = 0) are discarded by the branch selects, which pass the other branch's value through
    unchanged. One select per score element fewer in each kernel."""
    e = exp(u)
    inv = reciprocal(u)
    p1 = e * inv - inv  # one FFMA
    chi = (e - p1) * inv
    return e, inv, p1 - chi, chi


@triton.jit
def forward_moments(u, SHORT: tl.constexpr):
    """(φ2, χ): the weights a segment puts on its high and its low endpoint, over Δ e^high."""
    small = u > -(SHORT_FORWARD_CUTOFF if SHORT else FULL_CUTOFF)
    # the series beyond the cutoff (possibly inf or NaN) is discarded by the selects, like _by_parts above
    p2_s = _phi2_series(u, SHORT)
    chi_s = 1.0 + u * p2_s - p2_s
    _, _, p2_l, chi_l = _by_parts(u)
    return tl.where(small, p2_s, p2_l), tl.where(small, chi_s, chi_l)


@triton.jit
def backward_moments(u, SHORT: tl.constexpr):
    """(φ2, χ, φ23): the forward weights and the cross term of their score derivatives.

    The backward needs no more: with h = Δ e^hi φ23 (the derivative of either endpoint's weight by
    the other endpoint's score), each weight's derivative by its own endpoint's score is the weight
    minus h (φ3 = φ2 - φ23 and ψ3 = χ - φ23, phi.all_moments), so φ3 and ψ3 are never formed."""
    small = u > -(SHORT_BACKWARD_CUTOFF if SHORT else FULL_CUTOFF)
    p3_s = _phi3_series(u, SHORT)  # discarded beyond the cutoff, as in forward_moments
    p2_s = 0.5 + 0.5 * u * p3_s
    chi_s = 1.0 + u * p2_s - p2_s
    e, inv, p2_l, chi_l = _by_parts(u)
    # φ23 = χ - ψ3 with ψ3 = (e^u - 2χ) / u: two FFMAs
    p23_l = tl.fma(tl.fma(chi_l, 2.0, -e), inv, chi_l)
    return tl.where(small, p2_s, p2_l), tl.where(small, chi_s, chi_l), tl.where(small, p2_s - p3_s, p23_l)


@triton.jit
def segment_shape(x, y, log2_len, scale):
    """For the unscaled products x = q·k_{j-1}, y = q·k_j of segment j (scores a = scale · x, b =
    scale · y): (top, u, x >= y) with top = log2 Δ_j + max(a, b) · log2(e), u = -|a - b|.

    Why base 2 and unscaled: top is one FFMA on the products, and each weight's exponential
    2^(top - m) is one subtraction and one MUFU.EX2, 3 instructions per score element fewer than
    scaling both products and computing e^x as 2^(x · log2 e) (benchmarks/speed/sass_report.py). The
    running maximum and the saved LSE are therefore in log2 units. Folding log Δ into the maximum
    keeps every weight Δ e^{max - m} φ in (0, 1] whatever the segment lengths, so half-precision
    casts of the weights cannot overflow. ``log2_len`` comes broadcastable to the tile: a row
    (segments along columns) or a column (segments along rows, the dK/dV pass's key-major tiles).
    """
    d = x - y
    return tl.fma(tl.maximum(x, y), scale * LOG2E, log2_len), tl.abs(d) * -scale, d >= 0.0
