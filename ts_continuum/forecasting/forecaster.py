"""``Forecaster``: continuous-attention forecasting models fitted and queried on pandas DataFrames."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..models import MODELS
from ..models.layers import MultiHeadAttention
from ..training import ForecastingModule
from ..training.learning_curve import learning_curve_frame
from .backtest import BacktestResult, run_backtest, run_calibration
from .cross_validation import held_out_calibration, run_cross_validation
from .errors import NotFittedError, positive_int, user_stacklevel
from .frames import FrameSpec, Panel, detect_spec, forecast_frame, read_panel, warn_constant_targets
from .intervals import Calibration, Level, bounds, check_names, parse_levels
from ..models.size import check_model_size
from .options import check_backend, check_trains, split_options
from .persistence import load_forecaster, save_forecaster
from .plotting import plot_backtest, plot_forecast, plot_learning_curve
from .scaling import Scaler
from .timing import (check_calendar, check_resolution, describe, future_times, infer_freq, irregularity, parse_freq,
                     spacing_hint, typical_spacing, warn_business_days, warn_spacing_mismatch)
from .training import check_finite_weights, run_fit, seeded
from .windows import EPS, Windows, window_loader

MODEL_ARGS = {"n_channels", "lookback", "horizon", "attention", "pos_encoding"}
PREDICT_CHUNK = 2048  # windows per forward pass


@contextlib.contextmanager
def eager_attention(model: torch.nn.Module):
    """Eager attention for a forward pass: one predict must not pay a torch.compile."""
    layers = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    saved = [m.backend for m in layers]
    for m in layers:
        m.backend = "torch"
    try:
        yield
    finally:
        for m, backend in zip(layers, saved):
            m.backend = backend


class Forecaster:
    """Forecast every series of a DataFrame ``horizon`` nominal steps ahead from ``lookback`` steps.

    Args:
        model: "patchtst" or "encoder" (``ts_continuum.models``).
        horizon, lookback: forecast and input lengths in nominal steps (positive integers).
        attention: "continuous" (integrates over real time between observations) or "softmax".
        freq: the nominal step: a fixed duration ('h', '15min', '7D', pd.Timedelta) for datetimes, a
            number for numeric times; None infers the median spacing (see ``freq_`` after fit).
        pos_encoding: "rope" (rotary positions at the real timestamps, so a softmax model also
            sees gaps), "learned" or "none" (token indices: blind to gaps, hence a warning on
            irregular data with softmax attention).
        interpolate_inputs: read each window's inputs out on every nominal step by linear
            interpolation between its own observations, so the model sees a complete regular window
            (targets stay the observations). The conventional baseline for irregular data; on ETT
            inputs dropped at random it beat both attentions (``benchmarks/results/RESULTS.md``).
        batch_size: training windows per step.
        early_stopping_patience: epochs without a better ``val_mse`` before stopping (with ``val_size``).
        seed: seeds weights, shuffling and dropout (the caller's global generators are restored after fit).
        **kwargs: model arguments (d_model, n_layers, dropout, attention_backend, ...), training
            arguments (lr, loss, lr_schedule, weight_decay) and Lightning Trainer arguments
            (max_epochs, accelerator, enable_progress_bar, ...); unknown names are a ValueError.
    """

    def __init__(self, model: str = "patchtst", horizon: int = 96, lookback: int = 336,
                 attention: str = "continuous", freq=None, pos_encoding: str = "rope", *,
                 interpolate_inputs: bool = False, batch_size: int = 64, early_stopping_patience: int = 3,
                 seed: int = 0, **kwargs):
        self.horizon, self.lookback = positive_int("horizon", horizon), positive_int("lookback", lookback)
        self.batch_size = positive_int("batch_size", batch_size)
        self.early_stopping_patience = positive_int("early_stopping_patience", early_stopping_patience)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        if not isinstance(interpolate_inputs, (bool, np.bool_)):
            raise ValueError(f"interpolate_inputs must be True or False, got {interpolate_inputs!r}")
        self.interpolate_inputs = bool(interpolate_inputs)
        if str(model).lower() not in MODELS:
            raise ValueError(f"unknown model {model!r}; choose one of {', '.join(map(repr, MODELS))}")
        self.model_name, self.seed = str(model).lower(), int(seed)
        self.model_cls = MODELS[self.model_name]
        self.attention, self.pos_encoding, self.freq = attention, pos_encoding, freq
        self.options = split_options(self.model_cls, kwargs, MODEL_ARGS)
        self.init_args = dict(model=self.model_name, horizon=self.horizon, lookback=self.lookback,
                              attention=attention, freq=freq, pos_encoding=pos_encoding,
                              # saved only when set, so older versions still load what does not use it
                              **({"interpolate_inputs": True} if self.interpolate_inputs else {}),
                              batch_size=self.batch_size,
                              early_stopping_patience=self.early_stopping_patience, seed=self.seed, **kwargs)
        with torch.random.fork_rng(devices=[]):  # the throwaway weights leave the caller's generator alone
            ForecastingModule(self._build_model(1), **self.options.module)  # bad arguments fail now
        self.model_: torch.nn.Module | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.init_args.items())
        return f"Forecaster({args}){'' if self.model_ is None else ' [fitted]'}"

    # --- fitting ------------------------------------------------------------------------
    def fit(self, df: pd.DataFrame, id_col: str | None = None, time_col: str | None = "ds",
            target_cols: str | list[str] | None = None, val_size: int | None = None, *,
            calibration_windows: int | None = None, calibration_step: int | None = None) -> "Forecaster":
        """Train on every series of ``df`` (long or wide format, see ``docs/forecaster.md``).

        ``val_size``: nominal steps at the end of each series held out for validation, early
        stopping and the choice of the best epoch (at least ``horizon``); None trains on all of it.
        Training needs every series to span ``lookback + horizon (+ val_size)`` nominal steps.
        Datetimes spaced by calendar months, quarters or years are refused without ``freq=`` (a
        fixed step cannot follow them): fit on month numbers instead, see ``docs/forecaster.md``.

        ``calibration_windows`` (with ``calibration_step``, default ``horizon``) makes ``predict`` ready
        for ``level=`` in one call: a copy fitted on each series up to its last ``calibration_windows``
        backtest windows scores them (conformal scores from data it never saw), then the forecaster
        fits on everything and keeps those scores. Two fits; ``calibrate`` is the manual route.
        """
        self._check_val_size(val_size)
        spec, panel, freq = self._read_training(df, id_col, time_col, target_cols)
        if calibration_windows is None:
            if calibration_step is not None:
                raise ValueError("calibration_step needs calibration_windows: pass both, or neither")
            return self._fit_panel(spec, panel, freq, val_size)
        calibration = held_out_calibration(self, spec, panel, freq, calibration_windows, calibration_step, val_size)
        self._fit_panel(spec, panel, freq, val_size)
        self.calibration_ = calibration
        return self

    def _check_val_size(self, val_size: int | None) -> None:
        if val_size is not None and positive_int("val_size", val_size) < self.horizon:
            raise ValueError(f"val_size ({val_size}) must be at least horizon ({self.horizon}) nominal steps so "
                             "that one validation window fits")

    def _read_training(self, df: pd.DataFrame, id_col: str | None, time_col: str | None,
                       target_cols: str | list[str] | None) -> tuple[FrameSpec, Panel, float]:
        """The frame's layout, its validated series and the nominal step (given or inferred)."""
        spec = detect_spec(df, id_col, time_col, target_cols)
        panel = read_panel(df, spec, "training data")
        spec = spec.with_time(panel)
        warn_constant_targets(panel, spec)
        freq = None if self.freq is None else parse_freq(self.freq, panel.time_kind)
        time_ref = f"df[{spec.time_col!r}]" if spec.time_col else "df.index"
        check_calendar(panel, freq is not None, f"{time_ref}.dt" if spec.time_col else time_ref)
        freq = infer_freq(panel) if freq is None else freq
        warn_business_days(panel, freq, time_ref)
        check_resolution(panel, freq, self.lookback)
        self._warn_if_blind(panel, freq)
        return spec, panel, freq

    def _fit_panel(self, spec: FrameSpec, panel: Panel, freq, val_size: int | None) -> "Forecaster":
        check_backend(self.options)  # here, not in __init__: a model trained on a GPU still loads on a CPU
        check_trains(self.options)  # likewise: an older save made with such settings still loads
        windows = self._windows(panel, freq)
        span = windows.steps[panel.last_rows]  # steps from each series' first to last observation
        self._check_span(panel, span, freq, val_size or 0)
        if val_size:
            cut = span - val_size
            train_panel = panel.take(windows.steps <= cut[panel.codes] + EPS)
            train_windows = self._windows(train_panel, freq)
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
            model = self._build_model(len(spec.target_cols))
            module = ForecastingModule(model, **self.options.module)
            train_loader = window_loader(train_windows, train_values, origins, self.batch_size, True, self.seed)
            metrics, curve = run_fit(module, self.options.trainer, train_loader, val_loader,
                                     self.early_stopping_patience)
        check_finite_weights(module, curve)
        self.fit_metrics_, self.learning_curve_ = metrics, learning_curve_frame(curve)
        last = windows.in_lo[panel.last_rows][panel.codes]  # the input window behind predict()
        self._set_fitted(model.eval(), spec, freq, scaler, panel.take(np.arange(len(panel.times)) >= last),
                         typical_spacing(panel))
        return self

    def _set_fitted(self, model: torch.nn.Module, spec: FrameSpec, freq, scaler: Scaler, context: Panel,
                    spacing: float | None) -> None:
        """``spacing``: the training data's typical spacing (native units; None in older saves), the
        reference for data given later."""
        self.model_, self.spec_, self.freq_, self.scaler_, self.context_ = model, spec, freq, scaler, context
        self.spacing_ = spacing
        self.series_ = {sid: i for i, sid in enumerate(context.ids)}
        self.calibration_: Calibration | None = None  # errors of another model would not describe this one

    def _windows(self, panel: Panel, freq) -> Windows:
        return Windows(panel.times, panel.bounds, freq, self.lookback, self.horizon, self.interpolate_inputs)

    def _build_model(self, n_channels: int) -> torch.nn.Module:
        def build() -> torch.nn.Module:
            return self.model_cls(n_channels=n_channels, lookback=self.lookback, horizon=self.horizon,
                                  attention=self.attention, pos_encoding=self.pos_encoding, **self.options.model)

        given = "".join(f", {k}={v!r}" for k, v in self.options.model.items())
        check_model_size(build, f"Forecaster(horizon={self.horizon}, lookback={self.lookback}{given}) with "
                                f"{n_channels} target(s)")
        return build()

    def _check_span(self, panel: Panel, span: np.ndarray, freq, val_size: int) -> None:
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

    def _warn_if_blind(self, panel: Panel, freq) -> None:
        if self.attention != "softmax" or self.pos_encoding not in ("learned", "none") or self.interpolate_inputs:
            return
        reason = irregularity(panel, freq)
        if reason:
            warnings.warn(
                f"the data is irregular ({reason}), but softmax attention with pos_encoding={self.pos_encoding!r} "
                "indexes tokens by position and cannot see the time between them: it treats the observations as "
                "evenly spaced. Use attention='continuous' or pos_encoding='rope' (real timestamps)",
                UserWarning, stacklevel=user_stacklevel())

    # --- forecasting --------------------------------------------------------------------
    def predict(self, df: pd.DataFrame | None = None, level: Level | None = None) -> pd.DataFrame:
        """The next ``horizon`` nominal steps after each series' last observation, in the input's format.

        ``df=None`` continues the training series; a frame conditions on its history instead (new
        series are scaled by their own history). Timestamps are last + k * freq, k = 1..horizon.
        ``level`` (percent, e.g. ``[80, 95]``; needs ``calibrate`` first) adds conformal prediction
        intervals as columns ``<target>-lo-<level>`` and ``<target>-hi-<level>``.
        """
        self._check_fitted("predict")
        spec, levels, quantiles = self.spec_, None if level is None else parse_levels(level), None
        if levels is not None:
            quantiles = self._calibration("predict with level").quantiles(levels, spec.target_cols)
            check_names(spec.target_cols, levels, [*spec.target_cols, spec.id_col, spec.time_col or spec.index_name])
        panel = self.context_ if df is None else self._read(df, "predict data")
        windows = self._windows(panel, self.freq_)
        scaler = self._scaler_for(panel)
        values = scaler.transform(panel.values, panel.bounds)
        origins = panel.last_rows
        if df is not None:  # the kept context is the last input window alone, cut from the full history
            self._warn_short_history(windows, origins, panel, np.arange(panel.n_series))
        self._check_history(windows, values, origins, panel, np.arange(panel.n_series))
        scaled = self._forecast(windows.batch(values, origins, with_targets=False))
        times = future_times(panel.times[origins], self.freq_, self.horizon)
        forecast = scaler.inverse(scaled, np.arange(panel.n_series))
        intervals = None if levels is None else (levels, *bounds(forecast, scaler.std, quantiles))
        return forecast_frame(self.spec_, panel.ids, times, forecast, panel.time_dtype, panel.tz, intervals,
                              panel.id_dtype)

    def _read(self, df: pd.DataFrame, what: str) -> Panel:
        panel = read_panel(df, self.spec_, what)
        check_resolution(panel, self.freq_, self.lookback)
        warn_spacing_mismatch(panel, self.spacing_, self.freq_, self.lookback, what)
        self._warn_if_blind(panel, self.freq_)
        return panel

    def _scaler_for(self, panel: Panel, upto: np.ndarray | None = None) -> Scaler:
        """Training statistics for known series; for a new one, its own history: the rows up to
        ``upto`` (S,) row indices, default all. ``predict`` forecasts after every row, so all of them
        are history; ``backtest`` passes its origins, so that no scored value shapes the scaling."""
        history = panel if upto is None else panel.take(np.arange(len(panel.times)) <= upto[panel.codes])
        own = Scaler.fit(history.values, history.bounds)
        known = np.array([self.series_.get(sid, -1) for sid in panel.ids])
        old = known[:, None] >= 0
        return Scaler(np.where(old, self.scaler_.mean[known], own.mean),
                      np.where(old, self.scaler_.std[known], own.std))

    def _warn_short_history(self, windows: Windows, origins: np.ndarray, panel: Panel, series: np.ndarray) -> None:
        """A history shorter than ``lookback`` is legal (the rest of the input window counts as missing)
        but usually forecasts worse, and passing only the rows since ``fit`` is an easy mistake."""
        covered = windows.steps[origins] + 1  # nominal steps from the series' first observation to the origin
        short = np.flatnonzero(covered < self.lookback - 0.5)
        if not len(short):
            return
        w = short[0]
        known = sorted({str(panel.ids[s]) for s in series[short] if panel.ids[s] in self.series_})
        hint = ""
        if known:
            hint = (f"; predict(df) and backtest(df) condition on df only, not on the data fit saw, so include the "
                    f"earlier rows of {', '.join(map(repr, known[:3]))}{' ...' if len(known) > 3 else ''}")
        warnings.warn(
            f"{len(short)} of {len(origins)} forecast origin(s) have less history than lookback ({self.lookback} "
            f"nominal steps of {describe(self.freq_, panel.time_kind)}), e.g. series {panel.ids[series[w]]!r} spans "
            f"{covered[w]:g} step(s) up to {panel.stamp(panel.times[origins[w]])}. The model treats the rest of its "
            f"input window as missing, which usually forecasts worse: give each series its full history{hint}",
            UserWarning, stacklevel=user_stacklevel())

    def _check_history(self, windows: Windows, values: np.ndarray, origins: np.ndarray, panel: Panel,
                       series: np.ndarray) -> None:
        counts = windows.input_counts(values, origins)
        missing = np.argwhere(counts == 0)
        if not len(missing):
            return
        w, c = missing[0]
        origin, name = origins[w], self.spec_.target_cols[c]

        def when(row: int):
            return panel.stamp(panel.times[row])

        first = panel.bounds[series[w]]
        seen = np.flatnonzero(~np.isnan(values[first : origin + 1, c]))
        if len(seen):  # observed earlier: the most recent values are missing, not the history short
            last = first + seen[-1]
            cause = (f"its {origin - last} most recent values of {name!r} are missing (since {when(last + 1)}; the "
                     f"last observed one is at {when(last)}). The model needs at least one observation of every "
                     f"target in its lookback window: fill the missing values (e.g. with ffill) or leave out the "
                     f"rows after {when(last)}")
        else:
            cause = ("the model needs at least one observation of every target in its lookback window: give a "
                     "longer history")
        raise ValueError(
            f"series {panel.ids[series[w]]!r} has no observation of {name!r} in the {self.lookback} nominal steps up "
            f"to {when(origin)} ({len(np.unique(missing[:, 0]))} window(s) affected); {cause}"
        )

    def _forecast(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        """One no-grad pass (in chunks) in eval mode with eager attention: scaled (W, H, C)."""
        model = self.model_.eval()
        weight = next(model.parameters())
        # the windows are float32; a model trained at another precision (precision="64-true") got its
        # inputs cast by Lightning during training, so they are cast alike here
        cast = {"x": weight.dtype, "x_mask": torch.bool, "x_time": weight.dtype}
        out = []
        with torch.no_grad(), eager_attention(model):
            for i in range(0, len(batch["x"]), PREDICT_CHUNK):
                part = [batch[k][i : i + PREDICT_CHUNK].to(weight.device, cast[k]) for k in cast]
                out.append(model(*part).float().cpu().numpy())
        return np.concatenate(out)

    def backtest(self, df: pd.DataFrame, n_windows: int = 1, step: int | None = None,
                 level: Level | None = None, season_length: int | None = None) -> BacktestResult:
        """Rolling-origin evaluation without training: forecasts from the last ``n_windows`` cutoffs,
        ``step`` nominal steps apart (default ``horizon``), scored against what ``df`` observed after
        each cutoff. Windows whose targets fit trained on are in-sample (a warning says so): for honest
        scores fit on the data up to the first cutoff; see ``backtest.py``. ``level`` adds the
        calibrated intervals and their coverage (needs ``calibrate`` on earlier windows).
        ``season_length`` (nominal steps, e.g. 24 for hourly data with a daily cycle) adds the seasonal
        naive forecast's scores beside persistence's: the bar that matters for data with a cycle."""
        self._check_fitted("backtest")
        return run_backtest(self, df, n_windows, step, level, season_length)

    def cross_validation(self, df: pd.DataFrame, n_windows: int = 1, step: int | None = None, *, refit: bool = False,
                         id_col: str | None = None, time_col: str | None = "ds",
                         target_cols: str | list[str] | None = None, val_size: int | None = None,
                         season_length: int | None = None) -> BacktestResult:
        """Honest rolling-origin scores of this configuration: fresh copies are fitted on the data
        before the windows (once with ``refit=False``; per window, up to its cutoff, with ``refit=True``)
        and score the ``backtest`` windows of ``df``; this forecaster is not changed. Arguments as in
        ``fit`` and ``backtest``; see ``cross_validation.py``."""
        return run_cross_validation(self, df, n_windows, step, refit, id_col, time_col, target_cols, val_size,
                                    season_length)

    def calibrate(self, df: pd.DataFrame, n_windows: int, step: int | None = None) -> "Forecaster":
        """Keep the errors of the backtest windows of ``df`` (as in ``backtest``) for conformal
        prediction intervals: then ``predict(level=[80, 95])``. Calibrate on data fit did not train
        on (a warning says when it did: the intervals would be too narrow). Replaces an earlier
        calibration; returns the forecaster. See ``intervals.py``."""
        self._check_fitted("calibrate")
        self.calibration_ = run_calibration(self, df, n_windows, step)
        return self

    def _calibration(self, action: str) -> Calibration:
        if self.calibration_ is None:
            raise ValueError(f"{action} needs prediction-interval calibration: call calibrate(df, n_windows=...) "
                             "first, on data after the training period (e.g. fit on all but the last "
                             "horizon + (n_windows - 1) * step nominal steps of each series, then calibrate on the "
                             "full frame)")
        return self.calibration_

    # --- saving and plotting ---------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write config, weights, scalers and column metadata to the directory ``path``."""
        self._check_fitted("save")
        return save_forecaster(self, Path(path).expanduser(), overwrite)

    @classmethod
    def load(cls, path: str | Path) -> "Forecaster":
        """A forecaster saved by ``save``; it predicts exactly as the saved one did."""
        return load_forecaster(cls, Path(path).expanduser())

    def plot(self, history: pd.DataFrame, forecast: pd.DataFrame, id=None, history_steps: int | None = None):
        """A matplotlib Figure of one series' history and ``predict()``'s forecast (one panel per target)."""
        self._check_fitted("plot")
        return plot_forecast(self, history, forecast, id, history_steps)

    def plot_backtest(self, result: BacktestResult | pd.DataFrame, id=None):
        """A matplotlib Figure of ``backtest()``'s windows for one series: each cutoff's forecast over
        the actual values, one panel per target, with its MSE/MAE."""
        self._check_fitted("plot_backtest")
        return plot_backtest(self, result, id)

    def plot_learning_curve(self):
        """A matplotlib Figure of the training loss and validation MSE per epoch (the kept epoch
        marked) and the learning rate: is the model still improving, over-fitting, or stopped early?"""
        self._check_fitted("plot_learning_curve")
        return plot_learning_curve(self)

    def _check_fitted(self, action: str) -> None:
        if self.model_ is None:
            raise NotFittedError(f"this Forecaster is not fitted yet: call fit(df) (or Forecaster.load(path)) "
                                 f"before {action}")
