"""Saving a fitted Forecaster to one directory and loading it back.

Layout: ``forecaster.json`` (format name and version, library version, the constructor arguments,
column/format metadata, nominal step, model config, series ids), ``weights.pt`` (the model's
state dict, read back with ``weights_only=True``) and ``state.npz`` (scalers and each series' last
input window, which ``predict()`` without a frame continues). A format-version bump marks layouts
this code cannot read; such directories are refused rather than half-read.
"""

from __future__ import annotations

import datetime as dt
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import ts_continuum

from .frames import FrameSpec, Panel
from .scaling import Scaler

FORMAT = "ts-continuum-forecaster"
FORMAT_VERSION = 1
CONFIG, WEIGHTS, ARRAYS = "forecaster.json", "weights.pt", "state.npz"


def _json_safe(args: dict) -> tuple[dict, list[str]]:
    kept, dropped = {}, []
    for name, value in args.items():
        if name == "freq" and isinstance(value, (pd.Timedelta, dt.timedelta, np.timedelta64, pd.offsets.Tick)):
            value = f"{pd.Timedelta(value).value}ns"  # a duration as an offset alias that parse_freq reads back
        try:
            json.dumps(value)
            kept[name] = value
        except TypeError:
            dropped.append(name)
    return kept, dropped


def _plain(x):
    return x.item() if isinstance(x, np.generic) else x


def save_forecaster(f, path: Path, overwrite: bool) -> Path:
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a directory; choose a directory path")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise ValueError(f"{path} is not empty; pass overwrite=True to replace a saved forecaster, "
                         "or choose a new path")
    ids = [_plain(i) for i in f.context_.ids]
    if not all(i is None or isinstance(i, (str, int, float)) for i in ids):
        raise ValueError("series ids must be strings or numbers to be saved; "
                         "convert the id column, e.g. with astype(str)")
    args, dropped = _json_safe(f.init_args)
    if dropped:
        warnings.warn(f"not saved (not JSON-serialisable): {', '.join(dropped)}; pass them again to Forecaster.load's "
                      "result if you train it further", UserWarning, stacklevel=3)
    ctx = f.context_
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": ts_continuum.__version__,
        "forecaster": args,
        "spec": f.spec_.to_dict(),
        "freq": f.freq_,
        "time": {"kind": ctx.time_kind, "tz": ctx.tz, "dtype": ctx.time_dtype},
        "model_config": dict(f.model_.config),
        "ids": ids,
        "fit_metrics": getattr(f, "fit_metrics_", {}),
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG).write_text(json.dumps(config, indent=2))
    torch.save(f.model_.state_dict(), path / WEIGHTS)
    np.savez(path / ARRAYS, mean=f.scaler_.mean, std=f.scaler_.std,
             bounds=ctx.bounds, times=ctx.times, values=ctx.values)
    return path


def load_forecaster(cls, path: Path):
    config_file = path / CONFIG
    if not config_file.is_file():
        raise ValueError(f"{path} is not a saved Forecaster (no {CONFIG}); give the directory passed to save()")
    try:
        config = json.loads(config_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{config_file} is not valid JSON ({exc}); the directory is damaged") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise ValueError(f"{path} is not a saved Forecaster ({CONFIG} lacks format {FORMAT!r})")
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path} was saved in format version {config.get('format_version')!r} by ts-continuum "
            f"{config.get('library_version')}; this ts-continuum {ts_continuum.__version__} reads version "
            f"{FORMAT_VERSION}: load it with the version that saved it"
        )
    missing = [name for name in (WEIGHTS, ARRAYS) if not (path / name).is_file()]
    if missing:
        raise ValueError(f"{path} is an incomplete saved Forecaster: {', '.join(missing)} missing")
    f = cls(**config["forecaster"])
    model = f.model_cls(**config["model_config"])
    model.load_state_dict(torch.load(path / WEIGHTS, map_location="cpu", weights_only=True))
    with np.load(path / ARRAYS) as arrays:
        scaler = Scaler(arrays["mean"], arrays["std"])
        time = config["time"]
        context = Panel(np.array(config["ids"], dtype=object), arrays["bounds"], arrays["times"],
                        arrays["values"], time["kind"], time["tz"], time["dtype"])
    f._set_fitted(model.eval(), FrameSpec.from_dict(config["spec"]), config["freq"], scaler, context)
    f.fit_metrics_ = config.get("fit_metrics", {})
    return f
