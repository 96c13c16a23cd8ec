"""Registers and spills of every autotune candidate, compiled for sm_90 on a machine without a GPU.

    python -m benchmarks.speed.register_report [--dtype bf16] [--head-dims 16 32 64 128] [--arch 90]

Compiles each kernel of ts_continuum.kernels for every candidate config of kernels/tuning.py with
Triton's ahead-of-time path (no driver needed) and runs the bundled ptxas with -v. Spilling
configs are slow on any GPU, so this is how the candidate lists were chosen before a GPU run;
the timings themselves still need the GPU (benchmarks/speed/kernel_bench.py). Uses Triton's
``ASTSource`` signature format of Triton 3.9 (checked there).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

os.environ.pop("TRITON_INTERPRET", None)  # compile for real, whatever the calling shell says

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from ts_continuum.kernels import continuous_bwd, continuous_fwd, tuning  # noqa: E402

SCALARS = dict(T="i32", TQ="i32", H="i32", stride_delta_b="i32", stride_last_b="i32", stride_reach_b="i32",
               scale="fp32", FIRST="i32", T_BUCKET="i32", TQ_BUCKET="i32")
INTEGER_TENSORS = {"LAST", "REACH", "TURN"}
TENSORS_IN_DTYPE = {"Q", "K", "V", "DO", "OUT", "DQ", "DK", "DV"}
KERNELS = {  # name: (kernel, pointer arguments, candidate table, further constexprs)
    "forward": (continuous_fwd._forward_kernel, "Q K V LOG2_DELTA LAST OUT LSE", tuning.FORWARD, {}),
    "dkdv": (continuous_bwd._dkdv_kernel, "Q K V DO LSE DELTA LOG2_DELTA LAST REACH DK DV DQ TURN", tuning.KEY_MAJOR,
             dict(ATOMIC_DQ=False, ORDERED_DQ=False, KEYS_ROWS=False)),
    "dq": (continuous_bwd._dq_kernel, "Q K V DO LSE DELTA LOG2_DELTA LAST DQ", tuning.QUERY_MAJOR, {}),
    # TS_CONTINUUM_DQ=atomic (the default): the dK/dV pass also adds dQ into a float32 buffer; no dq pass
    "dkdv+dq": (continuous_bwd._dkdv_kernel, "Q K V DO LSE DELTA LOG2_DELTA LAST REACH DK DV DQ TURN",
                tuning.KEY_MAJOR_ATOMIC_DQ, dict(ATOMIC_DQ=True, ORDERED_DQ=False, KEYS_ROWS=False)),
    # TS_CONTINUUM_DQ=deterministic: the same, the key blocks adding in turn
    "dkdv+dq-det": (continuous_bwd._dkdv_kernel, "Q K V DO LSE DELTA LOG2_DELTA LAST REACH DK DV DQ TURN",
                    tuning.KEY_MAJOR_ATOMIC_DQ, dict(ATOMIC_DQ=True, ORDERED_DQ=True, KEYS_ROWS=False)),
    # continuous_bwd.KEYS_ROWS = True: the one-pass dK/dV+dQ kernel on S^T = K Q^T tiles (segments as
    # the rows). Not autotuned; its configs are the ones surveyed for benchmarks/results/2026-12-05-sass.
    "dkdv+dq-keys": (continuous_bwd._dkdv_kernel, "Q K V DO LSE DELTA LOG2_DELTA LAST REACH DK DV DQ TURN",
                     {d: [(16, 64, 4, 2), (32, 64, 4, 2), (64, 64, 4, 2)] for d in tuning.KEY_MAJOR_ATOMIC_DQ},
                     dict(ATOMIC_DQ=True, ORDERED_DQ=False, KEYS_ROWS=True)),
}


def ptxas() -> str:
    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    for name in ("ptxas-blackwell", "ptxas"):  # the newer one reads the PTX versions Triton emits
        if os.path.exists(os.path.join(bin_dir, name)):
            return os.path.join(bin_dir, name)
    raise FileNotFoundError(f"no ptxas in {bin_dir}")


def compile_kernel(kernel: str, dtype: str, head_dim: int, blocks: tuning.Blocks, arch: int):
    """Triton's compiled kernel for sm_{arch}, specialised as a real launch would be: 16-byte aligned
    pointers (without that hint Triton assumes unaligned tensors and loads them element by element)."""
    fn, pointers, _, extra = KERNELS[kernel]
    in_dtype = TENSORS_IN_DTYPE - ({"DQ"} if extra.get("ATOMIC_DQ") else set())  # one-pass dQ adds in float32
    types = {p: "*" + (dtype if p in in_dtype else "i32" if p in INTEGER_TENSORS else "fp32") for p in pointers.split()}
    types.update(SCALARS)
    block_m, block_n, warps, stages = blocks
    constexprs = dict(HEAD_DIM=head_dim, DOT_PRECISION="ieee" if dtype == "fp32" else "tf32",
                      BLOCK_M=block_m, BLOCK_N=block_n, **extra)
    types.update({name: "constexpr" for name in constexprs})
    signature = {name: types[name] for name in fn.arg_names}  # in the kernel's argument order
    aligned = {(fn.arg_names.index(p),): [["tt.divisibility", 16]] for p in pointers.split()}
    return triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=aligned),
        target=GPUTarget("cuda", arch, 32),
        options=dict(num_warps=warps, num_stages=stages),
    )


def run_ptxas(ptx: str, arch: int, *flags: str, output: str = os.devnull) -> str:
    """ptxas's log (stderr) for this PTX; the cubin goes to ``output``."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        return subprocess.run([ptxas(), *flags, f"--gpu-name=sm_{arch}a", f.name, "-o", output],
                              capture_output=True, text=True, check=True).stderr


def report(kernel: str, dtype: str, head_dim: int, blocks: tuning.Blocks, arch: int) -> str:
    start = time.perf_counter()
    compiled = compile_kernel(kernel, dtype, head_dim, blocks, arch)
    seconds = time.perf_counter() - start
    log = run_ptxas(compiled.asm["ptx"], arch, "-v")
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    block_m, block_n, warps, stages = blocks
    return (f"{kernel:8s} {dtype} D={head_dim:<3d} BLOCK_M={block_m:<3d} BLOCK_N={block_n:<3d} warps={warps} "
            f"stages={stages}  registers={regs.group(1) if regs else '?'} spill_bytes={spill.group(1) if spill else 0} "
            f"shared={compiled.metadata.shared} compile={seconds:.1f}s")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--head-dims", type=int, nargs="+", default=sorted(tuning.QUERY_MAJOR))
    p.add_argument("--kernels", nargs="+", default=sorted(KERNELS), choices=sorted(KERNELS))
    p.add_argument("--arch", type=int, default=90)
    args = p.parse_args(argv[1:])
    for kernel in args.kernels:
        for head_dim in args.head_dims:
            for blocks in KERNELS[kernel][2][head_dim]:
                print(report(kernel, args.dtype, head_dim, blocks, args.arch), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
