"""The saved format of an asynchronous Forecaster (format version 2; the directory: ``saved_directory.py``),
and building one from a trained model.

``forecaster.json`` holds the frame layout and variable names (``query_spec``), the model's class
and config, the fitted series' ids and the kind of their times beside the constructor arguments;
``state.npz`` the per-variable scaling, the fitted series' observations (which ``predict(at=...)``
without a frame continues; none for a forecaster built from a model) and the calibration scores.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..models import QUERY_MODELS
from ..models.query_base import QueryModel
from .forecast_errors import listing
from .frames import require_plain_names
from .intervals import VariableCalibration
from .query_fit import QueryFit
from .query_frames import Observations, QuerySpec
from .query_state import QueryState
from .saved_directory import (ARRAYS, CONFIG, DAMAGED, config_text, id_dtype_of, load_weights, model_config,
                              read_arrays, rebuild, saved_ids, write_directory)
from ..data.scaling import VariableScaler

FORMAT_VERSION = 2
ARRAY_ENTRIES = ("offset", "scale", "offsets", "variable", "times", "values")
CLASSES = {cls.__name__: cls for cls in QUERY_MODELS.values()}


def save_query_forecaster(path: Path, overwrite: bool, args: dict, state: QueryState, metrics: dict,
                          curve: pd.DataFrame | None) -> Path:
    """Write a fitted asynchronous forecaster to the directory ``path``, atomically."""
    ctx = state.context
    ids, categories = saved_ids(np.asarray([] if ctx is None else ctx.ids, dtype=object),
                                None if ctx is None else ctx.id_dtype)
    entries = {
        "query_spec": state.spec.to_dict(),
        "model_class": type(state.model).__name__,
        "model_config": model_config(state.model),
        "ids": ids,
        "id_categories": categories,
        "time": None if ctx is None else {"kind": ctx.time_kind, "tz": ctx.tz, "dtype": ctx.time_dtype},
    }
    text, dropped = config_text(args, entries, FORMAT_VERSION, metrics, curve)
    empty = np.zeros(0)
    arrays = dict(offset=state.scaler.offset, scale=state.scaler.scale,
                  offsets=np.zeros(1, dtype=np.int64) if ctx is None else ctx.offsets,
                  variable=empty.astype(np.int64) if ctx is None else ctx.variable,
                  times=empty if ctx is None else ctx.times, values=empty if ctx is None else ctx.values)
    if state.calibration is not None:
        arrays.update(calibration=state.calibration.scores, calibration_variable=state.calibration.variable)
        if state.calibration.until is not None:
            arrays["calibration_until"] = state.calibration.until
    return write_directory(path, overwrite, text, dropped, state.model, arrays)


def load_query_state(path: Path, config: dict, fit: QueryFit) -> QueryState:
    """The fitted state of a saved asynchronous forecaster whose settings are ``fit``."""
    def build():
        cls = CLASSES[config["model_class"]]
        return QuerySpec.from_dict(config["query_spec"]), cls(**config["model_config"])

    spec, model = rebuild(path, build)
    model = load_weights(path, model)
    file = path / ARRAYS
    arrays = read_arrays(file, ARRAY_ENTRIES)
    C, S, rows = len(spec.variables), len(config["ids"]), len(arrays["times"])
    shapes = {"offset": (C,), "scale": (C,), "offsets": (S + 1,), "variable": (rows,), "values": (rows,)}
    wrong = [f"{k} has shape {arrays[k].shape}, not {shape}" for k, shape in shapes.items() if arrays[k].shape != shape]
    if not wrong and not (arrays["offsets"][-1] == rows and (np.diff(arrays["offsets"]) >= 0).all()):
        wrong.append(f"offsets do not split its {rows} rows into {S} series")
    if getattr(model, "n_variables", C) != C:
        wrong.append(f"the model has {model.n_variables} variables, the spec names {C}")
    if wrong:
        raise ValueError(f"{file} does not match {CONFIG} ({S} series, {C} variables): {'; '.join(wrong)}; {DAMAGED}")
    context = None
    if config["time"] is not None:
        time = config["time"]
        context = Observations(np.array(config["ids"], dtype=object), arrays["offsets"], arrays["variable"],
                               arrays["times"], arrays["values"], time["kind"], time["tz"], time["dtype"],
                               id_dtype_of(config))
    state = fit.state(model, spec, VariableScaler(arrays["offset"], arrays["scale"]), context)
    if "calibration" in arrays:
        state.calibration = VariableCalibration(arrays["calibration"], arrays["calibration_variable"],
                                                arrays.get("calibration_until"))
    return state


def model_parts(model: torch.nn.Module, variables, scale_min, scale_max) -> tuple[str, tuple, VariableScaler, dict]:
    """``Forecaster.from_model``'s checks: the model's name among the Forecaster's models, its
    variable names, its scaler, and its constructor arguments besides those the Forecaster sets (so
    that ``fit`` would retrain the same architecture)."""
    name = next((k for k, v in QUERY_MODELS.items() if type(model) is v), None)
    if not isinstance(model, QueryModel) or name is None:
        raise ValueError(f"from_model takes a trained model of observation sets ({', '.join(CLASSES)}), got "
                         f"{type(model).__name__}; grid models are fitted with Forecaster(model='patchtst', ...)")
    variables = tuple(variables) if not isinstance(variables, str) else (variables,)
    if len(variables) != model.n_variables or len(set(variables)) != len(variables):
        raise ValueError(f"variables must name the model's {model.n_variables} variables once each, in its order; "
                         f"got {len(variables)} ({len(set(variables))} distinct)")
    require_plain_names([("variable", v) for v in variables])
    if (scale_min is None) != (scale_max is None):
        raise ValueError("give scale_min and scale_max together (the per-variable min-max scaling the model was "
                         "trained with), or neither (the model takes values in the data's units)")
    C = model.n_variables
    if scale_min is None:
        scaler = VariableScaler(np.zeros(C), np.ones(C))
    else:
        scaler = VariableScaler.from_range(scale_min, scale_max)
    if len(scaler.offset) != C:
        raise ValueError(f"scale_min and scale_max hold {len(scaler.offset)} values; the model has {C} variables")
    settings = {k: v for k, v in model.config.items() if k not in ("n_variables", "attention", "pos_encoding",
                                                                   "horizon")}
    return name, variables, scaler, settings


def model_spec(times, variables: tuple, id_col, time_col, variable_col, value_col) -> QuerySpec:
    """The frame layout of a forecaster built from a model: the kind of times follows a fixed cutoff
    (numbers for a number, datetimes for a timestamp); otherwise the first frame decides."""
    clash = [c for c in (id_col, time_col, variable_col, value_col) if c in variables]
    if clash:
        raise ValueError(f"variable names {listing(clash)} are also the names of the id, time, variable or value "
                         "column: rename them")
    time_kind, tz_aware = _time_kind(times.cutoff)
    return QuerySpec(id_col, time_col, variables, variable_col, value_col, "columns", time_kind, tz_aware)


def _time_kind(cutoff) -> tuple[str | None, bool | None]:
    """The kind of times a fixed cutoff implies: numbers for a number, datetimes (with its time zone
    awareness) for a timestamp; unknown otherwise (the first frame decides)."""
    if isinstance(cutoff, float):
        return "numeric", False
    if isinstance(cutoff, pd.Timestamp):
        return "datetime", cutoff.tz is not None
    return None, None
