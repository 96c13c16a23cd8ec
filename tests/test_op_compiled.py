"""backend="auto" on the CPU runs the tiles under torch.compile: same numbers as the eager path."""

from __future__ import annotations

import pytest
import torch

from ts_continuum import continuous_attention
from ts_continuum.attention import backends


@pytest.mark.slow
def test_compiled_path_matches_eager_forward_and_backward(monkeypatch):
    monkeypatch.setenv(backends.COMPILE_ENV, "1")
    g = torch.Generator().manual_seed(0)
    B, H, T, D = 3, 2, 9, 4
    base = [torch.randn(B, H, T, D, generator=g) for _ in range(3)] + [torch.randn(H, D, generator=g) for _ in range(2)]
    times = torch.cumsum(0.3 + torch.rand(B, T, generator=g), -1)
    lengths = torch.tensor([9, 6, 2])

    def run(backend):
        q, k, v, sk, sv = (t.clone().requires_grad_(True) for t in base)
        out = continuous_attention(
            q, k, v, times=times, lengths=lengths, causal=True, sink="learned", sink_k=sk, sink_v=sv, backend=backend
        )
        out.backward(torch.cos(out))
        return [out] + [t.grad for t in (q, k, v, sk, sv)]

    eager = run("torch")
    compiled = run("auto")
    assert backends._compiled is not None and not backends._compiled.failed, "the compiled path must have run"
    for a, b in zip(compiled, eager):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_compile_can_be_switched_off(monkeypatch):
    monkeypatch.setenv(backends.COMPILE_ENV, "0")
    q = torch.randn(1, 1, 4, 2)
    assert backends.select("auto", q, 2, 2).kernels is backends.EAGER_KERNELS
    monkeypatch.setenv(backends.COMPILE_ENV, "1")
    assert backends.select("auto", q, 2, 2).kernels is not backends.EAGER_KERNELS


def test_running_out_of_memory_is_raised_and_keeps_compilation_on(monkeypatch):
    """A failing compiler switches to the eager path for good; running out of memory is not that."""
    tiles = backends._CompiledTiles.__new__(backends._CompiledTiles)
    tiles.failed = False

    def oom(*args):
        raise torch.OutOfMemoryError("CUDA out of memory")

    def broken(*args):
        raise RuntimeError("no C compiler")

    with pytest.raises(torch.OutOfMemoryError):
        tiles._call(oom, lambda *a: "eager")
    assert not tiles.failed
    with pytest.warns(RuntimeWarning, match="using the eager torch path"):
        assert tiles._call(broken, lambda *a: "eager") == "eager"
    assert tiles.failed


def _cache_entries(fn) -> int:
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    return len(_debug_get_cache_entry_list(fn.__code__))


def _call(B, H, T, D, mode, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
    times = torch.cumsum(0.3 + torch.rand(B, T, generator=g), -1)
    if mode == "train":
        q, k, v = (t.requires_grad_(True) for t in (q, k, v))
        continuous_attention(q, k, v, times=times, causal=True, backend="auto").sum().backward()
    elif mode == "no_grad":
        with torch.no_grad():
            continuous_attention(q, k, v, times=times, backend="auto")
    else:  # Lightning evaluates under inference mode
        with torch.inference_mode():
            q, k, v, times = (t.clone() for t in (q, k, v, times))
            continuous_attention(q, k, v, times=times, backend="auto")


@pytest.mark.slow
def test_a_training_process_keeps_its_compiled_tiles(monkeypatch):
    """Training, validation (no grad) and Lightning's inference-mode evaluation, with new batch
    sizes, lengths and head dims, reuse the compiled tiles: before, each difference recompiled and
    after 8 versions torch ran the eager path for the rest of the process (the study's continuous
    cells trained at eager speed)."""
    monkeypatch.setenv(backends.COMPILE_ENV, "1")
    from ts_continuum.attention.reference import backward_tile, forward_tile

    # sizes all distinct within a call, none 1: torch specialises on equal and unit sizes
    for i, mode in enumerate(["train", "no_grad", "inference"]):
        _call(2, 3, 9, 5, mode, seed=i)
    seen = _cache_entries(forward_tile), _cache_entries(backward_tile)
    assert min(seen) > 0, "nothing was compiled: the comparison below would hold trivially"
    for i, mode in enumerate(["train", "no_grad", "inference"] * 2):
        B, H, T, D = [(3, 2, 13, 6), (4, 5, 8, 7), (6, 4, 11, 3)][i % 3]
        _call(B + i, H, T + 2 * i, D, mode, seed=10 + i)
    assert (_cache_entries(forward_tile), _cache_entries(backward_tile)) == seen, "the tiles were recompiled"
    assert not backends._compiled.failed
