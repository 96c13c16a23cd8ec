"""Fused Triton kernels for continuous attention, installed as ``ts_continuum.kernels``.

The op is ts_continuum/attention/reference.py (the readable exact path) plus these kernels and one
autograd wrapper: ``moments`` (the segment integrals, as in attention/phi.py), ``continuous_fwd``
(forward), ``continuous_bwd`` (preprocess, dK/dV and dQ passes), ``tuning`` (block sizes) and
``autograd`` (the ``backend="triton"`` entry point).
"""
