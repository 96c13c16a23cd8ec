"""Checks of a ``--ckpt_path`` before Lightning loads it: the file is read once and compared with the
config, so that a file that is no ts-continuum checkpoint, or whose model or module options the config
does not rebuild, is refused in one line instead of failing in torch or running another model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from jsonargparse import Namespace
from lightning.pytorch import LightningModule
from lightning.pytorch.utilities import rank_zero_warn

from .errors import CLIError
from .links import LINKED
from .module import model_differences
CKPT_ENTRIES = ("pytorch-lightning_version", "state_dict", "model_class", "model_config")  # every fit writes them
CKPT_EXAMPLE = "runs/<name>/version_<N>/checkpoints/best-....ckpt (or last.ckpt)"


def run_config(ckpt_path: str) -> Path | None:
    """The config.yaml that fit saved for the run a checkpoint belongs to (``<run>/checkpoints/x.ckpt``)."""
    folder = Path(ckpt_path).parent
    path = folder.parent / "config.yaml"
    return path if folder.name == "checkpoints" and path.is_file() else None


def check_ckpt_path(subcommand: str, ckpt_path: str | None) -> None:
    """Evaluating without weights would score a freshly initialised model; "best" and "last" refer
    to checkpoints of this run's own, new folder, so they would find nothing."""
    if ckpt_path is None:
        if subcommand != "fit":
            raise CLIError(f"{subcommand} needs --ckpt_path, the checkpoint to evaluate (written by fit), "
                           f"e.g. {CKPT_EXAMPLE}; without one it would score an untrained model")
        return
    if ckpt_path in ("best", "last"):
        raise CLIError(f"--ckpt_path {ckpt_path} is not supported: every run writes into a new folder, where "
                       f"there is no {ckpt_path} checkpoint yet; pass the checkpoint file, e.g. {CKPT_EXAMPLE}")
    special = ckpt_path == "hpc" or str(ckpt_path).startswith("registry") or "://" in str(ckpt_path)
    if not special and not Path(ckpt_path).is_file():
        raise CLIError(f"--ckpt_path {ckpt_path}: no such file")


def read_ckpt(ckpt_path: str | None) -> dict[str, Any] | None:
    """The entries of ``--ckpt_path`` the checks need, read once. Lightning would fail on a file that
    is not a ts-continuum checkpoint with a torch traceback (UnpicklingError, KeyError)."""
    if ckpt_path is None or not Path(ckpt_path).is_file():
        return None  # "hpc", registry and remote paths: Lightning resolves them
    how = f"pass a .ckpt file written by ts-continuum fit, e.g. {CKPT_EXAMPLE}"
    try:
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)  # as Lightning reads it
    except Exception as error:  # whatever torch makes of the user's file, it is no checkpoint to use
        raise CLIError(f"--ckpt_path {ckpt_path} cannot be read as a checkpoint ({type(error).__name__}); {how}") \
            from error
    missing = [k for k in CKPT_ENTRIES if k not in ckpt] if isinstance(ckpt, dict) else list(CKPT_ENTRIES)
    if missing:
        raise CLIError(f"--ckpt_path {ckpt_path} is not a ts-continuum checkpoint (it lacks {', '.join(missing)}); "
                       f"{how}")
    return {k: ckpt.get(k) for k in ("model_class", "model_config", "hyper_parameters", "callbacks")}


def check_module_options(subcommand: str, ckpt_path: str, ckpt: dict[str, Any], given: Namespace) -> None:
    """Lightning writes the checkpoint's module options (lr, loss, schedule, ...) over the config
    without a word. Resuming could not apply a different value given (the optimiser and schedule
    state are restored), so it is refused; evaluating does not use them, so a warning is enough."""
    saved = ckpt.get("hyper_parameters") or {}
    differ = {k: (given.get(f"model.{k}"), old) for k, old in saved.items()
              if not k.startswith("_") and k != "model" and given.get(f"model.{k}") not in (None, old)}
    if not differ:
        return
    text = ", ".join(f"{k}={new!r} (checkpoint {old!r})" for k, (new, old) in differ.items())
    if subcommand != "fit":
        rank_zero_warn(f"{subcommand} ignores {text}: it uses the checkpoint's training options, which do not "
                       "change its results")
        return
    own = run_config(ckpt_path)
    drop = f"drop {'the option' if len(differ) == 1 else 'these options'}" + (
        f" (or resume with the run's own --config {own})" if own else "")
    raise CLIError(f"resuming from {ckpt_path} continues the checkpoint's optimiser and schedule, so {text} cannot "
                   f"take effect. To resume as trained, {drop}; to train on from these weights with other "
                   "options, start a new run from ForecastingModule.from_checkpoint in Python")


def check_ckpt_model(subcommand: str, ckpt_path: str, ckpt: dict[str, Any], module: LightningModule,
                     configs: Sequence[Any]) -> None:
    """Lightning loads only the checkpoint's weights, into the model this config builds: other
    arguments fail in load_state_dict, score another model than was trained (attention), or
    resume training as another model (dropout; evaluation does not use it). ``configs`` are the
    ``--config`` files given, to tell a changed run config from another one."""
    model = getattr(module, "model", None)
    if model is None:
        return
    differ = model_differences(ckpt, model, evaluating=subcommand != "fit")
    if not differ:
        return
    items = ", ".join(f"{k}: given {new!r} (checkpoint: {old!r})" for k, (new, old) in differ.items())
    own = run_config(ckpt_path)
    resolved = [str(Path(str(c)).resolve()) for c in configs]
    if own and str(own.resolve()) in resolved:  # the run's own config, changed on top of it
        fix = f"drop the option{'s' if len(differ) > 1 else ''} given on top of the run's config"
    elif own:
        fix = f"use the config it was trained with, --config {own}"
    else:
        fix = "give the checkpoint's values"
    if differ.keys() & set(LINKED):
        fix += " (lookback, horizon and n_channels come from --data.lookback, --data.horizon, --data.columns)"
    if "attention" in differ:
        fix += ("; to score these weights with the other attention on purpose, use "
                "ForecastingModule.from_checkpoint(path, attention=...) in Python")
    what = ("resuming would continue training another model than was trained" if subcommand == "fit"
            else "its weights would fail to load or score another model than was trained")
    raise CLIError(f"--ckpt_path {ckpt_path} holds a model trained with other arguments than this config gives: "
                   f"{items}. {what[0].upper() + what[1:]}; {fix}")
