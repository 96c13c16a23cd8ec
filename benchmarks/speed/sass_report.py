"""Instructions per score element in each kernel's main loop, from sm_90 machine code, without a GPU.

    python -m benchmarks.speed.sass_report [--dtype bf16] [--head-dims 64 128] [--out DIR]

The kernel is bound by per-element arithmetic on the CUDA cores, not by its matrix products
(benchmarks/results/2026-11-30-h200/README.md), so the instruction count of the inner loop is a
static proxy for its speed that any machine can measure: each kernel is compiled with its first
autotune candidate (kernels/tuning.py), assembled with the ptxas bundled with Triton, and one
iteration of its main loops (the cheapest path: interior blocks; the dearest: masked blocks) is
counted by instruction class and divided by the score elements one thread handles per iteration.
A proxy, not a timing: latency hiding, tensor-core overlap and memory traffic are invisible to it
(the opcodes show whether the loads are software-pipelined: LDGSTS, cp.async, rather than LDG);
GPU timings come from benchmarks/speed/kernel_bench.py.
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

from benchmarks.machine import command
from benchmarks.speed.register_report import KERNELS, compile_kernel, ptxas, run_ptxas

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


def loops(sass: str) -> list[list[tuple[int, str]]]:
    """Every outermost loop of the listing, as (address, text) from the target of a backward branch
    to the branch. The forward and dQ kernels run three loops in turn (masked, interior, masked:
    continuous_fwd.block_ranges), the dK/dV kernel one loop that branches per block."""
    code = instructions(sass)
    spans = []
    for address, text in code:
        m = re.search(r"\bBRA\s+(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) < address:
            spans.append((int(m.group(1), 16), address))
    if not spans:
        raise RuntimeError("no loop found in the SASS listing")
    outer = [(lo, hi) for lo, hi in spans if not any(a <= lo and hi <= b and (a, b) != (lo, hi) for a, b in spans)]
    return [[(address, text) for address, text in code if lo <= address <= hi] for lo, hi in outer]


def working_paths(loop: list[tuple[int, str]]) -> tuple[list[str], list[str]]:
    """The shortest and the longest path through one iteration (loop head to the back edge) that
    evaluates exponentials, as instruction lists.

    The kernels branch per block (interior blocks skip the masks, blocks out of reach are
    skipped), so one iteration runs one of several straight-line paths; counting the whole loop
    body would add them up. Dynamic programming over the forward edges (a DAG), as sequences of
    small branches would make enumerating every path explode.
    """
    head, back = loop[0][0], loop[-1][0]
    index = {address: i for i, (address, _) in enumerate(loop)}
    target = {}
    for i, (_, text) in enumerate(loop):
        m = re.search(r"\bBRA\s+(0x[0-9a-f]+)", text)
        if m:
            target[i] = int(m.group(1), 16)
    leaders = {0} | {index[t] for t in target.values() if t in index} | {i + 1 for i in target if i + 1 < len(loop)}
    starts = sorted(leaders)
    ends = {start: next((x for x in starts if x > start), len(loop)) for start in starts}

    def successors(start: int) -> list[int | None]:  # None: the back edge (end of the iteration)
        end = ends[start]
        last = end - 1
        if last in target:
            t = target[last]
            jumps = [None] if t == head and loop[last][0] == back else ([index[t]] if t in index else [])
            conditional = loop[last][1].startswith("@")
            return jumps + ([end] if conditional and end < len(loop) else [])
        return [end] if end < len(loop) else []

    # best[(block, has_exp)] = (shortest, longest) paths from the head to the block's start, as block lists
    best: dict[tuple[int, bool], tuple[list[int], list[int]]] = {(0, False): ([], [])}
    finished: list[list[int]] = []
    for start in starts:  # addresses increase along forward edges: a topological order
        has_exp = any(opcode(text) == "MUFU" for _, text in loop[start:ends[start]])
        for flag in (False, True):
            if (start, flag) not in best:
                continue
            flag_after = flag or has_exp
            for path in best[(start, flag)]:
                path = path + [start]
                for nxt in successors(start):
                    if nxt is None:
                        if flag_after:
                            finished.append(path)
                        continue
                    if nxt <= start:
                        continue
                    size = lambda p: sum(ends[x] - x for x in p)  # noqa: E731
                    short, long_ = best.get((nxt, flag_after), (path, path))
                    best[(nxt, flag_after)] = (min(short, path, key=size), max(long_, path, key=size))
    if not finished:
        raise RuntimeError("no path through the loop evaluates an exponential")
    texts = [[text for x in p for _, text in loop[x:ends[x]]] for p in finished]
    return min(texts, key=len), max(texts, key=len)


def profile(body: list[str], per_thread: float) -> dict:
    ops = collections.Counter(opcode(t) for t in body)
    by_class = {name: sum(n for op, n in ops.items() if op in members) for name, members in CLASSES.items()}
    by_class["other"] = len(body) - sum(by_class.values())
    return {
        "instructions": len(body),
        "per_element": round(len(body) / per_thread, 2),
        "per_element_by_class": {k: round(v / per_thread, 2) for k, v in by_class.items()},
        "opcodes": dict(ops.most_common()),
    }


def loop_profile(kernel: str, dtype: str, head_dim: int, blocks=None, arch: int = 90) -> dict:
    """Counts per score element of one iteration of one kernel's main loop (default: first autotune
    candidate): the shortest path that does the work (interior blocks, no masks) and the longest
    (blocks at a boundary, masked)."""
    blocks = blocks or KERNELS[kernel][2][head_dim][0]
    compiled = compile_kernel(kernel, dtype, head_dim, blocks, arch)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "kernel.cubin")
        run_ptxas(compiled.asm["ptx"], arch, output=cubin)
        cuobjdump = os.path.join(os.path.dirname(ptxas()), "cuobjdump")
        sass = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, check=True).stdout
    paths = [working_paths(loop) for loop in loops(sass) if any(opcode(t) == "MUFU" for _, t in loop)]
    shortest = min((p[0] for p in paths), key=len)
    longest = max((p[1] for p in paths), key=len)
    block_m, block_n, warps, stages = blocks
    per_thread = block_m * block_n / (32 * warps)
    interior = profile(shortest, per_thread)
    masked = profile(longest, per_thread)
    return {
        "kernel": kernel, "dtype": dtype, "head_dim": head_dim, "arch": f"sm_{arch}",
        "blocks": dict(BLOCK_M=block_m, BLOCK_N=block_n, warps=warps, stages=stages),
        "elements_per_thread": per_thread,
        **interior,
        "masked": masked,
    }


def markdown(rows: list[dict]) -> str:
    classes = list(CLASSES) + ["other"]
    head = ("| kernel | dtype | D | blocks (M, N, warps) | per element | masked | "
            + " | ".join(classes) + " |")
    lines = [head, "|" + "---|" * (6 + len(classes))]
    for r in rows:
        b = r["blocks"]
        lines.append(f"| {r['kernel']} | {r['dtype']} | {r['head_dim']} | {b['BLOCK_M']}, {b['BLOCK_N']}, "
                     f"{b['warps']} | {r['per_element']:.1f} | {r['masked']['per_element']:.1f} | "
                     + " | ".join(f"{r['per_element_by_class'][c]:.1f}" for c in classes) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--head-dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--kernels", nargs="+", default=["forward", "dkdv", "dq", "dkdv+dq", "dkdv+dq-det"],
                   choices=sorted(KERNELS))
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
        meta = {"triton": triton.__version__, "command": command(__spec__.name, argv[1:])}
        (args.out / "sass_report.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (args.out / "sass_report.md").write_text(f"Triton {triton.__version__}, `{meta['command']}`\n\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
