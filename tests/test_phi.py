"""The segment moments of the exact path (attention/phi.py) against their defining integrals.

The end-to-end quadrature tests (test_op_exact.py) see the moments only through whole attention
outputs at moderate scores; this checks each moment on its own, on both branches and across the
switch at |u| = 1, against ∫ s^a (1-s)^b e^{su} ds evaluated by mpmath at 30 digits.
"""

from __future__ import annotations

import pytest
import torch

from ts_continuum.attention import phi

mpmath = pytest.importorskip("mpmath")

U = [0.0, -1e-6, -1e-3, -0.3, -0.999, -1.0, -1.001, -1.5, -3.0, -10.0, -60.0]
# (power of s, power of 1 - s) of each moment, in the order all_moments returns them
WEIGHTS = {"φ2": (0, 1), "χ": (1, 0), "φ3": (0, 2), "φ23": (1, 1), "ψ3": (2, 0)}


def defining_integral(u: float, a: int, b: int) -> float:
    with mpmath.workdps(30):
        return float(mpmath.quad(lambda s: s**a * (1 - s) ** b * mpmath.exp(s * u), [0, 0.01, 0.1, 1]))


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-13), (torch.float32, 2e-6)])
def test_every_moment_matches_its_defining_integral(dtype, rtol):
    u = torch.tensor(U, dtype=dtype)
    got = dict(zip(WEIGHTS, phi.all_moments(u)))
    got_forward = dict(zip(["φ2", "χ"], phi.forward_moments(u)))
    for name, (a, b) in WEIGHTS.items():
        want = torch.tensor([defining_integral(x, a, b) for x in U], dtype=torch.float64)
        candidates = [(name, got[name])] + ([(f"{name} (forward)", got_forward[name])] if name in got_forward else [])
        for label, value in candidates:
            err = ((value.double() - want).abs() / want).max().item()
            assert err < rtol, f"{label} in {dtype}: largest relative error {err:.1e} >= {rtol:.0e}"
