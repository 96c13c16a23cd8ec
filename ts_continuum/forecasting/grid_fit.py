"""Fitting a grid model (PatchTST, the encoder) on a frame: reading the training frame in one pass
(layout, validated series, nominal step), cutting training and validation windows, training, and the
``GridState`` that results.

``GridFit`` holds the Forecaster's settings for a grid model; cross-validation and calibration fit
fresh models with the same settings through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..models.size import check_model_size
from ..training import ForecastingModule
from ..training.learning_curve import learning_curve_frame
from .forecast_errors import positive_int
from .fit_loop import check_finite_weights, run_fit, seeded
from .frames import FrameSpec, Panel, detect_spec, read_panel, warn_constant_targets
from .grid_state import GridState
from .options import Options, check_backend, check_trains
from ..data.scaling import Scaler
from .steps import describe, nominal_step, spacing_hint, typical_spacing, warn_if_blind
from ..data.windows import EPS, Windows, window_loader


@dataclass
class Fitted:
    """A fit's result: the fitted state, ``fit_metrics_`` and the learning curve (a DataFrame)."""

    state: object
    metrics: dict
    curve: pd.DataFrame


@dataclass(frozen=True)
class GridFit:
    """The settings of a grid Forecaster (``Forecaster``'s arguments, checked) and its fit."""

    model_cls: type
    horizon: int
    lookback: int
    attention: str
    pos_encoding: str
    freq: object  # as given: None (inferred), a duration or a number
    interpolate_inputs: bool
    batch_size: int
    early_stopping_patience: int
    seed: int
    options: Options

    @property
    def blind(self) -> bool:
        """Tokens placed by index: irregular data would be read as evenly spaced."""
        return self.attention == "softmax" and self.pos_encoding in ("learned", "none") and not self.interpolate_inputs

    def check_val_size(self, val_size: int | None) -> None:
        if val_size is not None and positive_int("val_size", val_size) < self.horizon:
            raise ValueError(f"val_size ({val_size}) must be at least horizon ({self.horizon}) nominal steps so "
                             "that one validation window fits")

    def read_training(self, df: pd.DataFrame, id_col: str | None, time_col: str | None,
                      target_cols: str | list[str] | None) -> tuple[FrameSpec, Panel, float | int]:
        """The frame's layout, its validated series and the nominal step (given or inferred): one pass."""
        spec = detect_spec(df, id_col, time_col, target_cols)
        panel = read_panel(df, spec, "training data")
        spec = spec.with_time(panel)
        warn_constant_targets(panel, spec)
        freq = nominal_step(panel, self.freq, self.lookback, spec.time_col)
        warn_if_blind(panel, freq, self.blind, self.pos_encoding)
        return spec, panel, freq

    def windows(self, panel: Panel, freq: float | int) -> Windows:
        return Windows(panel.times, panel.bounds, freq, self.lookback, self.horizon, self.interpolate_inputs)

    def build_model(self, n_channels: int) -> torch.nn.Module:
        def build() -> torch.nn.Module:
            return self.model_cls(n_channels=n_channels, lookback=self.lookback, horizon=self.horizon,
                                  attention=self.attention, pos_encoding=self.pos_encoding, **self.options.model)

        given = "".join(f", {k}={v!r}" for k, v in self.options.model.items())
        check_model_size(build, f"Forecaster(horizon={self.horizon}, lookback={self.lookback}{given}) with "
                                f"{n_channels} target(s)")
        return build()

    def fit(self, spec: FrameSpec, panel: Panel, freq: float | int, val_size: int | None) -> Fitted:
        """Train a fresh model on ``panel``; ``val_size`` nominal steps at the end of each series validate."""
        check_backend(self.options)  # here, not in __init__: a model trained on a GPU still loads on a CPU
        check_trains(self.options)  # likewise: an older save made with such settings still loads
        windows = self.windows(panel, freq)
        span = windows.steps[panel.last_rows]  # steps from each series' first to last observation
        self._check_span(panel, span, freq, val_size or 0)
        if val_size:
            cut = span - val_size
            train_panel = panel.take(windows.steps <= cut[panel.codes] + EPS)
            train_windows = self.windows(train_panel, freq)
        else:
            cut, train_panel, train_windows = span, panel, windows
        scaler = Scaler.fit(train_panel.values, train_panel.bounds)
        train_values = scaler.transform(train_panel.values, train_panel.bounds)
        origins = train_windows.usable(train_values, train_windows.origins(end=cut))
        if not len(origins):
            raise ValueError("no training window has an observation of every target in its lookback window and "
                             "an observed target in its horizon; the data is too sparse for this lookback/horizon"
                             + spacing_hint(panel, freq))
        val_loader = None
        if val_size:
            values = scaler.transform(panel.values, panel.bounds)
            val_origins = windows.usable(values, windows.origins(end=span, start=cut))
            if not len(val_origins):
                raise ValueError(f"val_size={val_size} leaves no usable validation window; "
                                 "use a larger val_size or None")
            val_loader = window_loader(windows, values, val_origins, self.batch_size, shuffle=False)

        with seeded(self.seed):
            model = self.build_model(len(spec.target_cols))
            module = ForecastingModule(model, **self.options.module)
            train_loader = window_loader(train_windows, train_values, origins, self.batch_size, True, self.seed)
            metrics, curve = run_fit(module, self.options.trainer, train_loader, val_loader,
                                     self.early_stopping_patience)
        check_finite_weights(module, curve)
        last = windows.in_lo[panel.last_rows][panel.codes]  # the input window behind predict()
        context = panel.take(np.arange(len(panel.times)) >= last)
        return Fitted(self.state(model.eval(), spec, freq, scaler, context, typical_spacing(panel)), metrics,
                      learning_curve_frame(curve))

    def state(self, model: torch.nn.Module, spec: FrameSpec, freq: float | int, scaler: Scaler, context: Panel,
              spacing: float | None) -> GridState:
        """The fitted state of a model trained (or loaded) with these settings."""
        return GridState(model, spec, freq, scaler, context, spacing, self.lookback, self.horizon,
                         self.interpolate_inputs, self.blind, self.pos_encoding)

    def _check_span(self, panel: Panel, span: np.ndarray, freq: float | int, val_size: int) -> None:
        need = self.lookback + self.horizon + val_size
        short = np.flatnonzero(span + 1 < need - 0.5)
        if len(short):
            extra = f" + val_size {val_size}" if val_size else ""
            got = ", ".join(f"{panel.ids[i]!r}: {span[i] + 1:g}" for i in short[:5])
            raise ValueError(
                f"{len(short)} series are too short to train on: fitting needs each series to span at least lookback "
                f"{self.lookback} + horizon {self.horizon}{extra} = {need} nominal steps of "
                f"{describe(freq, panel.time_kind)} "
                f"from first to last observation (spans: {got}). Drop these series or use a shorter lookback/horizon"
                + (" or a smaller val_size" if val_size else "") + spacing_hint(panel, freq)
            )
