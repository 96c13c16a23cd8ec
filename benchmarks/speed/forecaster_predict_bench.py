"""Latency of ``Forecaster.predict`` for 100 series with lookback 336 (target: under 1 s on 2 CPU cores).

The model is the default PatchTST (continuous attention, RoPE), fitted for a handful of steps
(latency does not depend on how well it is trained). Timed, each the median of ``--repeats`` runs:
``predict(df)`` on regular histories, on irregular ones (30 % of rows dropped, so every window
takes the packed irregular path), and ``predict()`` from the stored training context. Each timing
includes validation, window building, the forward pass and building the answer frame.

Times every torch thread count in ``--threads`` (default 1 and 2) in interleaved rounds (each round
runs every case at every thread count), so a change of machine load during the run affects all
counts alike, and prints the load average: on a shared machine, two intra-op threads competing with
other processes for two cores can be several times slower than one thread (threads wait for each
other), so both figures are reported.

    python -m benchmarks.speed.forecaster_predict_bench [--series 100] [--lookback 336] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

os.environ.setdefault("TS_CONTINUUM_COMPILE", "0")  # predict is eager anyway; keeps the brief fit eager too

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

from ts_continuum import Forecaster  # noqa: E402


def series_frame(n_series: int, length: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    k = np.arange(length)
    ds = pd.date_range("2023-01-01", periods=length, freq="h")
    return pd.concat(
        [pd.DataFrame({"unique_id": f"s{i:03d}", "ds": ds,
                       "y": np.sin(2 * np.pi * k / 24 + i) + 0.1 * rng.standard_normal(length)})
         for i in range(n_series)],
        ignore_index=True,
    )


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_medians(cases: dict, thread_counts: list[int], repeats: int) -> dict[tuple[int, str], float]:
    """Median seconds per (thread count, case), from ``repeats`` rounds that each visit every pair."""
    for threads in thread_counts:  # warm-up: first-call allocations at every thread count
        torch.set_num_threads(threads)
        for fn in cases.values():
            fn()
    times: dict[tuple[int, str], list[float]] = {(t, name): [] for t in thread_counts for name in cases}
    for _ in range(repeats):
        for threads in thread_counts:
            torch.set_num_threads(threads)
            for name, fn in cases.items():
                times[threads, name].append(seconds(fn))
    return {key: statistics.median(values) for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100)
    parser.add_argument("--lookback", type=int, default=336)
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch intra-op thread counts to time")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    length = args.lookback + args.horizon + 200
    df = series_frame(args.series, length)
    irregular = df.sample(frac=0.7, random_state=0).sort_values(["unique_id", "ds"], ignore_index=True)
    f = Forecaster(horizon=args.horizon, lookback=args.lookback, max_epochs=1, limit_train_batches=2,
                   enable_progress_bar=False).fit(df)
    cases = {
        "predict(df), regular": lambda: f.predict(df),
        "predict(df), 30% rows dropped": lambda: f.predict(irregular),
        "predict() from the training context": f.predict,
    }
    print(f"{args.series} series, lookback {args.lookback}, horizon {args.horizon}, {length} rows each; "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs visible, {platform.machine()}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    medians = interleaved_medians(cases, args.threads, args.repeats)
    for threads in args.threads:
        print(f"torch threads: {threads}")
        for name in cases:
            print(f"  {name:38s} median {medians[threads, name] * 1000:7.1f} ms over {args.repeats} interleaved rounds")
        worst = max(medians[threads, name] for name in cases)
        print(f"  slowest: {worst * 1000:.1f} ms -> {'under' if worst < 1.0 else 'OVER'} the 1 s target")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
