"""Block sizes: autotuned per head dimension (and length bucket) on a GPU, fixed in the interpreter.

The Triton interpreter runs every program one after the other on the CPU, so autotuning there
would run every config of every kernel serially: it uses one small fixed config instead (16 x 16
blocks, which also makes small test shapes cross several block boundaries).
"""

from __future__ import annotations

import os

import triton

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
INTERPRETER_BLOCKS = {"BLOCK_M": 16, "BLOCK_N": 16}

# Autotuning key: head dim and a power-of-two length bucket (the dtype is added by Triton), so a
# new sequence length in the same bucket reuses the tuned config instead of re-benchmarking.
KEY = ["HEAD_DIM", "T_BUCKET"]


def _configs(blocks: list[tuple[int, int, int, int]]) -> list[triton.Config]:
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=w, num_stages=s) for m, n, w, s in blocks
    ]


# Forward and dQ pass: BLOCK_M query rows resident, loop over BLOCK_N segments. The per-element
# moment arithmetic keeps many BLOCK_M x BLOCK_N float32 tiles live, hence the modest tiles.
QUERY_MAJOR = _configs([(64, 32, 4, 2), (64, 64, 4, 2), (128, 32, 8, 2), (128, 64, 8, 2), (64, 64, 8, 3)])
# dK/dV pass: BLOCK_N points resident (K, V and four float32 accumulators), loop over BLOCK_M queries.
KEY_MAJOR = _configs([(32, 64, 4, 2), (64, 64, 4, 2), (64, 64, 8, 2), (32, 128, 8, 2), (64, 32, 4, 2)])


def tuned(configs: list[triton.Config]):
    """Decorator: autotune ``configs`` on a GPU; leave the kernel as is under the interpreter."""

    def wrap(kernel):
        return kernel if INTERPRET else triton.autotune(configs, key=KEY)(kernel)

    return wrap


def launch_blocks() -> dict[str, int]:
    """Block sizes to pass explicitly at launch: the fixed ones in the interpreter, none when tuned."""
    return dict(INTERPRETER_BLOCKS) if INTERPRET else {}


def length_bucket(seq: int) -> int:
    return triton.next_power_of_2(max(seq, 16))
