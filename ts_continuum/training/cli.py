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

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from jsonargparse import Namespace
try:  # private in jsonargparse (4.27 to 4.53 at least): parse without links, see parse_arguments
    from jsonargparse._link_arguments import skip_apply_links
except ImportError:  # moved in a later version: the linked-argument check is skipped, nothing else changes
    skip_apply_links = None
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import BasePredictionWriter, ModelCheckpoint
from lightning.pytorch.cli import ArgsType, LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from ..data import ForecastDataModule
from .module import DEFAULT_PCT_START, ForecastingModule, ResumeError, pct_start_unused

LINKED = ("lookback", "horizon", "n_channels")  # data module attribute -> model argument
PREDICTIONS = "predictions"  # predictions.csv, or predictions-rank<N>.csv from several processes
INDEX_COLUMNS = ("window", "origin", "time", "step")
# what a run leaves in its folder; CSVLogger deletes an existing metrics.csv as soon as it starts
RUN_FILES = ("config.yaml", "hparams.yaml", "metrics.csv", "checkpoints")
SAME_MATHS = ("attention_backend",)  # model arguments a checkpoint may be loaded with another value of
EVAL_IDLE = ("dropout", "head_dropout")  # model arguments evaluation does not use (eval mode)
CKPT_ENTRIES = ("pytorch-lightning_version", "state_dict", "model_class", "model_config")  # every fit writes them
CKPT_EXAMPLE = "runs/<name>/version_<N>/checkpoints/best-....ckpt (or last.ckpt)"


class CLIError(ValueError):
    """A command line or config the CLI refuses; ``main`` prints it without a traceback."""


@contextmanager
def user_input_errors() -> Iterator[None]:
    """Constructors and the data module refuse bad options and data with ValueError or FileNotFoundError,
    whose message says what to change: reported as a CLIError instead of behind 20 frames of
    jsonargparse and Lightning. Other exception types are bugs and keep their traceback."""
    try:
        yield
    except CLIError:
        raise
    except (ValueError, FileNotFoundError) as error:
        raise CLIError(str(error)) from error


def run_config(ckpt_path: str) -> Path | None:
    """The config.yaml that fit saved for the run a checkpoint belongs to (``<run>/checkpoints/x.ckpt``)."""
    folder = Path(ckpt_path).parent
    path = folder.parent / "config.yaml"
    return path if folder.name == "checkpoints" and path.is_file() else None


class RunConfigSaver(SaveConfigCallback):
    """Saves the run's ``config.yaml`` with ``ckpt_path`` cleared: the file is what users pass back to
    evaluate or resume the run, and a resumed run's file would otherwise silently resume (or test)
    the earlier run's checkpoint again whenever it is reused without ``--ckpt_path``."""

    def __init__(self, parser: LightningArgumentParser, config: Namespace, *args: Any, **kwargs: Any) -> None:
        if config.get("ckpt_path") is not None:
            config = config.clone()
            config.ckpt_path = None
        super().__init__(parser, config, *args, **kwargs)


class PredictionWriter(BasePredictionWriter):
    """Writes ``predict``'s forecasts to ``predictions.csv`` in the run folder, in the data's units.

    One row per window and forecast step: ``window`` (index among the predicted windows),
    ``origin`` (time of the window's last input), ``time`` (of the forecast step), ``step`` (1..H)
    and one column per channel. With several processes, each writes ``predictions-rank<N>.csv``.
    An existing file is never overwritten.
    """

    def __init__(self) -> None:
        super().__init__(write_interval="batch")
        self.path: Path | None = None
        self._file = None
        self._header = True

    def on_predict_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        clash = sorted(set(trainer.datamodule.channel_names) & set(INDEX_COLUMNS))
        if clash:
            raise CLIError(f"channels named {clash} clash with the index columns of predictions.csv "
                           f"{list(INDEX_COLUMNS)}: rename them in the data")
        suffix = f"-rank{trainer.global_rank}" if trainer.world_size > 1 else ""
        self.path = Path(trainer.log_dir) / f"{PREDICTIONS}{suffix}.csv"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._file = open(self.path, "x", newline="")  # "x": fail rather than overwrite
        except FileExistsError:
            raise CLIError(f"{self.path} exists; predict writes a new file and overwrites none: choose another "
                           "run folder or delete the file") from None
        self._header = True

    def write_on_batch_end(self, trainer: Trainer, pl_module: LightningModule, prediction: torch.Tensor,
                           batch_indices: list[int] | None, batch: Any, batch_idx: int, dataloader_idx: int) -> None:
        dm = trainer.datamodule
        loaders = trainer.predict_dataloaders
        windows = (loaders[dataloader_idx] if isinstance(loaders, (list, tuple)) else loaders).dataset
        pred = prediction.detach().float().cpu().numpy()
        n, horizon, channels = pred.shape
        values = dm.scaler.inverse_transform(pred.reshape(-1, channels))  # the model works in scaled units
        if not batch_indices:  # Lightning records them for its own DataLoaders
            raise RuntimeError("predict did not report which windows a batch holds; cannot label predictions")
        index = np.asarray(batch_indices)
        origin = windows.start + index + windows.lookback - 1  # row of each window's last input
        rows = (origin[:, None] + np.arange(1, horizon + 1)).reshape(-1)
        times = dm.frame.index
        frame = pd.DataFrame({
            "window": np.repeat(index, horizon),
            "origin": np.repeat(times[origin], horizon),
            "time": times[rows],
            "step": np.tile(np.arange(1, horizon + 1), n),
        })
        frame[dm.channel_names] = values
        frame.to_csv(self._file, header=self._header, index=False)
        self._header = False

    def on_predict_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._file.close()
        self._file = None
        rank_zero_info(f"Predictions (original units) written to {self.path}")

    def on_exception(self, trainer: Trainer, pl_module: LightningModule, exception: BaseException) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


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
        parser.link_arguments("data.lookback", "model.model.init_args.lookback")
        parser.link_arguments("data.horizon", "model.model.init_args.horizon")
        parser.link_arguments("data.n_channels", "model.model.init_args.n_channels", apply_on="instantiate")
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
        self._check_ckpt_path(subcommand)
        self._ckpt = self._read_ckpt(subcommand)
        if self._ckpt is not None and given is not None:
            self._check_module_options(subcommand, given)

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
            self._check_linked(name, data[name])
        module = self._get(self.config, "model")
        pct_start, schedule = module.get("pct_start", DEFAULT_PCT_START), module.get("lr_schedule")
        if pct_start != DEFAULT_PCT_START and schedule != "onecycle":  # as the module would, without a traceback
            raise CLIError(pct_start_unused(pct_start, schedule))

    def instantiate_classes(self) -> None:
        with user_input_errors():
            super().instantiate_classes()

    def after_instantiate_classes(self) -> None:
        self._check_linked("n_channels", self.datamodule.n_channels)
        if self._ckpt is not None:
            self._check_ckpt_model()
        with user_input_errors():  # too little history for the splits: refused now, not inside trainer.fit
            self.datamodule.setup(self.subcommand)
        if self.subcommand is not None:
            self._check_run_folder()

    def _check_linked(self, name: str, data_value: int) -> None:
        value = self._model_given.get(name)
        if value is None or value == data_value:
            return
        if name == "n_channels":
            how = "the channel count is that of the data's columns (choose them with --data.columns)"
        else:
            how = f"set it under data instead (--data.{name} {value}, or data: {name}: in the YAML)"
        raise CLIError(f"the model's {name} ({value}) differs from the data's ({data_value}): the data module's "
                       f"{name} is passed to the model, so remove model.model.init_args.{name}; {how}")

    def _check_ckpt_path(self, subcommand: str) -> None:
        """Evaluating without weights would score a freshly initialised model; "best" and "last" refer
        to checkpoints of this run's own, new folder, so they would find nothing."""
        ckpt_path = self.config[subcommand].get("ckpt_path")
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

    def _read_ckpt(self, subcommand: str) -> dict[str, Any] | None:
        """The entries of ``--ckpt_path`` the checks need, read once. Lightning would fail on a file that
        is not a ts-continuum checkpoint with a torch traceback (UnpicklingError, KeyError)."""
        path = self.config[subcommand].get("ckpt_path")
        if path is None or not Path(path).is_file():
            return None  # "hpc", registry and remote paths: Lightning resolves them
        how = f"pass a .ckpt file written by ts-continuum fit, e.g. {CKPT_EXAMPLE}"
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=True)  # as Lightning reads it
        except Exception as error:  # whatever torch makes of the user's file, it is no checkpoint to use
            raise CLIError(f"--ckpt_path {path} cannot be read as a checkpoint ({type(error).__name__}); {how}") \
                from error
        missing = [k for k in CKPT_ENTRIES if k not in ckpt] if isinstance(ckpt, dict) else list(CKPT_ENTRIES)
        if missing:
            raise CLIError(f"--ckpt_path {path} is not a ts-continuum checkpoint (it lacks {', '.join(missing)}); "
                           f"{how}")
        return {k: ckpt.get(k) for k in ("model_class", "model_config", "hyper_parameters", "callbacks")}

    def _check_module_options(self, subcommand: str, given: Namespace) -> None:
        """Lightning writes the checkpoint's module options (lr, loss, schedule, ...) over the config
        without a word. Resuming could not apply a different value given (the optimiser and schedule
        state are restored), so it is refused; evaluating does not use them, so a warning is enough."""
        saved = self._ckpt.get("hyper_parameters") or {}
        differ = {k: (given.get(f"model.{k}"), old) for k, old in saved.items()
                  if not k.startswith("_") and k != "model" and given.get(f"model.{k}") not in (None, old)}
        if not differ:
            return
        text = ", ".join(f"{k}={new!r} (checkpoint {old!r})" for k, (new, old) in differ.items())
        path = self.config[subcommand]["ckpt_path"]
        if subcommand != "fit":
            rank_zero_warn(f"{subcommand} ignores {text}: it uses the checkpoint's training options, which do not "
                           "change its results")
            return
        own = run_config(path)
        drop = f"drop {'the option' if len(differ) == 1 else 'these options'}" + (
            f" (or resume with the run's own --config {own})" if own else "")
        raise CLIError(f"resuming from {path} continues the checkpoint's optimiser and schedule, so {text} cannot "
                       f"take effect. To resume as trained, {drop}; to train on from these weights with other "
                       "options, start a new run from ForecastingModule.from_checkpoint in Python")

    def _check_ckpt_model(self) -> None:
        """Lightning loads only the checkpoint's weights, into the model this config builds: other
        arguments fail in load_state_dict, score another model than was trained (attention), or
        resume training as another model (dropout; evaluation does not use it)."""
        model = getattr(self.model, "model", None)
        if model is None:
            return
        built = f"{type(model).__module__}.{type(model).__qualname__}"
        saved_class, saved = self._ckpt["model_class"], self._ckpt["model_config"]
        config = getattr(model, "config", {})
        if built != saved_class:
            differ = {"model class": (built, saved_class)}
        else:
            ignored = SAME_MATHS + (EVAL_IDLE if self.subcommand != "fit" else ())
            differ = {k: (config.get(k, "(no such argument)"), old) for k, old in saved.items()
                      if k not in ignored and config.get(k, "(no such argument)") != old}
        if not differ:
            return
        path = self.config[self.subcommand]["ckpt_path"]
        items = ", ".join(f"{k}: given {new!r} (checkpoint: {old!r})" for k, (new, old) in differ.items())
        own = run_config(path)
        configs = [str(Path(str(c)).resolve()) for c in self.config[self.subcommand].get("config") or []]
        if own and str(own.resolve()) in configs:  # the run's own config, changed on top of it
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
        what = ("resuming would continue training another model than was trained" if self.subcommand == "fit"
                else "its weights would fail to load or score another model than was trained")
        raise CLIError(f"--ckpt_path {path} holds a model trained with other arguments than this config gives: "
                       f"{items}. {what[0].upper() + what[1:]}; {fix}")

    def _run_subcommand(self, subcommand: str) -> None:
        try:
            super()._run_subcommand(subcommand)
        except ResumeError:  # raised while fit restores the checkpoint, after config.yaml was written
            self._remove_run_files()
            raise

    def _remove_run_files(self) -> None:
        """Removes what a refused run wrote into its folder, and the folder if that leaves it empty: the
        run never started. ``_check_run_folder`` made sure no earlier run's files were there."""
        folder = self.trainer.log_dir
        if folder is None or not self.trainer.is_global_zero or not Path(folder).is_dir():
            return  # remote loggers' folders are left as they are
        folder = Path(folder)
        for name in RUN_FILES:
            path = folder / name
            if path.is_file():
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        if not any(folder.iterdir()):
            folder.rmdir()

    def _check_run_folder(self) -> None:
        """Stops before the trainer touches the run folder if an earlier run left its files there."""
        folder = self.trainer.log_dir
        if folder is None:
            return
        fs = get_filesystem(folder)
        if not fs.isdir(folder):
            return
        names = {Path(str(p)).name for p in fs.ls(folder, detail=False)}
        found = [n for n in RUN_FILES if n in names and not (n == "checkpoints" and not fs.ls(f"{folder}/{n}"))]
        found += sorted(n for n in names if n.startswith(PREDICTIONS) and n.endswith(".csv"))
        if not found:
            return
        logger = self.trainer.logger
        if isinstance(logger, (CSVLogger, TensorBoardLogger)):
            how = ("leave --trainer.logger.init_args.version unset (each run then gets the next free version_<N> "
                   "folder) or give another version or --trainer.logger.init_args.name")
        elif logger is None:
            how = ("without a logger the run writes straight into --trainer.default_root_dir: give it a new "
                   "folder, or use a logger (the configs' CSVLogger gives each run its own version_<N> folder)")
        else:
            how = "point the logger to another folder"
        raise CLIError(f"{folder} holds an earlier run's files ({', '.join(found)}), which this run would overwrite "
                       f"or delete; nothing was changed. To run, {how}; or delete those files if their results are "
                       "not needed")

    # --- running ----------------------------------------------------------------------------
    def instantiate_trainer(self, **kwargs: Any) -> Trainer:
        trainer = super().instantiate_trainer(**kwargs)
        if self.subcommand == "predict":
            trainer.callbacks.append(PredictionWriter())
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
        if not self.config["fit"].get("test_after_fit"):
            return
        ckpt = self.trainer.checkpoint_callback
        path = ckpt.best_model_path if isinstance(ckpt, ModelCheckpoint) else ""
        score = ckpt.best_model_score if path else None
        which = "the checkpoint ModelCheckpoint reports as best" if score is None else (
            f"{'the resumed run' if path == self._resumed_best else 'this run'}'s best checkpoint "
            f"({ckpt.monitor} {float(score):.4f})")
        if not path:
            rank_zero_info("Testing the final weights (no best checkpoint was saved)")
            self.trainer.test(self.model, datamodule=self.datamodule)
            return
        rank_zero_info(f"Testing {path}: {which}")
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=path)


def main(args: ArgsType = None) -> None:
    try:
        ForecastCLI(args=args)
    except (CLIError, ResumeError) as error:  # ResumeError: from the module, when fit restores the checkpoint
        sys.exit(f"ts-continuum: error: {error}")


if __name__ == "__main__":
    main()
