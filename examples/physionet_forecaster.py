"""PhysioNet 2012 ICU stays with the asynchronous Forecaster: raw records in, forecasts at your own times out.

    # evaluate a saved forecaster (Forecaster.save), or a study run's checkpoint as it is
    python examples/physionet_forecaster.py --model path/to/saved-forecaster
    python examples/physionet_forecaster.py --model benchmarks/results/physionet2012/best/model.ckpt
    # or fit a small one first (a few CPU minutes), then evaluate it the same way
    python examples/physionet_forecaster.py --max-stays 600 --epochs 2

The frame is the bundled long file as a practitioner holds such data: one row per observation
(``unique_id`` = the stay, ``ds`` = hours since admission, ``variable``, ``value``), nothing resampled.
The stays are split as the study splits them (``PhysioNetDataModule``: 60/20/20 % with
``--split-seed``, on a random subset of ``--max-stays`` stays if given). The test MSE printed is the
study's metric: the squared error per variable on min-max scaled values, averaged over the variables,
for every observation of hours 24-48 forecast from the stay's first 24 hours; the Forecaster's
``backtest`` computes it (``overall["scaled_mse"].mean()``), so for a model saved from a study run on
the full history (``history_keep`` 1; give the run's ``--split-seed`` and ``--max-stays``) it
reproduces that run's test MSE. Save such a run's model with ``Forecaster.from_model(model,
variables=dm.variables, scale_min=dm.scale_min, scale_max=dm.scale_max, horizon=24, cutoff=24,
duplicates="mean").save(path)`` (``dm``: the run's ``PhysioNetDataModule``), or point ``--model`` at the
run's checkpoint, which holds the model, the scaling and the split: ``checkpoint_forecaster`` does the
same. Then one test stay is forecast at hourly times of your choosing and drawn (``--out``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ts_continuum import Forecaster, load_dataset
from ts_continuum.data.physionet import VARIABLES, PhysioNetDataModule
from ts_continuum.training.query_module import QueryForecastingModule

HISTORY_HOURS = 24.0  # the protocol's forecast origin: hours since admission
SHOWN = ["HR", "MAP", "Temp", "Glucose"]


def physionet_frame(stays: np.ndarray) -> pd.DataFrame:
    """The bundled records of ``stays`` as a long frame: unique_id, ds (hours since admission), variable, value."""
    raw = load_dataset("physionet2012")
    raw = raw[raw["record_id"].isin(stays) & raw["parameter"].notna()]
    return pd.DataFrame({"unique_id": raw["record_id"].to_numpy(), "ds": raw["time"].to_numpy() / 60.0,
                         "variable": raw["parameter"].astype(str).to_numpy(), "value": raw["value"].to_numpy()})


def checkpoint_forecaster(path: Path) -> tuple[Forecaster, dict]:
    """A study run's checkpoint (``ts-continuum fit`` or the study runner) as a Forecaster, with the
    run's split of stays: the model, its variables and the min-max scaling of its training stays."""
    module = QueryForecastingModule.from_checkpoint(str(path))
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    data = ckpt.get(PhysioNetDataModule.__qualname__)
    if not data:
        raise SystemExit(f"{path} holds no PhysioNet data state (scaling and split): not a PhysioNet run's checkpoint")
    keep = ckpt.get("datamodule_hyper_parameters", {}).get("history_keep", 1.0)
    if keep != 1.0:
        raise SystemExit(f"{path} was trained and tested on thinned histories (history_keep={keep}); the raw records "
                         "hold every observation, so its test MSE would not be reproduced")
    f = Forecaster.from_model(module.model, variables=VARIABLES, scale_min=data["scale_min"],
                              scale_max=data["scale_max"], horizon=24.0, cutoff=HISTORY_HOURS, duplicates="mean")
    return f, {k: np.asarray(v) for k, v in data["split_ids"].items()}


def fit_small(frame: pd.DataFrame, epochs: int, seed: int) -> Forecaster:
    """The three calls, first of them: a small asynchronous model on the training stays, cut at hour 24
    (the published protocol), a quarter of the stays held out for validation."""
    f = Forecaster(model="async", horizon=24.0, cutoff=HISTORY_HOURS, duplicates="mean", d_model=32, n_heads=4,
                   n_layers=2, d_ff=64, max_epochs=epochs, batch_size=32, seed=seed, enable_progress_bar=False,
                   attention_backend="torch", gradient_clip_val=1.0)
    return f.fit(frame, val_size=0.25)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a saved Forecaster (Forecaster.save) or a study run's .ckpt; "
                        "default: fit a small one")
    parser.add_argument("--split-seed", type=int, default=0, help="the study's split seed")
    parser.add_argument("--max-stays", type=int, help="a random subset of stays, as the study's max_stays")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of the small model (without --model)")
    parser.add_argument("--out", type=Path, default=Path("physionet_forecast.png"), help="the figure of one stay")
    args = parser.parse_args(argv)

    start = time.perf_counter()
    if args.model is not None and args.model.suffix == ".ckpt":
        f, split_ids = checkpoint_forecaster(args.model)  # the run's own split
    else:
        split = PhysioNetDataModule(split_seed=args.split_seed, max_stays=args.max_stays)
        split.setup("test")  # the study's stays and split; the records themselves are read as a plain frame below
        split_ids = split.split_ids
        if args.model is not None:
            f = Forecaster.load(args.model)
        else:
            f = fit_small(physionet_frame(np.concatenate([split_ids["train"], split_ids["val"]])), args.epochs,
                          args.split_seed)
    test = physionet_frame(split_ids["test"])
    unknown = ~test["variable"].isin(f.spec_.variables)
    if unknown.any():  # a small fit may never have seen a rare variable
        print(f"leaving out {int(unknown.sum())} test observations of variables the model never saw")
        test = test[~unknown]

    result = f.backtest(test)  # history before hour 24, every later observation scored
    scores = {"test_mse": float(result.overall["scaled_mse"].mean()),
              "test_mae": float(result.overall["scaled_mae"].mean()),
              "stays": len(split_ids["test"]), "queries": int(result.overall["n"].sum())}
    print(result.overall[["n", "scaled_mse", "naive_mae", "mae"]].sort_values("n", ascending=False).head(10))
    print(f"test MSE {scores['test_mse']:.6f}, MAE {scores['test_mae']:.6f} (per-variable, min-max scaled) over "
          f"{scores['stays']} test stays and {scores['queries']} queries, {time.perf_counter() - start:.0f} s")

    # the last call: one stay's first 24 hours in, forecasts at the hours you choose out
    stay = split_ids["test"][0]
    records = test[test["unique_id"] == stay]
    history = records[records["ds"] < HISTORY_HOURS]
    at = pd.DataFrame([(stay, hour, name) for hour in np.arange(25.0, 48.5, 1.0) for name in SHOWN],
                      columns=["unique_id", "ds", "variable"])
    forecast = f.predict(history, at=at)
    print(forecast.pivot(index="ds", columns="variable", values="value").head(4))
    f.plot(records, forecast, id=stay, variables=SHOWN).savefig(args.out)
    print(f"figure: {args.out}")
    return scores


if __name__ == "__main__":
    main(sys.argv[1:])
