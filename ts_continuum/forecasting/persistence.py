"""The saved format of a grid Forecaster (format version 1; the directory: ``saved_directory.py``).

``forecaster.json`` holds the column/format metadata, the nominal step, the training data's typical
spacing, the model config and the series ids beside the constructor arguments; ``state.npz`` the
scalers, each series' last input window (which ``predict()`` without a frame continues) and the
prediction-interval calibration scores if ``calibrate`` was called.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .frames import Panel, FrameSpec
from .grid_fit import GridFit
from .grid_state import GridState
from .intervals import Calibration
from .saved_directory import (ARRAYS, CONFIG, DAMAGED, config_text, id_dtype_of, load_weights, model_config,
                              read_arrays, rebuild, saved_ids, write_directory)
from ..data.scaling import Scaler

FORMAT_VERSION = 1
ARRAY_ENTRIES = ("mean", "std", "bounds", "times", "values")


def save_forecaster(path: Path, overwrite: bool, args: dict, state: GridState, metrics: dict,
                    curve: pd.DataFrame | None) -> Path:
    """Write a fitted grid forecaster (its constructor ``args``, fitted ``state``, fit metrics and
    learning curve) to the directory ``path``, atomically."""
    ctx, calibrated = state.context, state.calibration
    ids, categories = saved_ids(ctx.ids, ctx.id_dtype)
    entries = {
        "spec": state.spec.to_dict(),
        "freq": state.freq,
        "spacing": state.spacing,  # the training data's typical spacing, absent in older saves
        "time": {"kind": ctx.time_kind, "tz": ctx.tz, "dtype": ctx.time_dtype},
        "model_config": model_config(state.model),
        "ids": ids,
        "id_categories": categories,
    }
    text, dropped = config_text(args, entries, FORMAT_VERSION, metrics, curve)
    calibration = {}
    if calibrated is not None:
        calibration = {"calibration": calibrated.scores,
                       **({} if calibrated.until is None else {"calibration_until": calibrated.until})}
    arrays = dict(mean=state.scaler.mean, std=state.scaler.std, bounds=ctx.bounds, times=ctx.times, values=ctx.values,
                  **calibration)
    return write_directory(path, overwrite, text, dropped, state.model, arrays)


def load_grid_state(path: Path, config: dict, fit: GridFit) -> GridState:
    """The fitted state of a saved grid forecaster whose settings are ``fit``."""
    spec, model = rebuild(path, lambda: (FrameSpec.from_dict(config["spec"]), fit.model_cls(**config["model_config"])))
    model = load_weights(path, model)
    arrays = _read_arrays(path / ARRAYS, len(config["ids"]), len(spec.target_cols), fit.horizon)
    scaler = Scaler(arrays["mean"], arrays["std"])
    time = config["time"]
    context = Panel(np.array(config["ids"], dtype=object), arrays["bounds"], arrays["times"], arrays["values"],
                    time["kind"], time["tz"], time["dtype"], id_dtype_of(config))
    state = fit.state(model, spec, config["freq"], scaler, context, config.get("spacing"))
    if "calibration" in arrays:  # absent: never calibrated
        state.calibration = Calibration(arrays["calibration"], arrays.get("calibration_until"))
    return state


def _read_arrays(file: Path, n_series: int, n_targets: int, horizon: int) -> dict[str, np.ndarray]:
    """``state.npz``'s arrays, checked against the series and targets ``forecaster.json`` names."""
    arrays = read_arrays(file, ARRAY_ENTRIES)
    bounds, rows = arrays["bounds"], len(arrays["times"])
    shapes = {"mean": (n_series, n_targets), "std": (n_series, n_targets), "bounds": (n_series + 1,),
              "values": (rows, n_targets)}
    wrong = [f"{k} has shape {arrays[k].shape}, not {shape}" for k, shape in shapes.items() if arrays[k].shape != shape]
    if not wrong and not (bounds[0] == 0 and bounds[-1] == rows and (np.diff(bounds) > 0).all()):
        wrong.append(f"bounds do not split its {rows} rows into {n_series} series")
    calibration = arrays.get("calibration")
    if calibration is not None and (calibration.ndim != 3 or calibration.shape[1:] != (horizon, n_targets)):
        wrong.append(f"calibration has shape {calibration.shape}, not (windows, {horizon}, {n_targets})")
    if wrong:
        raise ValueError(f"{file} does not match {CONFIG} ({n_series} series, {n_targets} targets, horizon "
                         f"{horizon}): {'; '.join(wrong)}; {DAMAGED}")
    return arrays
