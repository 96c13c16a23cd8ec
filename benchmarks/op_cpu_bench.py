"""CPU speed of continuous attention against torch SDPA, measured in the same run.

    python benchmarks/op_cpu_bench.py [--threads 2] [--repeats 5] [--json out.json]

Prints forward+backward time per call for SDPA, the continuous op with backend="torch" (eager)
and backend="auto" (Inductor-compiled on CPU), their ratios to SDPA, and the one-off compilation
time of the compiled path. Run it with nothing else heavy on the machine: ratios measured on a
loaded 2-core machine are meaningless.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from ts_continuum import continuous_attention

# (B, H, T, D): PatchTST on ETTh1 (128 windows x 7 channels, 4 heads of 4, 42 patches); PatchTST
# with 8-dim heads; a step-token encoder at lookback 336 with 64-dim heads.
SHAPES = [(896, 4, 42, 4), (256, 16, 42, 8), (16, 8, 336, 64)]


def _time(fn, repeats: int) -> float:
    fn()  # warm-up (and compilation for the compiled path)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
    row = {"shape_BHTD": list(shape)}
    row["sdpa_s"] = _time(sdpa, repeats)
    row["eager_s"] = _time(eager, repeats)
    row["auto_s"] = _time(auto, repeats)
    row["auto_first_call_s"] = first_call
    row["eager_ratio"] = row["eager_s"] / row["sdpa_s"]
    row["auto_ratio"] = row["auto_s"] / row["sdpa_s"]
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    meta = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(f"torch {meta['torch']}, {meta['threads']} threads, fwd+bwd median of {args.repeats}")
    print(f"{'B,H,T,D':>18} {'sdpa ms':>9} {'eager ms':>9} {'auto ms':>9} {'eager/sdpa':>10} {'auto/sdpa':>10} {'compile s':>9}")
    rows = []
    for shape in SHAPES:
        r = bench(shape, args.repeats)
        rows.append(r)
        print(
            f"{','.join(map(str, shape)):>18} {1e3 * r['sdpa_s']:9.1f} {1e3 * r['eager_s']:9.1f} {1e3 * r['auto_s']:9.1f}"
            f" {r['eager_ratio']:10.2f} {r['auto_ratio']:10.2f} {r['auto_first_call_s']:9.1f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
