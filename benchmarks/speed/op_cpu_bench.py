"""CPU speed of continuous attention against torch SDPA, measured in the same run.

    python -m benchmarks.speed.op_cpu_bench [--threads 2] [--repeats 5] [--out benchmarks/results/op_cpu]

Prints forward+backward time per call for SDPA, the continuous op with backend="torch" (eager)
and backend="auto" (Inductor-compiled on CPU), their ratios to SDPA, and the one-off cost of the
first compiled call, and the minor page faults and system CPU time per call (counts that load does
not move); with ``--out`` also writes op_cpu.json, op_cpu.md and op_cpu.png (ratio to SDPA per
shape). Runs with the entry points' allocator setting (ts_continuum/allocator.py);
TS_CONTINUUM_ALLOCATOR=0 measures without. Run it with nothing else heavy on the machine: ratios
measured on a loaded 2-core machine are meaningless.
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

from ts_continuum import allocator, continuous_attention

from benchmarks.machine import command, cpu_facts, faults_and_system_time, load_average, peak_rss_mb

# (B, H, T, D): PatchTST on ETTh1 (128 windows x 7 channels, 4 heads of 4, 42 patches); PatchTST
# with 8-dim heads; a step-token encoder at lookback 336 with 64-dim heads.
SHAPES = [(896, 4, 42, 4), (256, 16, 42, 8), (16, 8, 336, 64)]


def _interleaved(fns: dict, repeats: int) -> dict[str, list[tuple[float, int, float]]]:
    """(seconds, minor page faults, system CPU seconds) per call of each function, taken in rounds
    that call every function once.

    Interleaving matters on a small shared machine: the same call measured in runs minutes apart
    moved by up to 1.8x here; a ratio of calls made seconds apart is less exposed to that drift,
    and the spread of the per-round ratios shows what is left of it.
    """
    calls = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            faults, system = faults_and_system_time()
            t0 = time.perf_counter()
            fn()
            seconds = time.perf_counter() - t0
            faults_after, system_after = faults_and_system_time()
            calls[name].append((seconds, faults_after - faults, system_after - system))
    return calls


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
    calls = _interleaved({"sdpa": sdpa, "eager": eager, "auto": auto}, repeats)
    times = {name: [t for t, _, _ in c] for name, c in calls.items()}
    row = {"shape_BHTD": list(shape), "auto_first_call_s": first_call}
    for name, ts in times.items():
        row[f"{name}_s"] = statistics.median(ts)
        row[f"{name}_faults"] = statistics.median(f for _, f, _ in calls[name])
        row[f"{name}_system_s"] = statistics.median(s for _, _, s in calls[name])
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
    setting = allocator.keep_freed_memory()  # as the entry points do (TS_CONTINUUM_ALLOCATOR=0: not)
    torch.set_num_threads(args.threads)
    facts = cpu_facts()
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        **facts,
        "processor": f"{facts['cpu']}, {facts['cores']} cores",
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "allocator": setting,
        "load_average_before": load_average(),
    }
    print(f"torch {meta['torch']}, {meta['threads']} threads, fwd+bwd median of {args.repeats} interleaved rounds; "
          f"{setting}; load average {meta['load_average_before']}")
    print(f"{'B,H,T,D':>18} {'sdpa ms':>9} {'eager ms':>9} {'auto ms':>9} {'eager/sdpa':>10} {'auto/sdpa':>10} "
          f"{'compile s':>9} {'auto faults':>11} {'auto sys ms':>11}")
    rows = []
    for shape in SHAPES:
        r = bench(shape, args.repeats)
        rows.append(r)
        print(
            f"{','.join(map(str, shape)):>18} {1e3 * r['sdpa_s']:9.1f} {1e3 * r['eager_s']:9.1f}"
            f" {1e3 * r['auto_s']:9.1f}"
            f" {r['eager_ratio']:10.2f} {r['auto_ratio']:10.2f} {r['auto_first_call_s']:9.1f}"
            f" {r['auto_faults']:11.0f} {1e3 * r['auto_system_s']:11.1f}"
        )
    meta["load_average_after"], meta["peak_rss_mb"] = load_average(), peak_rss_mb()
    print(f"load average {meta['load_average_after']} after; peak RSS {meta['peak_rss_mb']:.0f} MB")
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
        f"already holds it. Allocator: {meta['allocator']}. Load average (1, 5, 15 min) "
        f"{meta['load_average_before']} before, {meta['load_average_after']} after. Page faults (minor) and "
        "system CPU ms per call are medians, SDPA / eager / compiled.",
        "",
        "| B, H, T, D | SDPA ms | eager ms | auto (compiled) ms | eager / SDPA | auto / SDPA | first auto call s | "
        "page faults / call | system ms / call |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        faults = " / ".join(f"{r[f'{n}_faults']:.0f}" for n in ("sdpa", "eager", "auto"))
        system = " / ".join(f"{1e3 * r[f'{n}_system_s']:.1f}" for n in ("sdpa", "eager", "auto"))
        lines.append(
            f"| {', '.join(map(str, r['shape_BHTD']))} | {1e3 * r['sdpa_s']:.1f} | {1e3 * r['eager_s']:.1f} | "
            f"{1e3 * r['auto_s']:.1f} | {_ratio(r, 'eager')} | {_ratio(r, 'auto')} | {r['auto_first_call_s']:.1f} | "
            f"{faults} | {system} |"
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
