"""The segment integrals of continuous attention, evaluated stably on u <= 0.

A segment joins two points whose scores are ``hi >= lo``; with ``u = lo - hi <= 0`` and the
segment parametrised from the ``hi`` end (s = 0) to the ``lo`` end (s = 1), every quantity the
forward and backward passes need is ``Δ e^hi`` times one of the moments

    φ1(u) = ∫ e^{su},  φ2(u) = ∫ (1-s) e^{su},  χ(u) = ∫ s e^{su},
    φ3(u) = ∫ (1-s)² e^{su},  φ23(u) = ∫ s(1-s) e^{su},  ψ3(u) = ∫ s² e^{su}

(integrals over s in [0, 1]). On u <= 0 all of them lie in (0, 1], so nothing overflows whatever the
score magnitude. Their closed forms cancel catastrophically near 0, so inside |u| < TAYLOR_CUTOFF we
sum the Taylor series of the highest-order moment and reach the lower ones by the stable recurrence
φ_k = 1/k! + u φ_{k+1}. Outside, integration by parts climbs the other way:

    φ1 = (e^u - 1) / u,  χ = (e^u - φ1) / u,  ψ3 = (e^u - 2χ) / u,

and φ2 = φ1 - χ, φ23 = χ - ψ3, φ3 = φ2 - φ23. Why this form rather than the expanded closed forms
(χ = (e^u (u - 1) + 1) / u², ...): in float32 on u <= -1 it is more accurate (largest
relative error over the five moments 1.5e-6 against 2.3e-6) and it takes half the operations, which is
what the kernels' time goes to (kernels/moments.py evaluates the same recurrences).
"""

from __future__ import annotations

import math

import torch

TAYLOR_CUTOFF = 1.0


def _taylor_terms(dtype: torch.dtype) -> int:
    """Terms that bring the truncation error below the dtype's round-off at |u| = 1."""
    return 18 if dtype == torch.float64 else 10


def _horner(u: torch.Tensor, coefficients: list[float]) -> torch.Tensor:
    acc = torch.full_like(u, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc.mul_(u).add_(c)  # in place: one tile-sized buffer for the whole series, not two per term
    return acc


def _phi2_taylor(u: torch.Tensor) -> torch.Tensor:
    n = _taylor_terms(u.dtype)
    return _horner(u, [1.0 / math.factorial(k + 2) for k in range(n)])


def _phi3_taylor(u: torch.Tensor) -> torch.Tensor:
    n = _taylor_terms(u.dtype)
    return _horner(u, [2.0 / math.factorial(k + 3) for k in range(n)])


def _by_parts(u: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(e^u, 1/u, φ2, χ) at u <= -1: φ1 = (e^u - 1) / u, χ = (e^u - φ1) / u, φ2 = φ1 - χ. The values
    at u > -1 are replaced by those at -1, so they stay finite where the series branch is taken."""
    ul = u.clamp(max=-TAYLOR_CUTOFF)
    e = torch.exp(ul)
    inv = ul.reciprocal_()
    p1 = (e - 1.0).mul_(inv)
    chi = (e - p1).mul_(inv)
    return e, inv, p1.sub_(chi), chi


def forward_moments(u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(φ2, χ) at u <= 0: the weights a segment puts on its high and its low endpoint."""
    small = u > -TAYLOR_CUTOFF
    # Taylor branch: φ2 by series, φ1 = 1 + u φ2, χ = φ1 - φ2 (no cancellation for |u| < 1). At
    # u <= -1 it is evaluated at -1, finite, and not selected.
    us = u.clamp(min=-TAYLOR_CUTOFF)
    p2_s = _phi2_taylor(us)
    chi_s = (us * p2_s).add_(1.0).sub_(p2_s)
    _, _, p2_l, chi_l = _by_parts(u)
    return torch.where(small, p2_s, p2_l), torch.where(small, chi_s, chi_l)


def all_moments(u: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(φ2, χ, φ3, φ23, ψ3) at u <= 0: forward weights and their score derivatives."""
    small = u > -TAYLOR_CUTOFF
    us = u.clamp(min=-TAYLOR_CUTOFF)
    p3_s = _phi3_taylor(us)
    p2_s = (us * p3_s).mul_(0.5).add_(0.5)
    chi_s = (us * p2_s).add_(1.0).sub_(p2_s)  # φ1 - φ2, φ1 = 1 + u φ2
    psi_s = (chi_s - p2_s).add_(p3_s)  # χ - (φ2 - φ3)

    e, inv, p2_l, chi_l = _by_parts(u)
    psi_l = e.sub_(chi_l, alpha=2.0).mul_(inv)  # (e^u - 2χ) / u

    # The branches meet in (φ2, χ, ψ3); φ23 and φ3 follow as on the closed branch (round-off of a
    # few ulps at O(1) values on the series branch). Three selects instead of five: the kernels
    # evaluate this per score element (kernels/moments.py).
    p2 = torch.where(small, p2_s, p2_l)
    chi = torch.where(small, chi_s, chi_l)
    psi = torch.where(small, psi_s, psi_l)
    p23 = chi - psi
    return p2, chi, p2 - p23, p23, psi
