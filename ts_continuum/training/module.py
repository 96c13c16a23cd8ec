"""``ForecastingModule``: the training logic (loss, metrics, optimiser, schedules) around any model.

The model is a ``ForecastModel`` (``ts_continuum.models.base``: ``PatchTST``, ``EncoderTransformer`` or
a subclass of your own) taking ``(x, x_mask, x_time)`` and returning ``(B, H, C)``;
batches are dicts with ``x``, ``x_mask``, ``x_time``, ``y`` and optionally ``y_mask`` (targets that
exist; irregular futures leave gaps, which take no part in loss or metrics);
this module knows nothing of its insides except ``set_attention`` (switch softmax <-> continuous)
and ``config`` (its constructor arguments, stored in checkpoints so they rebuild the model).
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
from typing import Literal, get_args

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_warn
from torch import nn
from torchmetrics import MeanAbsoluteError, MeanSquaredError

from ..models.base import ForecastModel

# Literal annotations: the CLI lists the choices in --help and refuses others when parsing
Loss = Literal["mse", "mae", "huber"]
Schedule = Literal["type3", "onecycle", "constant", "cosine"]
LOSSES = {"mse": F.mse_loss, "mae": F.l1_loss, "huber": F.smooth_l1_loss}
SCHEDULES = get_args(Schedule)
DEFAULT_PCT_START = 0.3
STEPS_KEY = "lr_schedule_steps"  # checkpoint entry: the optimiser steps a onecycle/cosine schedule was planned for
SAME_MATHS = ("attention_backend",)  # model arguments a checkpoint may be loaded with another value of
EVAL_IDLE = ("dropout", "head_dropout")  # model arguments evaluation does not use (eval mode)


class ResumeError(ValueError):
    """A checkpoint this fit cannot resume as configured (the ``ts-continuum`` command prints it without a
    traceback)."""


def check_optimiser(lr: float, weight_decay: float) -> None:
    """Adam refuses a negative lr only when fit starts (after the run folder and its config are
    written), and lets NaN through."""
    if not (_finite(lr) and lr > 0):
        raise ValueError(f"lr must be a positive number, got {lr!r}")
    if not (_finite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"weight_decay must be a number >= 0 (0: none), got {weight_decay!r}")


def check_precision(precision: object) -> None:
    """Adam keeps its state in the weights' dtype. Under '16-true' (float16 weights) its eps (1e-8)
    and the squares of small gradients underflow to zero, so the first step divides zero by zero and
    the weights become NaN, which would only show later as a diverged run."""
    if str(precision) == "16-true":
        raise ValueError("precision='16-true' trains float16 weights with Adam, whose eps (1e-8) and squared small "
                         "gradients underflow to zero in float16: the first step would make the weights NaN. Use "
                         "'16-mixed' on a GPU (float16 compute, float32 weights), 'bf16-mixed' or 'bf16-true'")


def _finite(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def pct_start_unused(pct_start: float, lr_schedule: str) -> str:
    return (f"pct_start={pct_start} has no effect with lr_schedule={lr_schedule!r}: only 'onecycle' warms up. "
            f"Remove pct_start from the config (on the command line: --model.pct_start {DEFAULT_PCT_START}, the "
            "default, which this schedule ignores), or use --model.lr_schedule onecycle")


class ForecastingModule(L.LightningModule):
    """Trains and scores a forecaster: loss, MSE/MAE metrics, Adam and a learning-rate schedule.

    Args:
        model: the forecaster, a ``ForecastModel``: ``PatchTST``, ``EncoderTransformer`` or your own
            subclass; in YAML a ``class_path`` + ``init_args`` (its arguments: ``--model.model.help PatchTST``).
        loss: training loss (MSE and MAE are always reported).
        lr: Adam learning rate, > 0 (the peak rate for "onecycle").
        lr_schedule: "type3" (PatchTST: constant for 4 epochs, then x0.9 per epoch), "onecycle"
            (PatchTST's "TST": one cycle over all steps), "cosine" (decay to 0 over all steps) or
            "constant".
        pct_start: fraction of the steps in which "onecycle" warms up; only "onecycle" uses it.
        weight_decay: Adam weight decay, >= 0.
    """

    def __init__(
        self,
        model: ForecastModel,
        loss: Loss = "mse",
        lr: float = 1e-4,
        lr_schedule: Schedule = "type3",
        pct_start: float = DEFAULT_PCT_START,
        weight_decay: float = 0.0,
    ):
        super().__init__()
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {list(LOSSES)}, got {loss!r}")
        if lr_schedule not in SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {list(SCHEDULES)}, got {lr_schedule!r}")
        check_optimiser(lr, weight_decay)
        if not 0.0 < pct_start < 1.0:
            raise ValueError(f"pct_start must be a fraction in (0, 1), got {pct_start!r}")
        if pct_start != DEFAULT_PCT_START and lr_schedule != "onecycle":
            # A silently unused setting would misreport the recipe that was run. The default itself is
            # let through: checkpoints of every schedule store it.
            raise ValueError(pct_start_unused(pct_start, lr_schedule))
        self.model = model
        self.save_hyperparameters(ignore=["model"])
        self._schedule_steps: int | None = None  # set by configure_optimizers for the step-wise schedules
        self.diverged_epoch: int | None = None  # the epoch whose mean training loss was not finite
        self.loss_fn = LOSSES[loss]
        self.metrics = nn.ModuleDict(
            {f"{split}_{name}": cls() for split in ("val", "test") for name, cls in
             (("mse", MeanSquaredError), ("mae", MeanAbsoluteError))}
        )

    def setup(self, stage: str) -> None:
        """A model built for other windows than the data module cuts (lookback, horizon, channels)
        fails deep in torch, on a shape: named here instead, with both values."""
        data = getattr(self._trainer, "datamodule", None) if self._trainer is not None else None
        if data is None:
            return
        differ = [f"{name} {getattr(self.model, name)} (data module: {getattr(data, name)})"
                  for name in ("lookback", "horizon", "n_channels")
                  if hasattr(self.model, name) and hasattr(data, name)
                  and getattr(self.model, name) != getattr(data, name)]
        if differ:
            raise ValueError(f"the model was built for other windows than the data module gives: {', '.join(differ)}; "
                             "build the model with the data module's lookback, horizon and n_channels")

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model(batch["x"], batch.get("x_mask"), batch.get("x_time"))

    def _observed(self, pred: torch.Tensor, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictions and targets where a target exists (``y_mask``: irregular future data)."""
        mask = batch.get("y_mask")
        if mask is None:
            return pred.reshape(-1), batch["y"].reshape(-1)
        return pred[mask], batch["y"][mask]

    def training_step(self, batch, batch_idx):
        loss = self.loss_fn(*self._observed(self(batch), batch))
        self.log("train_loss", loss, prog_bar=True, on_step=True, on_epoch=True, batch_size=len(batch["y"]))
        return loss

    def on_train_epoch_end(self) -> None:
        # Lightning trains on after a NaN or infinite loss, and every later step only trains broken
        # weights: stop after the first epoch whose mean loss is not finite, and say why (once: every
        # process holds the same diverged_epoch, so all return here alike).
        if self.diverged_epoch is not None:
            return
        loss = self.trainer.callback_metrics.get("train_loss_epoch")
        diverged = loss is not None and not bool(torch.isfinite(loss))
        if not self.trainer.strategy.reduce_boolean_decision(diverged, all=False):
            return
        self.trainer.should_stop, self.diverged_epoch = True, self.current_epoch
        min_epochs = self.trainer.min_epochs or 0
        stops = ("so training stops there" if self.current_epoch + 1 >= min_epochs else
                 f"and min_epochs={min_epochs} keeps it training on broken weights")
        rank_zero_warn(
            f"training diverged: the mean training loss of epoch {self.current_epoch} is "
            f"{float(loss) if diverged else 'not finite on another process'}, {stops}. "
            f"Lower the learning rate (lr={self.hparams.lr:g}), clip gradients (Trainer gradient_clip_val=1.0) "
            "or look for extreme values in the data.")

    def _evaluate(self, batch, split: str):
        pred, target = self._observed(self(batch), batch)
        for name in ("mse", "mae"):
            metric = self.metrics[f"{split}_{name}"]
            metric.update(pred.float(), target.float())
            self.log(f"{split}_{name}", metric, prog_bar=name == "mse", on_epoch=True, batch_size=len(batch["y"]))

    def _reset(self, split: str) -> None:
        # fresh metric states each epoch: states left by a run under inference_mode (e.g. a
        # validate() before fit()) cannot be updated in place outside it. Sums in float32 whatever
        # the training precision: 'bf16-true' converts the states with the model, and bfloat16 sums
        # over a test set were 2 % off.
        for name in ("mse", "mae"):
            metric = self.metrics[f"{split}_{name}"]
            metric.set_dtype(torch.float32)
            metric.reset()

    def on_validation_epoch_start(self) -> None:
        self._reset("val")

    def on_test_epoch_start(self) -> None:
        self._reset("test")

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, "test")

    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        return self(batch)

    def set_attention(self, kind: str) -> None:
        """Continue (or evaluate) with the other attention: the parameters are the same."""
        self.model.set_attention(kind)

    # --- optimisation -------------------------------------------------------------------
    def configure_optimizers(self):
        if self._trainer is not None:  # also called bare, to inspect the schedule
            check_precision(self.trainer.precision)
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
        schedule = self.hparams.lr_schedule
        if schedule == "constant":
            return opt
        if schedule == "type3":
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** max(0, epoch - 3))
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}
        total = max(1, int(self.trainer.estimated_stepping_batches))
        self._schedule_steps = total
        if schedule == "onecycle":
            sched = torch.optim.lr_scheduler.OneCycleLR(
                opt, max_lr=self.hparams.lr, total_steps=total, pct_start=self.hparams.pct_start
            )
        else:
            sched = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total))
            )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # --- the model's arguments reach the loggers and checkpoints ------------------------
    def _model_record(self) -> dict:
        cls = type(self.model)
        return {"model_class": f"{cls.__module__}.{cls.__qualname__}",
                "model_config": dict(getattr(self.model, "config", {}))}

    def _log_model(self) -> None:
        """The model is left out of the saved hyperparameters (load_from_checkpoint passes those
        back to ``__init__``), so a plain Trainer's ``hparams.yaml`` said nothing of the architecture
        or the attention: logged beside them here."""
        for logger in self.loggers:
            logger.log_hyperparams(self._model_record())

    def on_fit_start(self) -> None:
        self._log_model()

    def on_test_start(self) -> None:
        self._log_model()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint.update(self._model_record())
        if self._schedule_steps is not None:
            checkpoint[STEPS_KEY] = self._schedule_steps

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Refuses weights trained as another model (Lightning loads them into whatever model was
        built: options without weights of their own, such as revin, sink or attention, would score
        or train on as another model without a word), a resume with other training options (the
        restored optimiser and schedule keep the checkpoint's), and a onecycle/cosine schedule resumed
        over another number of steps (OneCycleLR fails deep in torch once it runs past its plan, and
        cosine jumps to another learning-rate curve without a word)."""
        trainer = self._trainer  # None when loaded outside a Trainer (load_from_checkpoint)
        fitting = trainer is not None and trainer.state.fn == TrainerFn.FITTING
        differ = model_differences(checkpoint, self.model, evaluating=not fitting)
        if differ:
            items = ", ".join(f"{k}: given {new!r} (checkpoint: {old!r})" for k, (new, old) in differ.items())
            raise ResumeError(f"the checkpoint holds a model trained with other arguments than this one: {items}. "
                              "Build the model with the checkpoint's arguments, or use "
                              "ForecastingModule.from_checkpoint(path), which rebuilds it (and takes "
                              "attention=... to score the weights with the other attention on purpose)")
        if not fitting:
            return
        saved = checkpoint.get("hyper_parameters") or {}
        options = {k: (self.hparams[k], old) for k, old in saved.items()
                   if k in self.hparams and k != "model" and self.hparams[k] != old}
        if options:
            text = ", ".join(f"{k}={new!r} (checkpoint {old!r})" for k, (new, old) in options.items())
            raise ResumeError(f"a resumed fit continues the checkpoint's run, its optimiser and schedule state "
                              f"included, so other training options would mix two recipes: {text}. Resume with the "
                              "checkpoint's options, or start a new run from these weights "
                              "(ForecastingModule.from_checkpoint(path) and a new Trainer)")
        planned = planned_steps(checkpoint)
        schedule = checkpoint.get("hyper_parameters", {}).get("lr_schedule", "step-wise")
        if planned is None:
            if schedule == "cosine":  # its LambdaLR keeps no length; only STEPS_KEY records it
                rank_zero_warn("this cosine checkpoint predates the record of its schedule's length, so resuming "
                               "cannot check it: resume with the same max_epochs (or max_steps), batches per epoch, "
                               "accumulate_grad_batches and devices as the run that wrote it, or the learning rate "
                               "jumps to another curve")
            return
        estimate = trainer.estimated_stepping_batches
        steps = max(1, int(estimate)) if math.isfinite(estimate) else estimate
        if steps != planned:
            raise ResumeError(
                f"the checkpoint's {schedule} learning-rate schedule was planned for {planned} optimiser steps, "
                f"but this run would take {steps}. A resumed fit continues that schedule, so it needs the "
                "settings that decided the count: the same max_epochs (or max_steps), batches per epoch "
                "(limit_train_batches, batch_size, the data), accumulate_grad_batches and devices as the run that "
                "wrote it. To train longer, start a new run instead (from these weights: "
                "ForecastingModule.from_checkpoint)")

    @classmethod
    def from_checkpoint(cls, path: str, map_location="cpu", **model_overrides) -> "ForecastingModule":
        """Rebuild module and model from a checkpoint; ``model_overrides`` change model arguments
        that leave the parameters unchanged, e.g. ``attention="continuous"`` on a softmax-trained model."""
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
        model = _rebuild_model(ckpt, path, model_overrides)
        # LightningCLI adds its own entries (e.g. "_instantiator") to the saved hyperparameters
        accepted = inspect.signature(cls.__init__).parameters
        hparams = {k: v for k, v in ckpt.get("hyper_parameters", {}).items() if k in accepted and k != "model"}
        module = cls(model=model, **hparams)
        try:
            module.load_state_dict(ckpt["state_dict"])
        except RuntimeError as error:
            if not model_overrides:
                raise
            given = ", ".join(f"{k}={v!r}" for k, v in model_overrides.items())
            raise ValueError(f"{given} builds a model whose weights differ in shape from the checkpoint's, so they "
                             "cannot be loaded; override only arguments that keep the weights, such as attention, "
                             f"attention_backend or dropout ({str(error).splitlines()[0]})") from error
        return module

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path, map_location=None, hparams_file=None, strict=None,
                             weights_only=None, **kwargs) -> "ForecastingModule":
        """Lightning's loader. Without ``model=`` the model is rebuilt from the checkpoint (its class and
        arguments are saved in it), as ``from_checkpoint`` does; with one, it must be built as trained."""
        if "model" not in kwargs:
            ckpt = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
            kwargs["model"] = _rebuild_model(ckpt, checkpoint_path, {})
        return super().load_from_checkpoint(checkpoint_path, map_location=map_location, hparams_file=hparams_file,
                                            strict=strict, weights_only=weights_only, **kwargs)


def _rebuild_model(ckpt: dict, path, overrides: dict) -> nn.Module:
    if "model_class" not in ckpt:
        raise ValueError(f"{path} was not written by ForecastingModule (no model_class entry)")
    module_name, _, class_name = ckpt["model_class"].rpartition(".")
    model_cls = getattr(importlib.import_module(module_name), class_name)
    return model_cls(**{**ckpt["model_config"], **overrides})


def model_differences(checkpoint: dict, model: nn.Module, evaluating: bool) -> dict[str, tuple]:
    """The model arguments (or the class) in which ``model`` differs from the one the checkpoint
    was trained as, as {name: (given, checkpoint's)}: loading its weights into it would score
    (or train on as) another model. Arguments with the same maths, and when ``evaluating`` the ones
    eval mode does not use, may differ."""
    built = f"{type(model).__module__}.{type(model).__qualname__}"
    saved_class, saved = checkpoint.get("model_class"), checkpoint.get("model_config")
    if saved_class is None or saved is None:
        return {}
    if built != saved_class:
        return {"model class": (built, saved_class)}
    config = getattr(model, "config", {})
    ignored = SAME_MATHS + (EVAL_IDLE if evaluating else ())
    return {k: (config.get(k, "(no such argument)"), old) for k, old in saved.items()
            if k not in ignored and config.get(k, "(no such argument)") != old}


def planned_steps(checkpoint: dict) -> int | None:
    """The optimiser steps a checkpoint's onecycle/cosine schedule was planned for (None: per-epoch or
    constant). Checkpoints from before ``STEPS_KEY`` was written still hold OneCycleLR's own count."""
    if STEPS_KEY in checkpoint:
        return int(checkpoint[STEPS_KEY])
    schedulers = checkpoint.get("lr_schedulers") or []
    total = schedulers[0].get("total_steps") if schedulers and isinstance(schedulers[0], dict) else None
    return int(total) if total is not None else None
