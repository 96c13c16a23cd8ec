"""Forecast ETTh1's oil temperature (OT) 96 hours ahead from an irregularly sampled history.

30 % of the hourly rows are removed at random and the rest is given to ``Forecaster`` as it is:
no resampling, no filling. Continuous attention integrates over the real time between the
remaining observations. A short CPU fit (a few minutes) on all but the last 24 days of the history,
whose 60 forecasts, 8 hours apart, calibrate conformal prediction intervals; then the forecast of the 96 hours
after the last observation, with 80 % and 95 % intervals, is compared with what ETTh1 actually
recorded and plotted to a PNG.

    python examples/irregular_etth1.py [--epochs 3] [--threads 1] [--out examples/irregular_etth1.png]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ts_continuum import Forecaster, load_dataset

HORIZON, LOOKBACK = 96, 336
CAL_WINDOWS, CAL_STEP = 60, 8  # with 30 % dropped, about 40 errors per horizon step: enough for 95 %


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batches", type=int, default=60, help="training batches per epoch (a random subset)")
    parser.add_argument("--drop", type=float, default=0.3, help="fraction of rows removed")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 suits a small CPU shared with other jobs, 0 keeps torch's default")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_suffix(".png"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    etth1 = load_dataset("ETTh1")[["OT"]]  # hourly, DatetimeIndex 'date'
    known, future = etth1.iloc[:-HORIZON], etth1.iloc[-HORIZON:]
    keep = np.random.default_rng(0).random(len(known)) >= args.drop
    history = known[keep]  # irregular: gaps of one or more hours
    gaps = history.index.to_series().diff().value_counts().sort_index().head(4)
    print(f"history: {len(history)} of {len(known)} hourly rows kept; spacing counts:\n{gaps.to_string()}")

    # eager: on a CPU the one-off compile (25-65 s) costs more than it saves in a fit this short
    f = Forecaster("patchtst", horizon=HORIZON, lookback=LOOKBACK, attention="continuous", pos_encoding="rope",
                   interpolate_inputs=False,  # continuous attention on the raw observations and their times
                   max_epochs=args.epochs, limit_train_batches=args.batches, lr=1e-3, seed=0,
                   attention_backend="torch")
    held_out = (HORIZON + (CAL_WINDOWS - 1) * CAL_STEP) * pd.Timedelta("1h")  # calibration windows' span
    start = time.perf_counter()
    f.fit(history[history.index <= history.index[-1] - held_out], val_size=480)  # last 20 days: best epoch
    best = f.fit_metrics_.get("val_mse", float("nan"))
    print(f"fit: {time.perf_counter() - start:.0f} s, best val MSE (scaled) {best:.3f}")
    f.calibrate(history, n_windows=CAL_WINDOWS, step=CAL_STEP)  # forecasts of data fit did not train on

    pred = f.predict(history, level=[80, 95])  # the 96 hours after the last observation, with intervals
    truth = etth1["OT"].reindex(pred.index)
    err = (pred["OT"] - truth).dropna()
    print(f"forecast {pred.index[0]} .. {pred.index[-1]}: MSE {np.mean(err**2):.3f}, MAE {np.mean(np.abs(err)):.3f} "
          f"(degrees C, {len(err)} hours compared)")
    for level in (80, 95):
        inside = truth.between(pred[f"OT-lo-{level}"], pred[f"OT-hi-{level}"])
        print(f"{level} % interval: {inside.mean():.0%} of those hours inside, mean width "
              f"{(pred[f'OT-hi-{level}'] - pred[f'OT-lo-{level}']).mean():.2f} degrees C (one window: a glimpse, "
              "not a coverage estimate)")

    fig = f.plot(history, pred, history_steps=LOOKBACK)
    ax = fig.axes[0]
    ax.plot(future.index, future["OT"], color="black", lw=0.8, alpha=0.7, label="actual (not seen)")
    ax.legend(loc="upper left", fontsize="small")
    fig.savefig(args.out, dpi=110)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
