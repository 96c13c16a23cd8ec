"""One run of the synthetic control: fit a Forecaster on a draw, forecast the held-out steps, score
them against the simulated series (observed or not)."""

from __future__ import annotations

import json
import time
import warnings

import pandas as pd
import torch

from benchmarks.synthetic.simulation import (HELD_OUT, HORIZON, LOOKBACK, N_WINDOWS, frame_on_grid, simulate,
                                             window_origins)
from ts_continuum import Forecaster

ATTENTIONS = ("softmax", "continuous")
INPUTS = ("observed", "interpolated", "inputs_interpolated")
SIZE = dict(horizon=HORIZON, lookback=LOOKBACK, pos_encoding="rope", freq=1.0, d_model=32, n_heads=4, n_layers=2,
            d_ff=64, enable_progress_bar=False)
MODELS = {"encoder": dict(model="encoder", **SIZE), "patchtst": dict(model="patchtst", patch_len=8, stride=4, **SIZE)}
FIELDS = ["model", "input", "sampling", "attention", "seed", "mse_all", "mae_all", "mse_observed", "n_all",
          "n_observed", "observed_share", "crest_share", "best_epoch", "epochs", "val_mse", "val_curve", "fit_s",
          "threads", "finished_at"]


def forecasts_from_grid(f: Forecaster, observed: pd.DataFrame) -> pd.DataFrame:
    """The baseline's test forecasts: each window's history is interpolated from the observations up to
    its origin only (no look-ahead), so it forecasts the steps the observed-input backtest scores."""
    origins = window_origins(observed)
    parts = []
    for _, at in origins.groupby("rank"):
        upto = observed.merge(at[["unique_id", "cutoff"]], on="unique_id")
        history = frame_on_grid(upto[upto["ds"] <= upto["cutoff"]])
        fc = f.predict(history).rename(columns={"y": "y_forecast"}).merge(at[["unique_id", "cutoff"]], on="unique_id")
        parts.append(fc.merge(observed, on=["unique_id", "ds"], how="left"))
    fc = pd.concat(parts, ignore_index=True).sort_values(["unique_id", "cutoff", "ds"], ignore_index=True)
    return fc[["unique_id", "cutoff", "ds", "y", "y_forecast"]]


def run_one(model: str, input_: str, sampling: str, attention: str, seed: int, max_epochs: int, n_series: int,
            n_steps: int, backend: str = "auto") -> dict:
    """Fit on all but the last HELD_OUT steps of one draw, forecast them, score against the simulation."""
    observed, full = simulate(sampling, seed, n_series, n_steps)
    last = observed.groupby("unique_id")["ds"].transform("max")
    train = observed[observed["ds"] <= last - HELD_OUT]
    t0 = time.perf_counter()
    f = Forecaster(attention=attention, seed=seed, max_epochs=max_epochs, attention_backend=backend,
                   interpolate_inputs=input_ == "inputs_interpolated", **MODELS[model])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(num_workers|does not have many workers).*")
        f.fit(frame_on_grid(train) if input_ == "interpolated" else train, val_size=HELD_OUT)
    fit_s = time.perf_counter() - t0
    if input_ == "interpolated":
        fc = forecasts_from_grid(f, observed)
    else:
        fc = f.backtest(observed, n_windows=N_WINDOWS, step=HORIZON).forecasts
    fc = fc.merge(full[["unique_id", "ds", "y"]].rename(columns={"y": "truth"}), on=["unique_id", "ds"], how="left")
    if fc["truth"].isna().any():
        raise RuntimeError("a forecast time is not one of the simulated steps")
    err = fc["y_forecast"] - fc["truth"]
    seen = fc["y"].notna()
    return dict(model=model, input=input_, sampling=sampling, attention=attention, seed=seed,
                mse_all=float((err**2).mean()), mae_all=float(err.abs().mean()),
                mse_observed=float(((fc["y_forecast"] - fc["y"])[seen] ** 2).mean()), n_all=len(fc),
                n_observed=int(seen.sum()), observed_share=len(observed) / len(full),
                crest_share=float(full.loc[full["observed"], "crest"].mean()),
                best_epoch=f.fit_metrics_.get("best_epoch"), epochs=f.fit_metrics_["epochs"],
                val_mse=f.fit_metrics_.get("val_mse"), val_curve=json.dumps(f.learning_curve_["val_mse"].tolist()),
                fit_s=fit_s, threads=torch.get_num_threads(),
                finished_at=time.strftime("%Y-%m-%d %H:%M:%S"))
