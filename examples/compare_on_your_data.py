"""Does continuous attention pay off on your data? Cross-validate it against the alternatives.

Three configurations of the same PatchTST, each scored by ``Forecaster.cross_validation`` on the
same rolling windows (every fit ends before the windows it is scored on):

- continuous attention on the observations as they are (timestamps, gaps and all);
- softmax attention with RoPE at the real timestamps (also sees the gaps);
- softmax attention on inputs linearly interpolated onto the regular grid (the conventional baseline).

With a CSV it reads a long (``unique_id``, ``ds``, ``y``) or wide frame; without one it uses ETTh1's
oil temperature with 30 % of the hourly rows removed at random. Prints MSE/MAE per configuration
beside the persistence forecast's and, with ``--season-length`` (24 on the default hourly data),
the seasonal naive forecast's, and draws them as bars. One seed and a short fit by default: it
shows how to ask the question; an answer wants several seeds and a full budget (the study in
``benchmarks/results/RESULTS.md`` does that for ETT and Weather).

    python examples/compare_on_your_data.py [data.csv] [--horizon 96] [--lookback 336] [--windows 4]
                                            [--season-length 24]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from ts_continuum import Forecaster, load_dataset

CONFIGS = {
    "continuous": dict(attention="continuous", pos_encoding="rope", interpolate_inputs=False),
    "softmax + rope": dict(attention="softmax", pos_encoding="rope", interpolate_inputs=False),
    "softmax, interpolated inputs": dict(attention="softmax", pos_encoding="learned", interpolate_inputs=True),
}


def load(path: Path | None, drop: float) -> pd.DataFrame:
    if path is not None:
        df = pd.read_csv(path)
        return df if "unique_id" in df else df.set_index(pd.to_datetime(df.pop(df.columns[0])))
    oil = load_dataset("ETTh1")[["OT"]]
    return oil[np.random.default_rng(0).random(len(oil)) >= drop]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, nargs="?", default=None, help="default: ETTh1 OT with rows removed")
    parser.add_argument("--drop", type=float, default=0.3, help="rows removed from the default data")
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--lookback", type=int, default=336)
    parser.add_argument("--windows", type=int, default=4, help="cross-validation windows, horizon steps apart")
    parser.add_argument("--season-length", type=int, default=None,
                        help="steps in one cycle, for the seasonal naive baseline (default data: 24)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30, help="training batches per epoch")
    parser.add_argument("--threads", type=int, default=1, help="torch threads; 0 keeps torch's default")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".png"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    df = load(args.csv, args.drop)
    season = 24 if args.season_length is None and args.csv is None else args.season_length

    rows = []
    for name, config in CONFIGS.items():
        f = Forecaster("patchtst", horizon=args.horizon, lookback=args.lookback, max_epochs=args.epochs,
                       limit_train_batches=args.batches, attention_backend="torch", seed=0,
                       enable_progress_bar=False, **config)
        start = time.perf_counter()
        overall = f.cross_validation(df, n_windows=args.windows, season_length=season).overall
        seconds = time.perf_counter() - start
        for target, r in overall.iterrows():
            baselines = {k: r[k] for k in ("naive_mse", "snaive_mse") if k in r}
            rows.append(dict(config=name, target=target, mse=r["mse"], mae=r["mae"], **baselines,
                             points=int(r["n"]), seconds=seconds))
        print(f"{name}: {seconds:.0f} s")
    table = pd.DataFrame(rows)
    print(f"\n{args.windows} windows of {args.horizon} steps, {torch.get_num_threads()} torch thread(s):")
    print(table.round(4).to_string(index=False))

    fig = Figure(figsize=(7, 3.2), layout="constrained")
    ax = fig.subplots()
    first = table[table["target"] == table["target"].iloc[0]]
    ax.bar(first["config"], first["mse"], color=["tab:orange", "tab:blue", "tab:green"])
    ax.axhline(first["naive_mse"].iloc[0], color="grey", ls="--", label="persistence forecast")
    if season:
        ax.axhline(first["snaive_mse"].iloc[0], color="grey", ls=":", label=f"seasonal naive ({season} steps)")
    ax.set_ylabel(f"MSE of {first['target'].iloc[0]}")
    ax.set_title(f"cross-validated, {args.windows} windows x {args.horizon} steps", fontsize="medium")
    ax.legend(fontsize="small")
    fig.savefig(args.out, dpi=110)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
