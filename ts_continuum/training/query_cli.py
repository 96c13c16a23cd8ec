"""The ``ts-continuum`` command for models of observation sets (``QueryModel``: forecasts at any time and
variable), e.g. ``ts-continuum fit --config configs/physionet2012/async-continuous.yaml``.

The same command as the grid models' (``cli.py``): ``main`` picks this one when the config's
``model.model`` is a ``QueryModel``. The data module's variable count is passed to the model;
checkpoint, run-folder and divergence checks are ``ForecastCLI``'s.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from lightning.pytorch.cli import LightningArgumentParser

from ..data.physionet import PhysioNetDataModule
from ..models.query_base import QueryModel
from .cli import ForecastCLI
from .errors import CLIError, user_input_errors
from .module import check_precision
from .checkpoint_checks import check_ckpt_model
from .query_module import QueryForecastingModule
from .run_folder import check_run_folder


class QueryForecastCLI(ForecastCLI):
    """LightningCLI for ``QueryForecastingModule`` + ``PhysioNetDataModule``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(model_class=QueryForecastingModule, datamodule_class=PhysioNetDataModule, **kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.n_variables", "model.model.init_args.n_variables", apply_on="instantiate")
        parser.add_argument("--test_after_fit", type=bool, default=False,
                            help="after fit, test the best checkpoint and print test MSE/MAE")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        super().parse_arguments(parser, args)
        self._model_given = {}  # lookback/horizon/channels: grid-model links, not this CLI's

    def before_instantiate_classes(self) -> None:
        pass

    def after_instantiate_classes(self) -> None:
        if self._ckpt is not None:
            config = self.config[self.subcommand]
            check_ckpt_model(self.subcommand, config["ckpt_path"], self._ckpt, self.model, config.get("config") or [])
        with user_input_errors():
            self.datamodule.setup(self.subcommand)
            if self.subcommand == "fit":
                check_precision(self.trainer.precision)
        if self.subcommand is not None:
            check_run_folder(self.trainer)


def _config_paths(args: Sequence[str]) -> list[str]:
    paths = []
    for i, arg in enumerate(args):
        if arg == "--config" and i + 1 < len(args):
            paths.append(args[i + 1])
        elif arg.startswith("--config="):
            paths.append(arg.split("=", 1)[1])
    return paths


def _model_class_path(args: Sequence[str]) -> str | None:
    """The model's class path as the command line and its configs set it (the last one wins)."""
    found = None
    for path in _config_paths(args):
        try:
            config = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue  # the CLI itself reports an unreadable config
        model = ((config.get("model") or {}) if isinstance(config, dict) else {}).get("model")
        if isinstance(model, dict) and isinstance(model.get("class_path"), str):
            found = model["class_path"]
        elif isinstance(model, str):
            found = model
    for i, arg in enumerate(args):
        for flag in ("--model.model", "--model.model.class_path"):
            if arg == flag and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(flag + "="):
                found = arg.split("=", 1)[1]
    return found


def is_query_model(class_path: str | None) -> bool:
    """Whether ``class_path`` names a ``QueryModel`` (short names are looked up in ``ts_continuum.models``)."""
    if not class_path:
        return False
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name or "ts_continuum.models"), name)
    except (ImportError, AttributeError, ValueError):
        return False
    return isinstance(cls, type) and issubclass(cls, QueryModel)


def wants_query_cli(args: Sequence[str]) -> bool:
    return is_query_model(_model_class_path(args))


__all__ = ["QueryForecastCLI", "wants_query_cli", "CLIError"]
