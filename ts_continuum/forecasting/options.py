"""Sorting ``Forecaster(**kwargs)`` into model, training-module and Lightning Trainer arguments.

Each name goes to the first of model class, ``ForecastingModule`` and ``lightning.Trainer`` whose
signature has it; anything else is a ``ValueError`` that lists the valid names. The defaults suit
a CPU: a few epochs, lr 1e-3, no logger and no checkpoint files (the best validation weights are
kept in memory instead), one device (no surprise multi-process DDP in a notebook).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import lightning as L
import torch

from ..attention.backends import triton_available
from ..training import ForecastingModule
from ..training.module import check_precision
from .forecast_errors import did_you_mean

SET_BY_FORECASTER = {"n_channels": "the number of target columns", "model": "Forecaster(model=...)"}
MODULE_DEFAULTS = {"lr": 1e-3}
TRAINER_DEFAULTS = {
    "max_epochs": 10,
    "accelerator": "auto",
    "devices": 1,
    "logger": False,
    "enable_checkpointing": False,
    "enable_model_summary": False,
}


@dataclass
class Options:
    model: dict = field(default_factory=dict)
    module: dict = field(default_factory=dict)
    trainer: dict = field(default_factory=dict)


def _parameters(fn, skip: set[str]) -> list[str]:
    return [
        p.name for p in inspect.signature(fn).parameters.values()
        if p.name not in skip and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def split_options(model_cls: type, kwargs: dict, explicit: set[str],
                  module_cls: type = ForecastingModule) -> Options:
    """Route ``kwargs``; ``explicit`` are the model arguments Forecaster sets itself; ``module_cls``
    the training module whose arguments are the training options."""
    groups = {
        "model": _parameters(model_cls, explicit | {"self"}),
        "module": _parameters(module_cls.__init__, {"self", "model"}),
        "trainer": _parameters(L.Trainer.__init__, {"self"}),
    }
    options = Options(module=dict(MODULE_DEFAULTS), trainer=dict(TRAINER_DEFAULTS))
    for name, value in kwargs.items():
        if name in SET_BY_FORECASTER:
            raise ValueError(f"{name!r} is not an option here: it is set from {SET_BY_FORECASTER[name]}")
        group = next((g for g, names in groups.items() if name in names), None)
        if group is None:
            every = [n for names in groups.values() for n in names]
            raise ValueError(
                f"unknown argument {name!r}{did_you_mean(name, every)}. Valid: model ({model_cls.__name__}): "
                f"{', '.join(groups['model'])}; training: {', '.join(groups['module'])}; "
                f"Lightning Trainer: {', '.join(groups['trainer'])}"
            )
        getattr(options, group)[name] = value
    return options


def check_backend(options: Options) -> None:
    """``attention_backend="triton"`` where training would run on the CPU fails deep inside Lightning;
    refuse it before training starts. An Accelerator object is left to Lightning."""
    accelerator = options.trainer.get("accelerator", "auto")
    if options.model.get("attention_backend") != "triton" or not isinstance(accelerator, str):
        return
    on_gpu = accelerator.lower() in ("auto", "gpu", "cuda") and torch.cuda.is_available()
    ok, why = triton_available(torch.device("cuda" if on_gpu else "cpu"))
    if not ok:
        raise ValueError(f"attention_backend='triton' cannot train with accelerator={accelerator!r} here: {why} "
                         "(attention_backend='auto' picks the kernel wherever it can run)")


def check_trains(options: Options) -> None:
    """Lightning accepts a run that trains nothing (``max_epochs=0``, ``max_steps=0``,
    ``limit_train_batches=0``); a Forecaster would then forecast with its random initial weights.
    A precision Adam cannot train at is refused here too, before any work."""
    check_precision(options.trainer.get("precision"))
    for name in ("max_epochs", "max_steps", "limit_train_batches"):
        value = options.trainer.get(name)
        if value is not None and not isinstance(value, bool) and value == 0:
            fraction = " (or a fraction of the batches)" if name.startswith("limit") else ""
            raise ValueError(f"{name}={value!r} trains nothing, so the forecaster would forecast with random weights; "
                             f"give {name} at least 1{fraction}")
