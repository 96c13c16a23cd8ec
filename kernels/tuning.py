"""Block sizes: autotuned per head dimension (and length bucket) on a GPU, fixed elsewhere.

Each head dimension gets its own short list of candidate configs (an autotuner per head dim over
the same kernel), so a GPU run compiles 3 configs per kernel and head dim, not every config for
every head dim. Fixed configs where tuning is not worth its compile time:
- the Triton interpreter runs programs one after another on the CPU, so autotuning there would be
  very slow: 16 x 16 blocks, small enough that test shapes cross several block boundaries;
- float32 inputs, which use exact ("ieee") products for accuracy, not speed: those compile to
  FMA loops, 5-15 s per config, so one small config.
"""

from __future__ import annotations

import os

import torch
import triton

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
INTERPRETER_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16}
FLOAT32_BLOCKS = {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 8, "num_stages": 2}

# Runtime integers the kernels must not be specialised (recompiled) on: lengths, strides, flags.
DYNAMIC = ["T", "TQ", "H", "stride_delta_b", "stride_last_b", "FIRST", "T_BUCKET", "TQ_BUCKET"]

# Retune for a new head dim (separate autotuner) or a new power-of-two bucket of the key or query
# count; Triton adds the dtypes. A new length inside known buckets reuses the tuned config.
KEY = ["T_BUCKET", "TQ_BUCKET"]

Blocks = tuple[int, int, int, int]  # BLOCK_M, BLOCK_N, num_warps, num_stages

# Candidates picked without a GPU, from ptxas register reports for sm_90 (bfloat16): configs that
# compile without (or with few) register spills; the autotuner chooses among them on the GPU.
# benchmarks/speed/sass_report.py --all-candidates also showed some configs (8 warps on too few rows of
# the score tile, e.g. 64 x 32 at head dim 128) computing every score element in two threads,
# twice the per-element arithmetic that bounds this kernel; those were replaced and a test
# (tests/test_sass_report.py) keeps them out.
# Forward: BLOCK_M query rows resident, loop over BLOCK_N segments. 64-segment blocks halve the
# running-max rescale of the accumulator (HEAD_DIM / BLOCK_N multiplies per score element) and, at
# every head dim, compile without spills since the forward keeps fewer tiles live: 3-6 instructions
# per element fewer than 32-segment blocks (benchmarks/results/2026-12-04-sass). The 32-segment
# configs stay as candidates.
FORWARD: dict[int, list[Blocks]] = {
    16: [(64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 2)],
    32: [(64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 2)],
    64: [(64, 64, 4, 2), (128, 64, 8, 2), (64, 32, 4, 2)],
    128: [(128, 64, 8, 2), (128, 32, 8, 2), (64, 32, 4, 2)],
}
# dQ pass (TS_CONTINUUM_DQ=pass): as the forward, but the backward's moment arithmetic keeps a dozen
# BLOCK_M x BLOCK_N float32 tiles live, hence the narrow segment blocks (128 x 64 spills at D = 128).
QUERY_MAJOR: dict[int, list[Blocks]] = {
    16: [(64, 32, 4, 2), (128, 32, 8, 2), (64, 64, 4, 2)],
    32: [(64, 32, 4, 2), (128, 32, 8, 2), (64, 64, 4, 2)],
    64: [(64, 32, 4, 2), (128, 32, 8, 2), (32, 64, 4, 2)],
    128: [(128, 32, 8, 2), (64, 32, 4, 2), (32, 32, 4, 2)],
}
# dK/dV pass: BLOCK_N points resident (K and V twice, two float32 accumulators), loop over BLOCK_M queries.
KEY_MAJOR: dict[int, list[Blocks]] = {
    16: [(32, 64, 4, 2), (64, 32, 4, 2), (32, 64, 8, 2)],
    32: [(64, 32, 4, 2), (32, 64, 8, 2), (32, 32, 2, 2)],
    64: [(32, 64, 8, 2), (32, 32, 4, 2), (64, 32, 4, 2)],
    128: [(32, 64, 8, 2), (32, 32, 4, 2), (16, 32, 4, 2)],
}
# The dK/dV pass that also adds dQ (the default backward): its extra product changes the layouts,
# and narrow query blocks at small head dims replicate the per-element work there. At D = 64 and 128
# the first candidates compile without spills (64 x 32 and 128 x 32 spilled there); 32 x 64 on 4
# warps needs fewer instructions per element but spills a little (16 bytes at D = 64).
KEY_MAJOR_ATOMIC_DQ: dict[int, list[Blocks]] = {
    16: [(64, 32, 4, 2), (32, 32, 2, 2), (128, 32, 8, 2)],
    32: [(64, 32, 4, 2), (32, 32, 2, 2), (128, 32, 8, 2)],
    64: [(16, 64, 4, 2), (32, 64, 8, 2), (32, 64, 4, 2)],
    128: [(32, 64, 8, 2), (16, 64, 4, 2), (32, 32, 4, 2)],
}


def quick_bench(fn, quantiles):
    """Shorter timing than the autotuner's default (25 ms warm-up, 100 ms of repeats): the
    candidates differ by tens of percent, and a fresh GPU machine tunes every bucket it meets."""
    return triton.testing.do_bench(fn, warmup=5, rep=25, quantiles=quantiles)


class TunedKernel:
    """A kernel launched with autotuned blocks per head dim (half precision on a GPU), fixed ones otherwise."""

    instances: list[TunedKernel] = []

    def __init__(self, kernel, candidates: dict[int, list[Blocks]], reset_to_zero: list[str] | None = None,
                 name: str | None = None):
        self.kernel = kernel
        self.name = name or kernel.__name__
        TunedKernel.instances.append(self)
        self.tuned = {} if INTERPRET else {
            d: triton.autotune(
                [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in cands],
                key=KEY,
                do_bench=quick_bench,
                reset_to_zero=reset_to_zero,
            )(kernel)
            for d, cands in candidates.items()
        }

    def launch(self, grid, head_dim: int, dtype: torch.dtype, *args, **kwargs) -> None:
        """``grid``: a function of the meta-parameters (BLOCK_M, BLOCK_N), as for any Triton launch."""
        if INTERPRET:
            self.kernel[grid](*args, **INTERPRETER_BLOCKS, **kwargs)
        elif dtype == torch.float32:
            self.kernel[grid](*args, **FLOAT32_BLOCKS, **kwargs)
        else:
            self.tuned[head_dim][grid](*args, **kwargs)


def chosen_configs() -> dict[str, dict[str, str]]:
    """The configs the autotuners picked so far, per kernel, head dim and tuning key (for reports)."""
    chosen: dict[str, dict[str, str]] = {}
    for tk in TunedKernel.instances:
        per_kernel = chosen.setdefault(tk.name, {})
        for d, tuner in tk.tuned.items():
            per_kernel.update({f"D={d} {key}": str(cfg) for key, cfg in tuner.cache.items()})
    return chosen


def length_bucket(seq: int) -> int:
    return triton.next_power_of_2(max(seq, 16))
