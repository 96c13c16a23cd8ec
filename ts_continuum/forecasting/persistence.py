"""Saving a fitted Forecaster to one directory and loading it back.

Layout: ``forecaster.json`` (format name and version, library version, the constructor arguments,
column/format metadata, nominal step, model config, series ids, fit metrics and learning curve),
``weights.pt`` (the model's state dict, read back with ``weights_only=True``) and ``state.npz``
(scalers, each series' last input window, which ``predict()`` without a frame continues, and the
prediction-interval calibration scores if ``calibrate`` was called). A
format-version bump marks layouts this code cannot read; such directories are refused rather than
half-read.

A save is written into a fresh sibling directory and renamed into place at the end, so a failure
leaves no partial directory and never mixes new files with old ones. ``overwrite=True`` replaces
only a directory holding nothing but a saved forecaster: anything else there is the user's.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import uuid
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import ts_continuum

from .errors import user_stacklevel
from .frames import FrameSpec, Panel
from .grid_fit import GridFit
from .grid_state import GridState
from .intervals import Calibration
from .scaling import Scaler
from ..training.learning_curve import learning_curve_frame
from .steps import parse_freq

FORMAT = "ts-continuum-forecaster"
FORMAT_VERSION = 1
CONFIG, WEIGHTS, ARRAYS = "forecaster.json", "weights.pt", "state.npz"


def _to_json(value):
    """``value`` with numpy scalars and arrays as Python numbers and lists, tuples as lists: what
    ``json`` writes (and reads back) as plain values; anything else is left for ``json`` to refuse."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {_to_json(k): _to_json(v) for k, v in value.items()}
    return value


def _json_safe(args: dict) -> tuple[dict, list[str]]:
    """The JSON-serialisable arguments (as plain JSON values) and the names of the others."""
    kept, dropped = {}, []
    for name, value in args.items():
        if name == "freq" and isinstance(value, (pd.Timedelta, dt.timedelta, np.timedelta64, pd.offsets.BaseOffset)):
            value = f"{parse_freq(value, 'datetime')}ns"  # a duration as an offset alias that parse_freq reads back
        value = _to_json(value)
        try:
            json.dumps(value, allow_nan=False)  # NaN and infinity are not JSON: other readers refuse them
            kept[name] = value
        except (TypeError, ValueError):
            dropped.append(name)
    return kept, dropped


def _check_target(path: Path, overwrite: bool) -> None:
    """Refuse a path whose contents a save would lose: a file, or a non-empty directory unless
    ``overwrite`` and it holds only a saved forecaster's files."""
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a directory; choose a directory path")
    names = {p.name for p in path.iterdir()} if path.is_dir() else set()
    if not names:
        return
    if not overwrite:
        raise ValueError(f"{path} is not empty; pass overwrite=True to replace a saved forecaster, "
                         "or choose a new path")
    if CONFIG not in names:
        raise ValueError(f"{path} is not empty and holds no saved forecaster (no {CONFIG}); overwrite=True "
                         "only replaces a directory written by save(): choose a new path")
    foreign = sorted(names - {CONFIG, WEIGHTS, ARRAYS})
    if foreign:
        raise ValueError(f"{path} holds files save() did not write ({', '.join(foreign[:5])}); overwriting would "
                         "delete them: move them elsewhere or choose a new path")


def _config(args: dict, state: GridState, metrics: dict, curve: pd.DataFrame | None) -> tuple[str, list[str]]:
    """``forecaster.json``'s text and the constructor arguments left out of it; raises before anything
    is written if the forecaster cannot be saved."""
    ids = [_to_json(i) for i in state.context.ids]
    categorical = state.context.id_dtype
    categories = [] if categorical is None else [_to_json(c) for c in categorical.categories]
    if not all(i is None or isinstance(i, (str, int)) or isinstance(i, float) and math.isfinite(i)
               for i in ids + categories):
        raise ValueError("series ids must be strings or finite numbers to be saved; "
                         "convert the id column, e.g. with astype(str)")
    args, dropped = _json_safe(args)
    model_config, unsaved = _json_safe(dict(state.model.config))
    if unsaved:
        raise ValueError(f"model arguments {', '.join(unsaved)} are not JSON-serialisable or not finite, so a saved "
                         "model could not be rebuilt; pass plain finite numbers and strings")
    ctx = state.context
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": ts_continuum.__version__,
        "forecaster": args,
        "spec": state.spec.to_dict(),
        "freq": state.freq,
        "spacing": state.spacing,  # the training data's typical spacing, absent in older saves
        "time": {"kind": ctx.time_kind, "tz": ctx.tz, "dtype": ctx.time_dtype},
        "model_config": model_config,
        "ids": ids,
        # categorical ids answer as the same categorical (absent in older saves: plain values)
        "id_categories": None if categorical is None else {"categories": categories,
                                                           "ordered": bool(categorical.ordered)},
        "fit_metrics": _finite_or_null(metrics),
        "learning_curve": [] if curve is None else [_finite_or_null(row) for row in curve.to_dict("records")],
    }
    return json.dumps(_to_json(config), indent=2, allow_nan=False), dropped


def _finite_or_null(record: dict) -> dict:
    """``record`` with NaN and infinite floats as None (JSON null; read back as NaN): a metric of an
    epoch without validation, or of one whose loss diverged."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in _to_json(record).items()}


def _write(state: GridState, text: str, directory: Path) -> None:
    ctx, calibrated = state.context, state.calibration
    (directory / CONFIG).write_text(text)
    torch.save(state.model.state_dict(), directory / WEIGHTS)
    calibration = {}
    if calibrated is not None:
        calibration = {"calibration": calibrated.scores,
                       **({} if calibrated.until is None else {"calibration_until": calibrated.until})}
    np.savez(directory / ARRAYS, mean=state.scaler.mean, std=state.scaler.std,
             bounds=ctx.bounds, times=ctx.times, values=ctx.values, **calibration)


def _move_into_place(new: Path, path: Path) -> None:
    """Rename ``new`` to ``path``; an existing ``path`` (checked by ``_check_target``) is moved aside
    first and deleted only once ``new`` is in place."""
    if not path.exists():
        new.rename(path)
        return
    old = path.with_name(f".{path.name}.replaced-{uuid.uuid4().hex[:8]}")
    path.rename(old)
    try:
        new.rename(path)
    except BaseException:
        old.rename(path)
        raise
    shutil.rmtree(old, ignore_errors=True)


def save_forecaster(path: Path, overwrite: bool, args: dict, state: GridState, metrics: dict,
                    curve: pd.DataFrame | None) -> Path:
    """Write a fitted forecaster (its constructor ``args``, fitted ``state``, fit metrics and learning
    curve) to the directory ``path``, atomically."""
    target = path.resolve()  # a symlinked directory is replaced where it points, not the link
    _check_target(target, overwrite)
    text, dropped = _config(args, state, metrics, curve)
    if dropped:
        warnings.warn(f"not saved (not JSON-serialisable or not finite): {', '.join(dropped)}; pass them again to "
                      "Forecaster.load's result if you train it further", UserWarning, stacklevel=user_stacklevel())
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.saving-{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        _write(state, text, staging)
        _move_into_place(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return path


def read_saved(path: Path) -> dict:
    """``forecaster.json`` of the saved forecaster in ``path``, checked: a directory that is not one,
    is incomplete or has another format version is a ValueError naming the file and the problem."""
    config = _read_config(path)
    missing = [name for name in (WEIGHTS, ARRAYS) if not (path / name).is_file()]
    if missing:
        raise ValueError(f"{path} is an incomplete saved Forecaster: {', '.join(missing)} missing")
    return config


def rebuild(path: Path, build):
    """``build()``'s result (the forecaster and model the config describes); the error of a config
    this version cannot build names the file."""
    try:
        return build()
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ValueError(f"{path / CONFIG} does not describe a forecaster this ts-continuum can build ({exc}); "
                         f"{DAMAGED}") from None


def load_weights(path: Path, model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with the saved weights, in their precision (a model trained at "64-true" predicts at it)."""
    state = _read_weights(path / WEIGHTS, model)
    return model.to(next(v.dtype for v in state.values() if v.is_floating_point())).eval()


def load_grid_state(path: Path, config: dict, fit: GridFit) -> GridState:
    """The fitted state of a saved grid forecaster whose settings are ``fit``."""
    spec, model = rebuild(path, lambda: (FrameSpec.from_dict(config["spec"]), fit.model_cls(**config["model_config"])))
    model = load_weights(path, model)
    arrays = _read_arrays(path / ARRAYS, len(config["ids"]), len(spec.target_cols), fit.horizon)
    scaler = Scaler(arrays["mean"], arrays["std"])
    time = config["time"]
    categorical = config.get("id_categories")
    id_dtype = None if categorical is None else pd.CategoricalDtype(categorical["categories"], categorical["ordered"])
    context = Panel(np.array(config["ids"], dtype=object), arrays["bounds"], arrays["times"], arrays["values"],
                    time["kind"], time["tz"], time["dtype"], id_dtype)
    state = fit.state(model, spec, config["freq"], scaler, context, config.get("spacing"))
    if "calibration" in arrays:  # absent: never calibrated
        state.calibration = Calibration(arrays["calibration"], arrays.get("calibration_until"))
    return state


def saved_fit_record(config: dict) -> tuple[dict, pd.DataFrame]:
    """The saved fit metrics (null back to NaN) and learning curve (empty in older saves)."""
    metrics = {k: math.nan if v is None else v for k, v in config.get("fit_metrics", {}).items()}
    return metrics, learning_curve_frame(config.get("learning_curve", []))


DAMAGED = "the directory is damaged or was changed since save(): save the forecaster again"
CONFIG_ENTRIES = ("forecaster", "spec", "freq", "time", "model_config", "ids")  # every save writes them
ARRAY_ENTRIES = ("mean", "std", "bounds", "times", "values")


def _read_config(path: Path) -> dict:
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
    missing = [k for k in CONFIG_ENTRIES if k not in config]
    if missing:
        raise ValueError(f"{config_file} lacks {', '.join(map(repr, missing))}; {DAMAGED}")
    return config


def _read_weights(file: Path, model: torch.nn.Module) -> dict:
    """The state dict in ``file``, loaded into ``model``. torch's own message for a damaged file
    advises ``weights_only=False``, which would run whatever code the file holds: not repeated."""
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # whatever torch makes of a damaged file, it holds no weights to use
        raise ValueError(f"{file} cannot be read as saved weights ({type(exc).__name__}); {DAMAGED}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{file} holds no state dict of model weights; {DAMAGED}")
    expected = model.state_dict()
    resized = [f"{k} of shape {tuple(state[k].shape)} instead of {tuple(v.shape)}"
               for k, v in expected.items() if k in state and state[k].shape != v.shape]
    problems = [_some(f"{len(names)} {what}", names) for what, names in (
        ("missing", [k for k in expected if k not in state]),
        ("unexpected", [k for k in state if k not in expected]),
        ("resized", resized)) if names]
    if problems:
        raise ValueError(f"{file} holds the weights of another model than {CONFIG} describes "
                         f"({'; '.join(problems)}); {DAMAGED}")
    model.load_state_dict(state)
    return state


def _some(what: str, names: list[str], shown: int = 3) -> str:
    return f"{what}: {', '.join(names[:shown])}{' ...' if len(names) > shown else ''}"


def _read_arrays(file: Path, n_series: int, n_targets: int, horizon: int) -> dict[str, np.ndarray]:
    """``state.npz``'s arrays, checked against the series and targets ``forecaster.json`` names."""
    try:
        with np.load(file) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except Exception as exc:  # BadZipFile, zlib.error, EOFError, OSError, ValueError: a damaged file
        raise ValueError(f"{file} cannot be read ({type(exc).__name__}: {exc}); {DAMAGED}") from None
    missing = [k for k in ARRAY_ENTRIES if k not in arrays]
    if missing:
        raise ValueError(f"{file} lacks the arrays {', '.join(missing)}; {DAMAGED}")
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
