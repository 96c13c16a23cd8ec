"""Backend selection: the exact torch path (eager or Inductor-compiled) and the Triton kernel.

Every backend is a callable ``(q, k_ext, v_ext, log_delta, layout, scale) -> out`` on the
extended sequence prepared by :func:`continuous_attention`, so they share one preparation step
and one test suite:

- ``q``: (B, H, Tq, D) in the caller's dtype (Tq = T for self-attention, any Tq otherwise);
  ``k_ext``, ``v_ext``: (B, H, T+1, D|Dv), point 0 is the sink point (for sink "none" a copy of
  point 1 whose segment is switched off);
- ``log_delta``: (B|1, T) log segment lengths (float32, or float64 for float64 inputs);
  segment j (1-based) joins extended points j-1 and j;
- ``layout``: :class:`SegmentLayout`: query row t integrates over segments
  ``layout.first <= j <= layout.last[b, t]`` (``last``: (B|1, Tq)); rows with no segment
  (``last < first``) output 0;
- returns (B, H, Tq, Dv) in ``q``'s dtype or float32 (the op casts back), gradients to q, k_ext, v_ext.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable, Literal, get_args

import torch

from .choices import check_choice
from .reference import EAGER_KERNELS, ContinuousAttentionFunction, backward_tile, forward_tile

Backend = Callable[..., torch.Tensor]
# The names a caller may pass (a Literal: the CLI lists them and refuses others when parsing)
BackendName = Literal["auto", "torch", "triton"]
BACKENDS: tuple[str, ...] = get_args(BackendName)

COMPILE_ENV = "TS_CONTINUUM_COMPILE"


class TorchPath:
    """The exact path with a pair of tile functions (eager or compiled)."""

    def __init__(self, kernels):
        self.kernels = kernels

    def __call__(self, q, k_ext, v_ext, log_delta, layout, scale):
        work = torch.float64 if q.dtype == torch.float64 else torch.float32  # half inputs: float32 math
        q, k_ext, v_ext = q.to(work), k_ext.to(work), v_ext.to(work)
        return ContinuousAttentionFunction.apply(q, k_ext, v_ext, log_delta.to(work), layout, scale, self.kernels)


# Compiled variants allowed per tile function (torch's default is 8 per function, after which it
# runs eager for the rest of the process without saying so in a training log).
RECOMPILE_LIMIT = 32
# torch < 2.6 calls the same setting cache_size_limit
_LIMIT_SETTING = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"


class _CompiledTiles:
    """The tile functions under torch.compile, falling back to eager (once, with a warning) if
    compilation fails on this machine, e.g. when no C++ compiler is installed.

    Why dynamic shapes and detached inputs: a training process calls the tiles with every batch
    size, sequence length and stride its data produce, with tensors that require grad (training)
    and not (validation), and with inference tensors (Lightning's evaluation). Each of those
    differences failed a guard and recompiled; after 8 versions torch silently fell back to eager
    for the rest of the process, which made long runs (the study runner, notebooks) train at the
    eager path's speed. With dynamic shapes and detached inputs (the tiles are pure functions whose
    gradients come from the closed-form backward, not autograd) the variants are a handful. The
    dynamic-shape code was 3 % slower than shape-specialised code on PatchTST's attention shape
    (896 x 4 heads x 42 patches x 4, forward+backward, interleaved, 2 threads, shared machine).
    """

    def __init__(self):
        self._fwd = torch.compile(forward_tile, dynamic=True)
        self._bwd = torch.compile(backward_tile, dynamic=True)
        self.failed = False

    def _call(self, compiled, eager, *args):
        if not self.failed:
            args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
            try:
                with torch._dynamo.config.patch(**{_LIMIT_SETTING: RECOMPILE_LIMIT}):
                    return compiled(*args)
            except (torch.OutOfMemoryError, KeyboardInterrupt):
                raise  # the input's fault, not the compiler's: keep compiling later calls
            except Exception as exc:  # compiler missing or broken: the eager path gives the same numbers
                self.failed = True
                warnings.warn(
                    f"torch.compile of continuous attention failed ({type(exc).__name__}: {exc}); "
                    f"using the eager torch path. Set {COMPILE_ENV}=0 to skip compilation.",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return eager(*args)

    def forward(self, *args):
        return self._call(self._fwd, forward_tile, *args)

    def backward(self, *args):
        return self._call(self._bwd, backward_tile, *args)


_compiled: _CompiledTiles | None = None


def compile_enabled() -> bool:
    return os.environ.get(COMPILE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def compiled_torch_path() -> Backend:
    global _compiled
    if _compiled is None:
        _compiled = _CompiledTiles()
    return TorchPath((_compiled.forward, _compiled.backward))


def triton_available(device: torch.device) -> tuple[bool, str]:
    """Whether the Triton kernel can run on ``device`` here, and why not."""
    try:
        from ts_continuum.kernels import autograd as _  # noqa: F401
    except ImportError as exc:
        return False, f"the Triton kernel is not importable ({exc}); install triton"
    if device.type == "cuda":
        return True, ""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return True, ""
    return False, (
        f"the Triton kernel needs a CUDA tensor (got {device.type}); on the CPU it runs only in the "
        "Triton interpreter (set TRITON_INTERPRET=1 before importing triton), or use backend='torch'"
    )


def select(name: str, q: torch.Tensor, head_dim: int, value_dim: int) -> Backend:
    """The backend callable for ``name`` ("auto", "torch" or "triton") and these inputs."""
    check_choice("backend", name, BACKENDS)
    if name == "torch":
        return TorchPath(EAGER_KERNELS)
    if name == "triton":
        ok, why = triton_available(q.device)
        if not ok:
            raise ValueError(f"backend='triton' is unavailable: {why}")
        from ts_continuum.kernels.autograd import triton_backend, unsupported_reason

        reason = unsupported_reason(q, head_dim, value_dim)
        if reason:
            raise ValueError(f"backend='triton' does not support these inputs: {reason}; use backend='torch'")
        return triton_backend
    # auto: the fused kernel on CUDA where it applies, else the compiled torch path.
    if q.device.type == "cuda" and triton_available(q.device)[0]:
        from ts_continuum.kernels.autograd import triton_backend, unsupported_reason

        if not unsupported_reason(q, head_dim, value_dim):
            return triton_backend
    if compile_enabled() and not torch.compiler.is_compiling():
        return compiled_torch_path()
    return TorchPath(EAGER_KERNELS)
