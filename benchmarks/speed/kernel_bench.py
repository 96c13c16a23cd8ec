"""GPU speed and memory of the continuous-attention kernel against SDPA-flash, measured in one run.

    python -m benchmarks.speed.kernel_bench OUT_DIR [--quick] [--dtype bf16]

For each shape it times forward, backward and forward+backward of
  - ``kernel``: continuous_attention(backend="triton") (the public op, sink point included), with
    the default backward (TS_CONTINUUM_DQ=atomic: dQ added with atomics inside the dK/dV pass),
  - ``kernel_deterministic_dq``, ``kernel_dq_pass``: its backward in the reproducible dQ modes
    (TS_CONTINUUM_DQ=deterministic: the same pass, key blocks adding in turn; =pass: a dQ pass),
  - ``sdpa``: torch SDPA restricted to the flash backend (softmax attention, same shapes),
  - ``exact``: continuous_attention(backend="torch"), the exact chunked path, where its cost
    (B·H·T² score elements) stays under --exact-cap,
and reports milliseconds, the speed ratio to SDPA (SDPA time / time, so 0.5 = half SDPA's speed),
softmax-equivalent TFLOP/s (4·B·H·Tq·T·D forward, Tq = T but for the cross group, halved when causal;
backward 2.5x that) and the
peak memory of one forward+backward, also as the memory it adds to what was already allocated
(inputs, and workspaces earlier methods left in the allocator). Each timed repeat is synchronised,
so a time is the op's latency, host-side work included: at the short time-series lengths
(T <= 96) that overhead, not the GPU, dominates both methods. Shapes: long sequences at a constant token count
(T in 256..16384, D in 64/128), queries at their own times (group "cross": Tq in 1, 24, 96 forecast
queries over T up to 4096 keys, non-causal, as many keys in all as the long group's) and time-series
shapes (short T, small D, B·H in the thousands).

Writes OUT_DIR/kernel_bench.json, kernel_bench.md (with date, device, versions and the command)
and kernel_bench.png (speed ratio vs T), rewritten after every shape so that a run cut short by a
time limit still leaves its measurements. The forward's neighbour-access variants were compared
once (commit e8dbcf5, ``--variants``; results in benchmarks/results/2026-11-30-h200/variants) and
the losing ones deleted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from benchmarks.machine import command

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
LONG_TOKENS = 16 * 16384  # B·H·T for the long-sequence shapes (FlashAttention papers: 16k tokens x 16 heads)
LONG_T = [256, 1024, 4096, 16384]
LONG_D = [64, 128]
TS_T = [42, 64, 96, 336, 720]
TS_D = [4, 16, 32, 64]  # 4: PatchTST's published ETT models (the kernel pads it to 16)
TS_HEADS = 16
TS_SERIES = 128 * 21  # PatchTST on Weather: 128 windows x 21 channels, 16 heads
QUICK_TS_T = [42, 96, 336, 720]
QUICK_TS_D = [4, 64]
CROSS_TQ = [1, 24, 96]  # one query (the next value), a day of hours, a forecast horizon
CROSS_T = [256, 1024, 4096]
QUICK_CROSS_T = [1024, 4096]
CROSS_D = [64, 128]
QUICK_CROSS_D = [64]


def shapes(quick: bool) -> list[dict]:
    out = []
    for D in LONG_D:
        for T in LONG_T:
            bh = LONG_TOKENS // T
            out += [dict(group="long", B=bh // 16, H=16, T=T, Tq=T, D=D, causal=c) for c in (False, True)]
    for D in QUICK_CROSS_D if quick else CROSS_D:
        for T in QUICK_CROSS_T if quick else CROSS_T:
            bh = LONG_TOKENS // T
            out += [dict(group="cross", B=bh // 16, H=16, T=T, Tq=Tq, D=D, causal=False) for Tq in CROSS_TQ]
    for D in QUICK_TS_D if quick else TS_D:
        for T in QUICK_TS_T if quick else TS_T:
            B = TS_SERIES // 8 if quick else TS_SERIES  # quick: an eighth of the series, still thousands of B·H
            out += [dict(group="time-series", B=B, H=TS_HEADS, T=T, Tq=T, D=D, causal=c) for c in (False, True)]
    return out


def cuda_time_ms(fn, budget_ms: float) -> float:
    """Median of CUDA-event timings; as many repeats as fit ``budget_ms`` (3 to 100)."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = (time.perf_counter() - t0) * 1e3
    reps = int(min(100, max(3, budget_ms / max(once, 1e-3))))
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


METHODS = ("kernel", "kernel_deterministic_dq", "kernel_dq_pass", "sdpa", "exact")
# The backward variants: TS_CONTINUUM_DQ under which each kernel method runs (continuous_bwd.DQ_MODES)
DQ_MODE_OF = {"kernel": "atomic", "kernel_deterministic_dq": "deterministic", "kernel_dq_pass": "pass"}


def methods(causal: bool):
    from ts_continuum import continuous_attention

    def sdpa(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    kernel = lambda q, k, v: continuous_attention(q, k, v, causal=causal, backend="triton")  # noqa: E731
    return {
        "kernel": kernel,  # each run under dq_mode(DQ_MODE_OF[name]) by run_shape
        "kernel_deterministic_dq": kernel,
        "kernel_dq_pass": kernel,
        "sdpa": sdpa,
        "exact": lambda q, k, v: continuous_attention(q, k, v, causal=causal, backend="torch"),
    }


@contextlib.contextmanager
def dq_mode(mode: str):
    """The kernel's backward in dQ mode ``mode`` (TS_CONTINUUM_DQ; continuous_bwd.DQ_MODES)."""
    from ts_continuum.kernels import continuous_bwd

    old, continuous_bwd.DQ_MODE = continuous_bwd.DQ_MODE, mode
    try:
        yield
    finally:
        continuous_bwd.DQ_MODE = old


def measure(attn, q, k, v, do, budget_ms: float, modes: tuple[str, ...]) -> dict:
    """Times of ``modes`` (fwd, bwd with a retained graph, fwd_bwd) and the fwd+bwd peak memory."""
    inputs = (q, k, v)
    row = {}
    if "fwd" in modes:
        row["fwd_ms"] = cuda_time_ms(lambda: attn(q, k, v), budget_ms)
    if "bwd" in modes:
        out = attn(q, k, v)
        row["bwd_ms"] = cuda_time_ms(lambda: torch.autograd.grad(out, inputs, do, retain_graph=True), budget_ms)
        del out
    if "fwd_bwd" in modes:
        row["fwd_bwd_ms"] = cuda_time_ms(lambda: torch.autograd.grad(attn(q, k, v), inputs, do), budget_ms)
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated()  # inputs, plus whatever earlier methods left allocated
    torch.cuda.reset_peak_memory_stats()
    torch.autograd.grad(attn(q, k, v), inputs, do)
    torch.cuda.synchronize()
    row["peak_mib"] = torch.cuda.max_memory_allocated() / 2**20
    row["added_mib"] = row["peak_mib"] - held / 2**20
    return row


def softmax_flops(s: dict) -> dict:
    fwd = 4 * s["B"] * s["H"] * s["Tq"] * s["T"] * s["D"] * (0.5 if s["causal"] else 1.0)
    return dict(fwd_ms=fwd, bwd_ms=2.5 * fwd, fwd_bwd_ms=3.5 * fwd)


def run_shape(s: dict, dtype, exact_cap: float, budget_ms: float, quick: bool) -> list[dict]:
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, do = (
        torch.randn(s["B"], s["H"], rows, s["D"], device="cuda", generator=g).to(dtype)
        for rows in (s["Tq"], s["T"], s["T"], s["Tq"])
    )
    for t in (q, k, v):
        t.requires_grad_(True)
    rows = []
    flops = softmax_flops(s)
    for name, attn in methods(s["causal"]).items():
        row = dict(s, method=name)
        if name == "exact" and s["B"] * s["H"] * s["Tq"] * s["T"] > exact_cap:
            row["skipped"] = f"B·H·Tq·T above --exact-cap {exact_cap:.0e}"
        else:
            try:
                modes = ("fwd", "bwd", "fwd_bwd")
                if name in DQ_MODE_OF and name != "kernel":
                    modes = ("bwd", "fwd_bwd")  # the forward is the kernel's
                elif quick and name == "exact":
                    modes = ("fwd_bwd",)
                with dq_mode(DQ_MODE_OF.get(name, "atomic")):
                    row.update(measure(attn, q, k, v, do, budget_ms, modes))
                for key, f in flops.items():
                    if key in row:
                        row[key.replace("_ms", "_tflops")] = f / (row[key] * 1e-3) / 1e12
            except Exception as exc:  # e.g. out of memory, or SDPA-flash refusing a shape
                row["skipped"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            torch.cuda.empty_cache()
        rows.append(row)
    by = {r["method"]: r for r in rows}
    for r in rows:
        for key in ("fwd_ms", "bwd_ms", "fwd_bwd_ms"):
            if key in r and key in by["sdpa"]:
                r[key.replace("_ms", "_ratio")] = by["sdpa"][key] / r[key]
    for name in DQ_MODE_OF:
        if "fwd_bwd_ms" in by[name] and "fwd_bwd_ms" in by["exact"]:
            by[name]["speedup_vs_exact"] = by["exact"]["fwd_bwd_ms"] / by[name]["fwd_bwd_ms"]
        if name != "kernel_dq_pass" and "bwd_ms" in by[name] and "bwd_ms" in by["kernel_dq_pass"]:
            by[name]["bwd_speedup_vs_pass"] = by["kernel_dq_pass"]["bwd_ms"] / by[name]["bwd_ms"]
    return rows


def environment(argv: list[str], dtype: str) -> dict:
    import triton

    return dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        device=torch.cuda.get_device_name(),
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        dtype=dtype,
        commit=git_commit(),
        command=command(__spec__.name, argv[1:]),
    )


def git_commit() -> str:
    """The checkout's commit (with "+changes" when the tree differs), or "unknown" (e.g. a copy without .git)."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def fmt(x, digits=2):
    return "" if x is None else f"{x:.{digits}f}"


def write_markdown(path: Path, env: dict, rows: list[dict]) -> None:
    lines = [
        "# Continuous-attention kernel vs SDPA-flash",
        "",
        *(f"- {k}: `{v}`" for k, v in env.items()),
        "",
        "ratio = SDPA time / method time (1.0 = SDPA's speed); TFLOP/s = softmax-equivalent FLOPs / time; "
        "peak = max memory allocated during one forward+backward, inputs included; added = peak minus what was "
        "allocated just before (inputs and earlier methods' workspaces); times are synchronised per repeat, so at "
        "T <= 96 they are mostly host-side latency; x exact = exact torch path time / kernel time, "
        "forward+backward; kernel = the default backward (TS_CONTINUUM_DQ=atomic), kernel_deterministic_dq and "
        "kernel_dq_pass = TS_CONTINUUM_DQ=deterministic and =pass; bwd x pass = the dQ-pass backward time / this "
        "method's backward time (above 1: faster than the dQ pass).",
        "",
        "| group | B | H | Tq | T | D | causal | method | fwd ms | bwd ms | fwd+bwd ms | fwd ratio | bwd ratio "
        "| fwd+bwd ratio | fwd+bwd TFLOP/s | peak MiB | added MiB | fwd+bwd x exact | bwd x pass |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        head = (f"| {r['group']} | {r['B']} | {r['H']} | {r.get('Tq', r['T'])} | {r['T']} | {r['D']} | {r['causal']} "
                f"| {r['method']} ")
        if "skipped" in r:
            lines.append(head + f"| skipped: {r['skipped']} |" + " |" * 10)
            continue
        cells = [fmt(r.get("fwd_ms"), 3), fmt(r.get("bwd_ms"), 3), fmt(r.get("fwd_bwd_ms"), 3), fmt(r.get("fwd_ratio")),
                 fmt(r.get("bwd_ratio")), fmt(r.get("fwd_bwd_ratio")), fmt(r.get("fwd_bwd_tflops"), 1),
                 fmt(r["peak_mib"], 0), fmt(r.get("added_mib"), 0), fmt(r.get("speedup_vs_exact"), 1),
                 fmt(r.get("bwd_speedup_vs_pass"))]
        lines.append(head + "| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")


def write_plot(path: Path, env: dict, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    series: dict[tuple, list] = {}
    for r in rows:
        if r["method"] in DQ_MODE_OF and "fwd_bwd_ratio" in r:
            queries = f" Tq={r['Tq']}" if r["group"] == "cross" else ""
            key = (r["method"], r["group"] + queries, r["D"], r["causal"])
            series.setdefault(key, []).append((r["T"], r["fwd_bwd_ratio"]))
    lines = {"long": "-", "time-series": "--"}
    for (method, group, D, causal), pts in sorted(series.items()):
        pts.sort()
        style = lines.get(group, ":") + {"kernel": "o", "kernel_deterministic_dq": "x"}.get(method, "+")
        dq = f"dQ {DQ_MODE_OF[method]}"
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style,
                label=f"{group} D={D} {'causal' if causal else 'bidir'}, {dq}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length T (keys)")
    ax.set_ylabel("forward+backward speed / SDPA-flash")
    ax.set_title(f"continuous kernel vs SDPA-flash, {env['device']}, {env['date'][:10]}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.splitlines()[0])
    p.add_argument("out_dir", type=Path)
    p.add_argument("--quick", action="store_true",
                   help="fewer and smaller time-series shapes, shorter timing budgets, exact path timed fwd+bwd only")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--exact-cap", type=float, default=None,
                   help="largest B·H·Tq·T for the exact path (default 1.5e9 with --quick, else 2^33)")
    args = p.parse_args(argv[1:])
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        print("kernel_bench needs a CUDA GPU and compiled Triton (TRITON_INTERPRET unset)", file=sys.stderr)
        return 2
    from ts_continuum.kernels import tuning

    budget_ms = 60.0 if args.quick else 200.0
    exact_cap = args.exact_cap or (1.5e9 if args.quick else 2.0**33)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    env = environment(argv, args.dtype)
    rows: list[dict] = []
    for s in shapes(args.quick):
        t0 = time.perf_counter()
        rows += run_shape(s, DTYPES[args.dtype], exact_cap, budget_ms, args.quick)
        by = {r["method"]: r for r in rows[-len(METHODS):]}
        ratios = ", ".join(f"{DQ_MODE_OF[m]} dQ {fmt(by[m].get('fwd_bwd_ratio'))}" for m in DQ_MODE_OF)
        print(f"{s} kernel fwd+bwd ratio: {ratios} ({time.perf_counter() - t0:.1f}s)", flush=True)
        tuned = tuning.chosen_configs()
        text = json.dumps(dict(env=env, rows=rows, tuned=tuned), indent=1)
        replace_atomically(args.out_dir / "kernel_bench.json", Path.write_text, text)
        replace_atomically(args.out_dir / "kernel_bench.md", write_markdown, env, rows)
        replace_atomically(args.out_dir / "kernel_bench.png", write_plot, env, rows)
    return 0


def replace_atomically(path: Path, write, *args) -> None:
    """``write(tmp, *args)`` then rename over ``path``: a run stopped at its time limit (gpu_check.sh's
    ``timeout``) leaves the previous shape's complete file, never a half-written one."""
    tmp = path.with_name(f".{path.stem}.partial{path.suffix}")
    try:
        write(tmp, *args)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
