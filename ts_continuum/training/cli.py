"""The ``ts-continuum`` command: Lightning's CLI (fit / validate / test / predict) over YAML configs.

    ts-continuum fit --config configs/quickstart.yaml
    ts-continuum test --config configs/patchtst/ETTh1.yaml --ckpt_path path/to/best.ckpt

The data module's lookback, horizon and channel count are linked into the model, so a config
names them once (a different value given for the model is refused, not overwritten). Each run
writes into its own folder and refuses one that holds an earlier run's files; ``validate``,
``test`` and ``predict`` need ``--ckpt_path``; ``predict`` writes ``predictions.csv``.

A ``--ckpt_path`` must be a ts-continuum checkpoint whose model the config rebuilds exactly (the run's
own ``config.yaml`` does); resuming refuses module options it could not apply. Bad options and data
are reported in one line instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import torch
from jsonargparse import Namespace
try:  # private in jsonargparse (4.27 to 4.53 at least): parse without links, see parse_arguments
    from jsonargparse._link_arguments import skip_apply_links
except ImportError:  # moved in a later version: the linked-argument check is skipped, nothing else changes
    skip_apply_links = None
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import ArgsType, LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_only, rank_zero_warn

from .. import allocator
from ..data import ForecastDataModule
from ..models.size import check_model_size
from .checkpoint_checks import check_ckpt_model, check_ckpt_path, check_module_options, read_ckpt
from .errors import CLIError, user_input_errors
from .learning_curve import LearningCurveWriter
from .links import LINKED, check_linked, link_data_to_model
from .module import DEFAULT_PCT_START, ForecastingModule, ResumeError, check_precision, pct_start_unused
from .prediction_writer import PredictionWriter
from .run_folder import check_run_folder, remove_run_files


class RunConfigSaver(SaveConfigCallback):
    """Saves the run's ``config.yaml`` with ``ckpt_path`` and the logger's ``version`` cleared: the
    file is what users pass back to evaluate or resume the run. A resumed run's file would otherwise
    silently resume (or test) the earlier run's checkpoint again whenever it is reused without
    ``--ckpt_path``, and a pinned version would send the next command into this run's folder, which
    is refused."""

    def __init__(self, parser: LightningArgumentParser, config: Namespace, *args: Any, **kwargs: Any) -> None:
        if config.get("ckpt_path") is not None or any(map(_pinned_version, _as_list(config.get("trainer.logger")))):
            config = config.clone()
            config.ckpt_path = None
            for logger in filter(_pinned_version, _as_list(config.get("trainer.logger"))):
                logger.init_args.version = None
        super().__init__(parser, config, *args, **kwargs)


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def _pinned_version(logger: Any) -> bool:
    """A logger config (``class_path`` + ``init_args``) that names its run's version."""
    return isinstance(logger, Namespace) and logger.get("init_args.version") is not None


class ForecastCLI(LightningCLI):
    """LightningCLI for ``ForecastingModule`` + ``ForecastDataModule``.

    Optimiser and schedule come from the module's own options (``--model.lr``, ``lr_schedule``,
    ...): Lightning's ``--optimizer``/``--lr_scheduler`` would silently replace them, so they are
    not offered.
    """

    def __init__(self, model_class: type[LightningModule] = ForecastingModule,
                 datamodule_class: type[ForecastDataModule] = ForecastDataModule, **kwargs: Any) -> None:
        self._model_given: dict[str, Any] = {}
        self._ckpt: dict[str, Any] | None = None  # the --ckpt_path entries the checks use, read once
        self._resumed_best: str | None = None  # the resumed run's best checkpoint, carried into this run
        kwargs.setdefault("save_config_callback", RunConfigSaver)
        super().__init__(model_class, datamodule_class, auto_configure_optimizers=False, **kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        link_data_to_model(parser)
        parser.add_argument("--test_after_fit", type=bool, default=False,
                            help="after fit, test the best checkpoint (also that of a resumed run) and print "
                                 "test MSE/MAE")

    # --- checks before anything runs ------------------------------------------------------
    def parse_arguments(self, parser: LightningArgumentParser, args: ArgsType) -> None:
        """Also records the values the user set, which links and the checkpoint would overwrite silently,
        and checks ``--ckpt_path`` before Lightning reads it."""
        super().parse_arguments(parser, args)  # first: --help / --print_config exit here as usual
        subcommand = self.config.get("subcommand")
        given = self._given(parser, args, subcommand)
        self._model_given = {k: given.get(f"model.model.init_args.{k}") for k in LINKED} if given else {}
        if subcommand is None:
            return
        ckpt_path = self.config[subcommand].get("ckpt_path")
        check_ckpt_path(subcommand, ckpt_path)
        self._ckpt = read_ckpt(ckpt_path)
        if self._ckpt is not None and given is not None:
            check_module_options(subcommand, ckpt_path, self._ckpt, given)

    @staticmethod
    def _given(parser: LightningArgumentParser, args: ArgsType, subcommand: str | None) -> Namespace | None:
        """What the command line and configs set, without defaults or links (None if not available)."""
        if skip_apply_links is None:
            rank_zero_warn("this jsonargparse version hides skip_apply_links: model lookback/horizon/n_channels "
                           "given by hand are not checked against the data's (the data's values are used), nor "
                           "module options against a checkpoint's (the checkpoint's are used)")
            return None
        with skip_apply_links():  # defaults=False: only what the command line and configs set
            if isinstance(args, (dict, Namespace)):
                given = parser.parse_object(args, defaults=False)
            else:
                given = parser.parse_args(args, defaults=False)
        return given.get(subcommand) if subcommand else given

    def before_instantiate_classes(self) -> None:
        data = self._get(self.config, "data")
        for name in ("lookback", "horizon"):
            check_linked(name, self._model_given.get(name), data[name])
        module = self._get(self.config, "model")
        pct_start, schedule = module.get("pct_start", DEFAULT_PCT_START), module.get("lr_schedule")
        if pct_start != DEFAULT_PCT_START and schedule != "onecycle":  # as the module would, without a traceback
            raise CLIError(pct_start_unused(pct_start, schedule))
        self._check_model_size(module["model"], data)

    @staticmethod
    def _check_model_size(model: Namespace, data: Namespace) -> None:
        """A model too large for this machine is refused before its weights are allocated (torch's
        allocator would fail with a traceback). The channel count is the data's, not known yet: one."""
        if not isinstance(model, Namespace) or not isinstance(model.get("class_path"), str):
            return
        module_name, _, class_name = model["class_path"].rpartition(".")
        model_cls = getattr(importlib.import_module(module_name), class_name)
        args = {**(model.get("init_args") or Namespace()).as_dict(), "n_channels": 1}
        with user_input_errors():
            check_model_size(lambda: model_cls(**args), f"--data.horizon {data['horizon']}, --data.lookback "
                                                        f"{data['lookback']}")

    def instantiate_classes(self) -> None:
        with user_input_errors():
            super().instantiate_classes()

    def after_instantiate_classes(self) -> None:
        check_linked("n_channels", self._model_given.get("n_channels"), self.datamodule.n_channels)
        if self._ckpt is not None:
            config = self.config[self.subcommand]
            check_ckpt_model(self.subcommand, config["ckpt_path"], self._ckpt, self.model, config.get("config") or [])
        with user_input_errors():  # too little history for the splits: refused now, not inside trainer.fit
            self.datamodule.setup(self.subcommand)
            if self.subcommand == "fit":  # predicting or testing at 16-true loads weights and works
                check_precision(self.trainer.precision)
        if self.subcommand is not None:
            check_run_folder(self.trainer)

    def _run_subcommand(self, subcommand: str) -> None:
        try:
            super()._run_subcommand(subcommand)
        except ResumeError:  # raised while fit restores the checkpoint, after config.yaml was written
            remove_run_files(self.trainer)
            raise

    # --- running ----------------------------------------------------------------------------
    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        trainer = super().instantiate_trainer(**kwargs)
        if self.subcommand == "predict":
            trainer.callbacks.append(PredictionWriter())
        if self.subcommand == "fit":
            trainer.callbacks.append(LearningCurveWriter())
        return trainer

    def before_fit(self) -> None:
        """Carries the resumed run's best checkpoint into this run's ModelCheckpoint. Lightning forgets
        its score when the resumed run logs into a new folder: the after-fit test could then test a
        worse checkpoint, and this run's last.ckpt would no longer know the earlier best, so a second
        resume would lose it. Lightning deletes replaced checkpoints only inside its own folder, so the
        earlier run's file stays where it is."""
        ckpt_path = self.config["fit"].get("ckpt_path")
        ckpt = self.trainer.checkpoint_callback
        if not (ckpt_path and isinstance(ckpt, ModelCheckpoint) and ckpt.monitor and ckpt.save_top_k != 0):
            return
        if self._ckpt is None:  # "hpc", registry or remote: only Lightning reads it
            rank_zero_warn(f"could not read the resumed run's best score from {ckpt_path} (not a local file); the "
                           "after-fit test chooses among this run's checkpoints only")
            return
        state = (self._ckpt.get("callbacks") or {}).get(ckpt.state_key)
        if not state or state.get("best_model_score") is None or not state.get("best_model_path"):
            return
        path = state["best_model_path"]
        if not Path(path).is_file() and Path(path).name == Path(ckpt_path).name:
            path = ckpt_path  # the resumed checkpoint is that best one, moved
        if Path(path).is_file():
            score = state["best_model_score"]
            ckpt.best_model_path, ckpt.best_model_score, ckpt.best_k_models = path, score, {path: score}
            if ckpt.save_top_k == 1:
                ckpt.kth_best_model_path, ckpt.kth_value = path, score
            self._resumed_best = path
        else:
            rank_zero_warn(f"the resumed run's best checkpoint {path} no longer exists; the after-fit test can "
                           "only choose among this run's checkpoints")

    def after_fit(self) -> None:
        ckpt = self.trainer.checkpoint_callback
        path = ckpt.best_model_path if isinstance(ckpt, ModelCheckpoint) else ""
        score = ckpt.best_model_score if path else None
        self._check_diverged(score)
        if not self.config["fit"].get("test_after_fit"):
            return
        which = "the checkpoint ModelCheckpoint reports as best" if score is None else (
            f"{'the resumed run' if path == self._resumed_best else 'this run'}'s best checkpoint "
            f"({ckpt.monitor} {float(score):.4f})")
        if not path:
            rank_zero_info("Testing the final weights (no best checkpoint was saved)")
            self.trainer.test(self.model, datamodule=self.datamodule)
            return
        rank_zero_info(f"Testing {path}: {which}")
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=path)

    def _check_diverged(self, best_score) -> None:
        """A fit that diverged before any epoch validated with a finite score trained nothing worth
        keeping: fail (a non-zero exit scripts can see) instead of testing NaN weights."""
        epoch = getattr(self.model, "diverged_epoch", None)
        if epoch is None or (best_score is not None and bool(torch.isfinite(best_score))):
            return
        kept = ("no checkpoint holds an earlier epoch that validated"
                if isinstance(self.trainer.checkpoint_callback, ModelCheckpoint)
                else "checkpointing is off, so only the diverged weights remain")
        tested = "; nothing was tested" if self.config["fit"].get("test_after_fit") else ""
        raise CLIError(
            f"training diverged: the mean training loss of epoch {epoch} was not finite and {kept}: the run has "
            f"no usable weights{tested} ({self.trainer.log_dir} keeps the learning curve). Lower --model.lr "
            f"(now {self.model.hparams.lr:g}), set --trainer.gradient_clip_val 1.0 or look for extreme values in "
            "the data.")


def main(args: ArgsType = None) -> None:
    from .query_cli import QueryForecastCLI, wants_query_cli  # imports this module

    argv = list(sys.argv[1:] if args is None else args) if not isinstance(args, (dict, Namespace)) else []
    cli = QueryForecastCLI if wants_query_cli(argv) else ForecastCLI
    try:
        allocator.keep_freed_memory()  # the op's large temporaries are reused, not mapped anew (issue 47)
    except ValueError as error:  # a misspelt TS_CONTINUUM_ALLOCATOR
        sys.exit(f"ts-continuum: error: {error}")
    try:
        cli(args=args)
    except (CLIError, ResumeError) as error:  # ResumeError: from the module, when fit restores the checkpoint
        if rank_zero_only.rank != 0:  # every process of a multi-process fit refuses alike: one message is enough
            sys.exit(1)
        sys.exit(f"ts-continuum: error: {error}")


if __name__ == "__main__":
    main()
