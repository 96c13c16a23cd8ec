"""A saved Forecaster's directory, whatever its model: ``forecaster.json`` (format name and version,
library version, constructor arguments and what the route needs), ``weights.pt`` (the model's state
dict, read back with ``weights_only=True``) and ``state.npz`` (arrays). Format version 1 is a grid
model's (``persistence.py``), 2 the asynchronous model's (``query_persistence.py``); a version this
code cannot read is refused rather than half-read.

A save is written into a fresh sibling directory and renamed into place at the end, so a failure
leaves no partial directory and never mixes new files with old ones. ``overwrite=True`` replaces
only a directory holding nothing but a saved forecaster: anything else there is the user's. A
damaged, incomplete or mixed-up directory is a ValueError naming the file and the problem, never a
raw error of json, torch or numpy.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import ts_continuum

from ..training.learning_curve import learning_curve_frame
from .forecast_errors import user_stacklevel
from .steps import parse_freq

FORMAT = "ts-continuum-forecaster"
CONFIG, WEIGHTS, ARRAYS = "forecaster.json", "weights.pt", "state.npz"
DAMAGED = "the directory is damaged or was changed since save(): save the forecaster again"
# every save of a format version writes these entries of forecaster.json
CONFIG_ENTRIES = {1: ("forecaster", "spec", "freq", "time", "model_config", "ids"),
                  2: ("forecaster", "query_spec", "model_class", "model_config", "ids", "time")}


def to_json(value):
    """``value`` with numpy scalars and arrays as Python numbers and lists, tuples as lists: what
    ``json`` writes (and reads back) as plain values; anything else is left for ``json`` to refuse."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {to_json(k): to_json(v) for k, v in value.items()}
    return value


def json_safe(args: dict) -> tuple[dict, list[str]]:
    """The JSON-serialisable arguments (as plain JSON values) and the names of the others."""
    kept, dropped = {}, []
    for name, value in args.items():
        if name == "freq" and isinstance(value, (pd.Timedelta, dt.timedelta, np.timedelta64, pd.offsets.BaseOffset)):
            value = f"{parse_freq(value, 'datetime')}ns"  # a duration as an offset alias that parse_freq reads back
        value = to_json(value)
        try:
            json.dumps(value, allow_nan=False)  # NaN and infinity are not JSON: other readers refuse them
            kept[name] = value
        except (TypeError, ValueError):
            dropped.append(name)
    return kept, dropped


def check_target(path: Path, overwrite: bool) -> None:
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


def config_text(args: dict, entries: dict, version: int, metrics: dict,
                curve: pd.DataFrame | None) -> tuple[str, list[str]]:
    """``forecaster.json``'s text (``entries`` of the route beside the format, the constructor ``args``,
    fit metrics and learning curve) and the constructor arguments left out of it."""
    args, dropped = json_safe(args)
    config = {"format": FORMAT, "format_version": version, "library_version": ts_continuum.__version__,
              "forecaster": args, **entries, "fit_metrics": finite_or_null(metrics),
              "learning_curve": [] if curve is None else [finite_or_null(row) for row in curve.to_dict("records")]}
    return json.dumps(to_json(config), indent=2, allow_nan=False), dropped


def model_config(model: torch.nn.Module) -> dict:
    """The model's constructor arguments as JSON values; refused before anything is written if some
    are not, since a saved model could not be rebuilt."""
    config, unsaved = json_safe(dict(model.config))
    if unsaved:
        raise ValueError(f"model arguments {', '.join(unsaved)} are not JSON-serialisable or not finite, so a saved "
                         "model could not be rebuilt; pass plain finite numbers and strings")
    return config


def saved_ids(ids: np.ndarray, categorical: pd.CategoricalDtype | None) -> tuple[list, dict | None]:
    """Series ids (and categorical categories) as JSON values; ids that cannot be saved are refused."""
    plain = [to_json(i) for i in ids]
    categories = [] if categorical is None else [to_json(c) for c in categorical.categories]
    if not all(i is None or isinstance(i, (str, int)) or isinstance(i, float) and math.isfinite(i)
               for i in plain + categories):
        raise ValueError("series ids must be strings or finite numbers to be saved; "
                         "convert the id column, e.g. with astype(str)")
    # categorical ids answer as the same categorical (absent in older saves: plain values)
    return plain, None if categorical is None else {"categories": categories, "ordered": bool(categorical.ordered)}


def id_dtype_of(config: dict) -> pd.CategoricalDtype | None:
    categorical = config.get("id_categories")
    return None if categorical is None else pd.CategoricalDtype(categorical["categories"], categorical["ordered"])


def finite_or_null(record: dict) -> dict:
    """``record`` with NaN and infinite floats as None (JSON null; read back as NaN): a metric of an
    epoch without validation, or of one whose loss diverged."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in to_json(record).items()}


def _move_into_place(new: Path, path: Path) -> None:
    """Rename ``new`` to ``path``; an existing ``path`` (checked by ``check_target``) is moved aside
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


def write_directory(path: Path, overwrite: bool, text: str, dropped: list[str], model: torch.nn.Module,
                    arrays: dict[str, np.ndarray]) -> Path:
    """Write ``forecaster.json`` (``text``), the model's weights and ``arrays`` to ``path``, atomically."""
    target = path.resolve()  # a symlinked directory is replaced where it points, not the link
    check_target(target, overwrite)
    if dropped:
        warnings.warn(f"not saved (not JSON-serialisable or not finite): {', '.join(dropped)}; pass them again to "
                      "Forecaster.load's result if you train it further", UserWarning, stacklevel=user_stacklevel())
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.saving-{uuid.uuid4().hex[:8]}")
    staging.mkdir()
    try:
        (staging / CONFIG).write_text(text)
        torch.save(model.state_dict(), staging / WEIGHTS)
        np.savez(staging / ARRAYS, **arrays)
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


def rebuild(path: Path, build: Callable):
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


def read_arrays(file: Path, needed: tuple[str, ...]) -> dict[str, np.ndarray]:
    """``state.npz``'s arrays, with the ``needed`` ones present."""
    try:
        with np.load(file) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except Exception as exc:  # BadZipFile, zlib.error, EOFError, OSError, ValueError: a damaged file
        raise ValueError(f"{file} cannot be read ({type(exc).__name__}: {exc}); {DAMAGED}") from None
    missing = [k for k in needed if k not in arrays]
    if missing:
        raise ValueError(f"{file} lacks the arrays {', '.join(missing)}; {DAMAGED}")
    return arrays


def saved_fit_record(config: dict) -> tuple[dict, pd.DataFrame]:
    """The saved fit metrics (null back to NaN) and learning curve (empty in older saves)."""
    metrics = {k: math.nan if v is None else v for k, v in config.get("fit_metrics", {}).items()}
    return metrics, learning_curve_frame(config.get("learning_curve", []))


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
    version = config.get("format_version")
    if version not in CONFIG_ENTRIES:
        raise ValueError(
            f"{path} was saved in format version {version!r} by ts-continuum "
            f"{config.get('library_version')}; this ts-continuum {ts_continuum.__version__} reads version 1 (grid "
            "models) and version 2 (the asynchronous model): load it with the version that saved it"
        )
    missing = [k for k in CONFIG_ENTRIES[version] if k not in config]
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


def _some(what: str, names: list[str], shown: int = 3) -> str:
    return f"{what}: {', '.join(names[:shown])}{' ...' if len(names) > shown else ''}"
