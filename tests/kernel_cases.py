"""Inputs and comparisons shared by the kernel tests (tests/test_kernel_*.py): the fused Triton
kernel against the exact torch path, outputs and every gradient."""

from __future__ import annotations

import os

import pytest
import torch

from ts_continuum import continuous_attention

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cuda" if torch.cuda.is_available() and not INTERPRET else "cpu"
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA with compiled Triton (gpu_check.sh)")
SINKS = ["zero", "repeat", "none", "learned"]


def make_case(B=2, H=2, T=37, D=16, times="per_batch", lengths=None, seed=0, Tq=None, q_lengths=None):
    """Inputs in float32 on DEVICE: q, k, v, learned sink k/v, an output gradient and op kwargs.

    ``T`` keys (with their ``times`` and ``lengths``); ``Tq`` queries (default T: self-attention)
    with ``q_lengths`` valid rows."""
    g = torch.Generator().manual_seed(seed)
    rows = T if Tq is None else Tq
    q, k, v, do = (torch.randn(B, H, n, D, generator=g) for n in (rows, T, T, rows))
    sink_k, sink_v = torch.randn(H, D, generator=g), torch.randn(H, D, generator=g)
    kw = {}
    if times != "regular":
        gaps = 0.2 + 2.5 * torch.rand(B if times == "per_batch" else 1, T, generator=g)
        kw["times"] = (torch.cumsum(gaps, -1) + 3.0).reshape((B, T) if times == "per_batch" else (T,))
    if lengths is not None:
        kw["lengths"] = torch.tensor(lengths)
    if q_lengths is not None:
        kw["q_lengths"] = torch.tensor(q_lengths)
    tensors = [t.to(DEVICE) for t in (q, k, v, sink_k, sink_v, do)]
    return tensors, {n: t.to(DEVICE) for n, t in kw.items()}


def run(backend, tensors, dtype, sink, **kw):
    """Output and gradients (q, k, v, sink_k, sink_v) of one forward/backward, as float32."""
    *inputs, do = tensors
    leaves = [t.detach().to(dtype).clone().requires_grad_(True) for t in inputs]
    q, k, v, sk, sv = leaves
    sink_kw = dict(sink_k=sk, sink_v=sv) if sink == "learned" else {}
    out = continuous_attention(q, k, v, sink=sink, backend=backend, **sink_kw, **kw)
    out.backward(do.to(dtype))
    grads = [t.grad if t.grad is not None else torch.zeros_like(t) for t in leaves]  # unused sink params
    return [out.detach().float()] + [g.float() for g in grads]


NAMES = ["out", "dq", "dk", "dv", "dsink_k", "dsink_v"]


def assert_float32_match(tensors, sink, atol=3e-6, rtol=3e-6, **kw):
    got = run("triton", tensors, torch.float32, sink, **kw)
    want = run("torch", tensors, torch.float32, sink, **kw)
    for name, a, b in zip(NAMES, got, want):
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol, msg=lambda m, name=name: f"{name}: {m}")
    assert want[0].abs().max() > 0.1, "degenerate case: nothing to compare"


def assert_half_match(tensors, sink, dtype, atol, **kw):
    """flash-attn's rule: the kernel's error against float32 at most twice the torch path's, plus
    ``atol`` relative to the largest reference entry (at least 1).

    Both start from the same half-precision inputs, so the reference is the float32 computation
    on those rounded inputs. The torch path computes in float32 and only rounds its result, so its
    error is small; the kernel also rounds weights and score gradients before its products, as
    FlashAttention does, which ``atol`` allows for.
    """
    rounded = [t.to(dtype).float() for t in tensors]
    ref = run("torch", rounded, torch.float32, sink, **kw)
    torch_half = run("torch", rounded, dtype, sink, **kw)
    got = run("triton", rounded, dtype, sink, **kw)
    for name, g, t, r in zip(NAMES, got, torch_half, ref):
        err, base = (g - r).abs().max().item(), (t - r).abs().max().item()
        bound = 2 * base + atol * max(1.0, r.abs().max().item())
        assert err <= bound, f"{name}: kernel error {err:.3g} > {bound:.3g} (torch {dtype} path: {base:.3g})"
