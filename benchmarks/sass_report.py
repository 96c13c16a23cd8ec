"""Instructions per score element in each kernel's main loop, from sm_90 machine code, without a GPU.

    python benchmarks/sass_report.py [--dtype bf16] [--head-dims 64 128] [--out DIR]

The kernel is bound by per-element arithmetic on the CUDA cores, not by its matrix products
(benchmarks/results/2026-11-30-h200/README.md), so the instruction count of the inner loop is a
static proxy for its speed that any machine can measure: each kernel is compiled with its first
autotune candidate (kernels/tuning.py), assembled with the ptxas bundled with Triton, and the
largest loop of the SASS is counted by instruction class and divided by the score elements one
thread handles per iteration. A proxy, not a timing: latency hiding, tensor-core overlap and
memory traffic are invisible to it; GPU timings come from benchmarks/kernel_bench.py.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from register_report import KERNELS, compile_kernel, ptxas, run_ptxas  # noqa: E402

# Instruction classes (SASS opcode before the first dot).
CLASSES = {
    "fp32": {"FMUL", "FFMA", "FADD", "FSEL", "FSETP", "FMNMX", "FSET", "FCHK", "FSWZADD"},
    "special": {"MUFU"},
    "convert": {"F2FP", "F2F", "I2F", "F2I", "F2IP"},
    "integer": {"IADD3", "IMAD", "ISETP", "LOP3", "SEL", "LEA", "SHF", "VIADD", "IMNMX", "P2R", "R2P", "PRMT",
                "IABS", "VIMNMX", "PLOP3"},
    "matrix": {"HGMMA", "HMMA", "WARPGROUP", "WARPSYNC"},
    "memory": {"LDG", "STG", "LDS", "STS", "LDSM", "STSM", "LDGSTS", "LDGDEPBAR", "DEPBAR", "ATOMG", "RED",
               "ATOMS", "SHFL"},
}


def opcode(instruction: str) -> str:
    words = instruction.split()
    return (words[1] if words[0].startswith("@") else words[0]).split(".")[0]


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, text) of every instruction in cuobjdump's listing."""
    return [(int(m.group(1), 16), m.group(2).strip())
            for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;/]+);", sass)]


def largest_loop(sass: str) -> list[str]:
    """The instructions between the target of the widest backward branch and the branch."""
    code = instructions(sass)
    loops = []
    for address, text in code:
        m = re.search(r"\bBRA\s+(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < address:
            loops.append((int(m.group(1), 16), address))
    if not loops:
        raise RuntimeError("no loop found in the SASS listing")
    lo, hi = max(loops, key=lambda r: r[1] - r[0])
    return [text for address, text in code if lo <= address <= hi]


def loop_profile(kernel: str, dtype: str, head_dim: int, blocks=None, arch: int = 90) -> dict:
    """Counts per score element of the main loop of one kernel (default: first autotune candidate)."""
    blocks = blocks or KERNELS[kernel][2][head_dim][0]
    compiled = compile_kernel(kernel, dtype, head_dim, blocks, arch)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "kernel.cubin")
        run_ptxas(compiled.asm["ptx"], arch, output=cubin)
        cuobjdump = os.path.join(os.path.dirname(ptxas()), "cuobjdump")
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    body = largest_loop(sass)
    block_m, block_n, warps, stages = blocks
    per_thread = block_m * block_n / (32 * warps)
    ops = collections.Counter(opcode(t) for t in body)
    by_class = {name: sum(n for op, n in ops.items() if op in members) for name, members in CLASSES.items()}
    by_class["other"] = len(body) - sum(by_class.values())
    return {
        "kernel": kernel, "dtype": dtype, "head_dim": head_dim, "arch": f"sm_{arch}",
        "blocks": dict(BLOCK_M=block_m, BLOCK_N=block_n, warps=warps, stages=stages),
        "loop_instructions": len(body),
        "elements_per_thread": per_thread,
        "per_element": round(len(body) / per_thread, 2),
        "per_element_by_class": {k: round(v / per_thread, 2) for k, v in by_class.items()},
        "mufu": {k: v for k, v in collections.Counter(t.split()[0 if not t.startswith("@") else 1]
                                                      for t in body if opcode(t) == "MUFU").items()},
        "opcodes": dict(ops.most_common()),
    }


def markdown(rows: list[dict]) -> str:
    classes = list(CLASSES) + ["other"]
    head = "| kernel | dtype | D | blocks (M, N, warps) | per element | " + " | ".join(classes) + " |"
    lines = [head, "|" + "---|" * (5 + len(classes))]
    for r in rows:
        b = r["blocks"]
        lines.append(f"| {r['kernel']} | {r['dtype']} | {r['head_dim']} | {b['BLOCK_M']}, {b['BLOCK_N']}, "
                     f"{b['warps']} | {r['per_element']:.1f} | "
                     + " | ".join(f"{r['per_element_by_class'][c]:.1f}" for c in classes) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--kernels", nargs="+", default=["forward", "dkdv", "dq", "dkdv+dq"], choices=sorted(KERNELS))
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--all-candidates", action="store_true", help="every autotune candidate, not only the first")
    p.add_argument("--out", type=Path, help="write sass_report.json and sass_report.md here")
    args = p.parse_args(argv[1:])
    rows = [loop_profile(k, args.dtype, d, blocks, args.arch) for d in args.head_dims for k in args.kernels
            for blocks in (KERNELS[k][2][d] if args.all_candidates else [None])]
    table = markdown(rows)
    print(table, end="")
    if args.out:
        import triton

        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"triton": triton.__version__, "command": " ".join(["python", *argv])}
        (args.out / "sass_report.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (args.out / "sass_report.md").write_text(f"Triton {triton.__version__}, `{meta['command']}`\n\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
