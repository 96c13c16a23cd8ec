"""Fused Triton kernels for continuous attention, installed as ``ts_continuum.kernels``."""
