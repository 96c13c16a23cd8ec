"""The segment moments of ts_continuum/attention/phi.py as Triton functions (float32, u <= 0).

Same branches and recurrences as the PyTorch path, so the kernel and the exact path round alike:
below |u| < 1 the highest moment is a 10-term Taylor series (Horner) and the lower ones follow by
φ_k = 1/k! + u φ_{k+1}; above, integration by parts from φ1 = (e^u - 1) / u upwards, which does
not cancel there. Both branches are evaluated and selected, as the tile is processed as a whole.
On a GPU, exp and 1/u are the
hardware's approximate instructions (``exp`` and ``reciprocal`` below; ``tl.exp`` was one too), so
results agree with the exact path to float32 test tolerance, not bit for bit.
"""

import os

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)
# The Triton interpreter cannot run PTX; it takes the plain division (same value to 1 ulp).
FAST_RECIPROCAL = tl.constexpr(os.environ.get("TRITON_INTERPRET") != "1")


@triton.jit
def exp(x):
    """e^x as exp2: one MUFU.EX2 (ex2.approx.ftz) after the multiply by log2(e). ``tl.exp`` does
    the same multiply but compiles to ex2.approx without ftz, whose denormal fix-up makes it 5
    instructions on sm_90 (benchmarks/sass_report.py); this kernel is bound by instruction issue,
    and results below 2^-126 flushed to 0 change nothing."""
    return tl.exp2(x * LOG2E)


@triton.jit
def reciprocal(x):
    """1/x as one MUFU.RCP (rcp.approx.ftz, 1 ulp); ``1.0 / x`` compiles to div.full, 9 instructions
    with its range fix-ups. Used for u <= -1, far from where approximation or ftz would matter."""
    if FAST_RECIPROCAL:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                      is_pure=True, pack=1)
    else:
        r = 1.0 / x
    return r


# Taylor branch: 10 terms for float32 inputs; 7 for half-precision inputs (SHORT), whose truncation
# (at most 2e-5 relative, χ at u = -1; tests/test_kernel_moments.py) is far under their rounding
# (fp16: 5e-4) and saves 3 of ~50 instructions per score element (benchmarks/sass_report.py).
@triton.jit
def _phi2_taylor(u, SHORT: tl.constexpr):
    # Σ_{n<10 (7)} u^n / (n+2)!
    if SHORT:
        acc = u * 2.48015873015873e-05 + 0.0001984126984126984
    else:
        acc = u * 2.505210838544172e-08 + 2.755731922398589e-07
        acc = acc * u + 2.7557319223985893e-06
        acc = acc * u + 2.48015873015873e-05
        acc = acc * u + 0.0001984126984126984
    acc = acc * u + 0.001388888888888889
    acc = acc * u + 0.008333333333333333
    acc = acc * u + 0.041666666666666664
    acc = acc * u + 0.16666666666666666
    return acc * u + 0.5


@triton.jit
def _phi3_taylor(u, SHORT: tl.constexpr):
    # Σ_{n<10 (7)} 2 u^n / (n+3)!
    if SHORT:
        acc = u * 5.5114638447971785e-06 + 4.96031746031746e-05
    else:
        acc = u * 4.17535139757362e-09 + 5.010421677088344e-08
        acc = acc * u + 5.511463844797178e-07
        acc = acc * u + 5.5114638447971785e-06
        acc = acc * u + 4.96031746031746e-05
    acc = acc * u + 0.0003968253968253968
    acc = acc * u + 0.002777777777777778
    acc = acc * u + 0.016666666666666666
    acc = acc * u + 0.08333333333333333
    return acc * u + 0.3333333333333333


@triton.jit
def _by_parts(u):
    """(e^u, 1/u, φ2, χ) at u <= -1 by integration by parts (phi._by_parts); u > -1 reads as -1."""
    ul = tl.where(u > -1.0, -1.0, u)
    e = exp(ul)
    inv = reciprocal(ul)
    p1 = e * inv - inv  # one FFMA
    chi = (e - p1) * inv
    return e, inv, p1 - chi, chi


@triton.jit
def forward_moments(u, SHORT: tl.constexpr):
    """(φ2, χ): the weights a segment puts on its high and its low endpoint, over Δ e^high."""
    small = u > -1.0
    us = tl.where(small, u, 0.0)
    p2_s = _phi2_taylor(us, SHORT)
    chi_s = 1.0 + us * p2_s - p2_s
    _, _, p2_l, chi_l = _by_parts(u)
    return tl.where(small, p2_s, p2_l), tl.where(small, chi_s, chi_l)


@triton.jit
def all_moments(u, SHORT: tl.constexpr):
    """(φ2, χ, φ3, φ23, ψ3): forward weights and their score derivatives (phi.all_moments)."""
    small = u > -1.0
    us = tl.where(small, u, 0.0)
    p3_s = _phi3_taylor(us, SHORT)
    p2_s = 0.5 + 0.5 * us * p3_s
    chi_s = 1.0 + us * p2_s - p2_s
    psi_s = chi_s - (p2_s - p3_s)

    e, inv, p2_l, chi_l = _by_parts(u)
    psi_l = (e - 2.0 * chi_l) * inv
    # the branches meet in (φ2, χ, ψ3): three selects instead of five (phi.all_moments)
    p2 = tl.where(small, p2_s, p2_l)
    chi = tl.where(small, chi_s, chi_l)
    psi = tl.where(small, psi_s, psi_l)
    p23 = chi - psi
    return p2, chi, p2 - p23, p23, psi


@triton.jit
def segment_shape(x, y, log2_len, scale):
    """For the unscaled products x = q·k_{j-1}, y = q·k_j of segment j (scores a = scale · x, b =
    scale · y): (top, u, x >= y) with top = log2 Δ_j + max(a, b) · log2(e), u = -|a - b|.

    Why base 2 and unscaled: top is one FFMA on the products, and each weight's exponential
    2^(top - m) is one subtraction and one MUFU.EX2, 3 instructions per score element fewer than
    scaling both products and computing e^x as 2^(x · log2 e) (benchmarks/sass_report.py). The
    running maximum and the saved LSE are therefore in log2 units. Folding log Δ into the maximum
    keeps every weight Δ e^{max - m} φ in (0, 1] whatever the segment lengths, so half-precision
    casts of the weights cannot overflow.
    """
    d = x - y
    return tl.fma(tl.maximum(x, y), scale * LOG2E, log2_len[None, :]), tl.abs(d) * -scale, d >= 0.0
