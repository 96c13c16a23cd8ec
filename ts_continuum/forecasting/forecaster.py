"""``Forecaster``: continuous-attention forecasting models fitted and queried on pandas DataFrames.

The class is the public face; the work is done by the grid route (``grid_fit.py``, ``grid_state.py``:
PatchTST and the encoder, ``horizon`` nominal steps after each series' last observation) and the
asynchronous route (``query_fit.py``, ``query_state.py``: ``AsyncTransformer``, forecasts at any time
and variable the caller asks for). A fit leaves a fitted state (``state_``) that every later call uses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from ..models import MODELS
from ..training import ForecastingModule
from .backtest import BacktestResult, run_backtest, run_calibration
from .cross_validation import held_out_calibration, run_cross_validation
from .errors import NotFittedError, positive_int
from .frames import forecast_frame
from .grid_fit import Fitted, GridFit
from .grid_state import GridState
from .intervals import Level, bounds, check_names, parse_levels
from .options import split_options
from .persistence import load_grid_state, save_forecaster
from .plotting import plot_backtest, plot_forecast, plot_learning_curve
from .saved_directory import read_saved, rebuild, saved_fit_record
from .steps import future_times

MODEL_ARGS = {"n_channels", "lookback", "horizon", "attention", "pos_encoding"}


class Forecaster:
    """Forecast every series of a DataFrame ``horizon`` nominal steps ahead from ``lookback`` steps.

    Args:
        model: "patchtst" or "encoder" (``ts_continuum.models``).
        horizon, lookback: forecast and input lengths in nominal steps (positive integers; default
            96 and 336).
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

    def __init__(self, model: str = "patchtst", horizon: int | None = None, lookback: int | None = None,
                 attention: str = "continuous", freq=None, pos_encoding: str = "rope", *,
                 interpolate_inputs: bool = False, batch_size: int = 64, early_stopping_patience: int = 3,
                 seed: int = 0, **kwargs):
        self.horizon = positive_int("horizon", 96 if horizon is None else horizon)
        self.lookback = positive_int("lookback", 336 if lookback is None else lookback)
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
        self._grid = GridFit(self.model_cls, self.horizon, self.lookback, attention, pos_encoding, freq,
                             self.interpolate_inputs, self.batch_size, self.early_stopping_patience, self.seed,
                             self.options)
        with torch.random.fork_rng(devices=[]):  # the throwaway weights leave the caller's generator alone
            ForecastingModule(self._grid.build_model(1), **self.options.module)  # bad arguments fail now
        self.state_: GridState | None = None
        self.fit_metrics_: dict = {}
        self.learning_curve_: pd.DataFrame | None = None

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.init_args.items())
        return f"Forecaster({args}){'' if self.state_ is None else ' [fitted]'}"

    # --- the fitted state, as attributes ---------------------------------------------------
    @property
    def model_(self) -> torch.nn.Module | None:
        """The fitted model (None before fit)."""
        return None if self.state_ is None else self.state_.model

    @property
    def spec_(self):
        """Where the series live in a frame, as read at fit."""
        return None if self.state_ is None else self.state_.spec

    @property
    def freq_(self):
        """The nominal step in native units (nanoseconds for datetimes)."""
        return None if self.state_ is None else self.state_.freq

    @property
    def scaler_(self):
        return None if self.state_ is None else self.state_.scaler

    @property
    def context_(self):
        """What ``predict()`` without a frame continues: each fitted series' last input window."""
        return None if self.state_ is None else self.state_.context

    @property
    def spacing_(self):
        """The training data's typical spacing (native units)."""
        return None if self.state_ is None else self.state_.spacing

    @property
    def series_(self) -> dict | None:
        """Series id -> index among the series fit saw."""
        return None if self.state_ is None else self.state_.series

    @property
    def calibration_(self):
        """The prediction-interval calibration (None: not calibrated)."""
        return None if self.state_ is None else self.state_.calibration

    def _set_state(self, state: GridState, metrics: dict, curve: pd.DataFrame | None) -> "Forecaster":
        self.state_, self.fit_metrics_, self.learning_curve_ = state, metrics, curve
        return self

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
        self._grid.check_val_size(val_size)
        spec, panel, freq = self._grid.read_training(df, id_col, time_col, target_cols)
        if calibration_windows is None:
            if calibration_step is not None:
                raise ValueError("calibration_step needs calibration_windows: pass both, or neither")
            return self._take(self._grid.fit(spec, panel, freq, val_size))
        calibration = held_out_calibration(self._grid, spec, panel, freq, calibration_windows, calibration_step,
                                           val_size)
        fitted = self._grid.fit(spec, panel, freq, val_size)
        fitted.state.calibration = calibration
        return self._take(fitted)

    def _take(self, fitted: Fitted) -> "Forecaster":
        return self._set_state(fitted.state, fitted.metrics, fitted.curve)

    # --- forecasting --------------------------------------------------------------------
    def predict(self, df: pd.DataFrame | None = None, level: Level | None = None) -> pd.DataFrame:
        """The next ``horizon`` nominal steps after each series' last observation, in the input's format.

        ``df=None`` continues the training series; a frame conditions on its history instead (new
        series are scaled by their own history). Timestamps are last + k * freq, k = 1..horizon.
        ``level`` (percent, e.g. ``[80, 95]``; needs ``calibrate`` first) adds conformal prediction
        intervals as columns ``<target>-lo-<level>`` and ``<target>-hi-<level>``.
        """
        state = self._fitted("predict")
        spec, levels, quantiles = state.spec, None if level is None else parse_levels(level), None
        if levels is not None:
            quantiles = state.calibrated("predict with level").quantiles(levels, spec.target_cols)
            check_names(spec.target_cols, levels, [*spec.target_cols, spec.id_col, spec.time_col or spec.index_name])
        panel = state.context if df is None else state.read(df, "predict data")
        windows = state.windows(panel)
        scaler = state.scaler_for(panel)
        values = scaler.transform(panel.values, panel.bounds)
        origins = panel.last_rows
        if df is not None:  # the kept context is the last input window alone, cut from the full history
            state.warn_short_history(windows, origins, panel, np.arange(panel.n_series))
        state.check_history(windows, values, origins, panel, np.arange(panel.n_series))
        scaled = state.forecast(windows.batch(values, origins, with_targets=False))
        times = future_times(panel.times[origins], state.freq, state.horizon)
        forecast = scaler.inverse(scaled, np.arange(panel.n_series))
        intervals = None if levels is None else (levels, *bounds(forecast, scaler.std, quantiles))
        return forecast_frame(spec, panel.ids, times, forecast, panel.time_dtype, panel.tz, intervals,
                              panel.id_dtype)

    def backtest(self, df: pd.DataFrame, n_windows: int = 1, step: int | None = None,
                 level: Level | None = None, season_length: int | None = None) -> BacktestResult:
        """Rolling-origin evaluation without training: forecasts from the last ``n_windows`` cutoffs,
        ``step`` nominal steps apart (default ``horizon``), scored against what ``df`` observed after
        each cutoff. Windows whose targets fit trained on are in-sample (a warning says so): for honest
        scores fit on the data up to the first cutoff; see ``backtest.py``. ``level`` adds the
        calibrated intervals and their coverage (needs ``calibrate`` on earlier windows).
        ``season_length`` (nominal steps, e.g. 24 for hourly data with a daily cycle) adds the seasonal
        naive forecast's scores beside persistence's: the bar that matters for data with a cycle."""
        return run_backtest(self._fitted("backtest"), df, n_windows, step, level, season_length)

    def cross_validation(self, df: pd.DataFrame, n_windows: int = 1, step: int | None = None, *, refit: bool = False,
                         id_col: str | None = None, time_col: str | None = "ds",
                         target_cols: str | list[str] | None = None, val_size: int | None = None,
                         season_length: int | None = None) -> BacktestResult:
        """Honest rolling-origin scores of this configuration: fresh copies are fitted on the data
        before the windows (once with ``refit=False``; per window, up to its cutoff, with ``refit=True``)
        and score the ``backtest`` windows of ``df``; this forecaster is not changed. Arguments as in
        ``fit`` and ``backtest``; see ``cross_validation.py``."""
        return run_cross_validation(self._grid, df, n_windows, step, refit, id_col, time_col, target_cols, val_size,
                                    season_length)

    def calibrate(self, df: pd.DataFrame, n_windows: int, step: int | None = None) -> "Forecaster":
        """Keep the errors of the backtest windows of ``df`` (as in ``backtest``) for conformal
        prediction intervals: then ``predict(level=[80, 95])``. Calibrate on data fit did not train
        on (a warning says when it did: the intervals would be too narrow). Replaces an earlier
        calibration; returns the forecaster. See ``intervals.py``."""
        state = self._fitted("calibrate")
        state.calibration = run_calibration(state, df, n_windows, step)
        return self

    # --- saving and plotting ---------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write config, weights, scalers and column metadata to the directory ``path``."""
        state = self._fitted("save")
        return save_forecaster(Path(path).expanduser(), overwrite, self.init_args, state, self.fit_metrics_,
                               self.learning_curve_)

    @classmethod
    def load(cls, path: str | Path) -> "Forecaster":
        """A forecaster saved by ``save``; it predicts exactly as the saved one did."""
        path = Path(path).expanduser()
        config = read_saved(path)
        f = rebuild(path, lambda: cls(**config["forecaster"]))
        return f._set_state(load_grid_state(path, config, f._grid), *saved_fit_record(config))

    def plot(self, history: pd.DataFrame, forecast: pd.DataFrame, id=None, history_steps: int | None = None):
        """A matplotlib Figure of one series' history and ``predict()``'s forecast (one panel per target)."""
        return plot_forecast(self._fitted("plot"), history, forecast, id, history_steps)

    def plot_backtest(self, result: BacktestResult | pd.DataFrame, id=None):
        """A matplotlib Figure of ``backtest()``'s windows for one series: each cutoff's forecast over
        the actual values, one panel per target, with its MSE/MAE."""
        return plot_backtest(self._fitted("plot_backtest"), result, id)

    def plot_learning_curve(self):
        """A matplotlib Figure of the training loss and validation MSE per epoch (the kept epoch
        marked) and the learning rate: is the model still improving, over-fitting, or stopped early?"""
        state = self._fitted("plot_learning_curve")
        title = f"{type(state.model).__name__}, {self.attention} attention"
        return plot_learning_curve(self.learning_curve_, self.options.module.get("loss", "mse"), title)

    def _fitted(self, action: str) -> GridState:
        if self.state_ is None:
            raise NotFittedError(f"this Forecaster is not fitted yet: call fit(df) (or Forecaster.load(path)) "
                                 f"before {action}")
        return self.state_
