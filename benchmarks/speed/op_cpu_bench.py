"""CPU speed of continuous attention against torch SDPA, measured in the same run.

    python -m benchmarks.speed.op_cpu_bench [--threads 2] [--repeats 5] [--out benchmarks/results/op_cpu]

Prints forward+backward time per call for SDPA, the continuous op with backend="torch" (eager)
and backend="auto" (Inductor-compiled on CPU), their ratios to SDPA, and the one-off cost of the
first compiled call; with ``--out`` also writes op_cpu.json, op_cpu.md and op_cpu.png (ratio to
SDPA per shape). Run it with nothing else heavy on the machine: ratios measured on a loaded
2-core machine are meaningless.
"""

from __future__ import annotations

import argparse
import json
import sys
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from ts_continuum import continuous_attention

from benchmarks.machine import command, cpu_facts

# (B, H, T, D): PatchTST on ETTh1 (128 windows x 7 channels, 4 heads of 4, 42 patches); PatchTST
# with 8-dim heads; a step-token encoder at lookback 336 with 64-dim heads.
SHAPES = [(896, 4, 42, 4), (256, 16, 42, 8), (16, 8, 336, 64)]


def _interleaved(fns: dict, repeats: int) -> dict[str, list[float]]:
    """Seconds per call of each function, taken in rounds that call every function once.

    Interleaving matters on a small shared machine: the same call measured in runs minutes apart
    moved by up to 1.8x here; a ratio of calls made seconds apart is less exposed to that drift,
    and the spread of the per-round ratios shows what is left of it.
    """
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def _fwd_bwd(attn, q, k, v):
    def run():
        for t in (q, k, v):
            t.grad = None
        out = attn(q, k, v)
        out.backward(torch.ones_like(out))

    return run


def bench(shape, repeats: int) -> dict:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*shape, generator=g).requires_grad_(True) for _ in range(3))
    sdpa = _fwd_bwd(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v)
    eager = _fwd_bwd(lambda q, k, v: continuous_attention(q, k, v, backend="torch"), q, k, v)
    auto = _fwd_bwd(lambda q, k, v: continuous_attention(q, k, v, backend="auto"), q, k, v)
    t0 = time.perf_counter()
    auto()
    first_call = time.perf_counter() - t0
    eager()  # warm-up
    sdpa()
    times = _interleaved({"sdpa": sdpa, "eager": eager, "auto": auto}, repeats)
    row = {"shape_BHTD": list(shape), "auto_first_call_s": first_call}
    for name, ts in times.items():
        row[f"{name}_s"] = statistics.median(ts)
    for name in ("eager", "auto"):
        ratios = sorted(t / s for t, s in zip(times[name], times["sdpa"]))
        row[f"{name}_ratio"] = statistics.median(ratios)
        row[f"{name}_ratio_range"] = [ratios[0], ratios[-1]]
    return row


def main() -> None:
    p = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=None, help="folder for op_cpu.json / .md / .png")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    facts = cpu_facts()
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        **facts,
        "processor": f"{facts['cpu']}, {facts['cores']} cores",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(f"torch {meta['torch']}, {meta['threads']} threads, fwd+bwd median of {args.repeats} interleaved rounds")
    print(f"{'B,H,T,D':>18} {'sdpa ms':>9} {'eager ms':>9} {'auto ms':>9} {'eager/sdpa':>10} {'auto/sdpa':>10} "
          f"{'compile s':>9}")
    rows = []
    for shape in SHAPES:
        r = bench(shape, args.repeats)
        rows.append(r)
        print(
            f"{','.join(map(str, shape)):>18} {1e3 * r['sdpa_s']:9.1f} {1e3 * r['eager_s']:9.1f}"
            f" {1e3 * r['auto_s']:9.1f}"
            f" {r['eager_ratio']:10.2f} {r['auto_ratio']:10.2f} {r['auto_first_call_s']:9.1f}"
        )
    if args.out:
        write(Path(args.out), meta, rows, command(__spec__.name, sys.argv[1:]))


def _ratio(row: dict, name: str) -> str:
    low, high = row[f"{name}_ratio_range"]
    return f"{row[f'{name}_ratio']:.2f} [{low:.2f}, {high:.2f}]"


def write(out: Path, meta: dict, rows: list[dict], command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "op_cpu.json").write_text(json.dumps({"meta": meta, "command": command, "rows": rows}, indent=2))
    lines = [
        f"# Continuous attention on the CPU vs SDPA ({meta['date']})",
        f"`{command}`: torch {meta['torch']}, {meta['threads']} threads, {meta['processor']}; forward+backward, "
        "median per call; SDPA, eager and compiled called in turn in each round; ratio = median over rounds "
        "of time / SDPA time in the same round, [lowest, highest round]. The first compiled call includes "
        "compilation unless Inductor's on-disk cache (or an earlier shape, the code being dynamic-shape) "
        "already holds it.",
        "",
        "| B, H, T, D | SDPA ms | eager ms | auto (compiled) ms | eager / SDPA | auto / SDPA | first auto call s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {', '.join(map(str, r['shape_BHTD']))} | {1e3 * r['sdpa_s']:.1f} | {1e3 * r['eager_s']:.1f} | "
            f"{1e3 * r['auto_s']:.1f} | {_ratio(r, 'eager')} | {_ratio(r, 'auto')} | {r['auto_first_call_s']:.1f} |"
        )
    (out / "op_cpu.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    labels = ["x".join(map(str, r["shape_BHTD"])) for r in rows]
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [r["eager_ratio"] for r in rows], 0.4, label="eager")
    ax.bar([i + 0.2 for i in x], [r["auto_ratio"] for r in rows], 0.4, label="auto (compiled)")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("time / SDPA time (fwd+bwd)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "op_cpu.png", dpi=110)


if __name__ == "__main__":
    main()
