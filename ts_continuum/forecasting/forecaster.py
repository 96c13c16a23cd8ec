"""``Forecaster``: continuous-attention forecasting models fitted and queried on pandas DataFrames.

The class is the public face; the work is done by the grid route (``grid_fit.py``, ``grid_state.py``:
PatchTST and the encoder, ``horizon`` nominal steps after each series' last observation) and the
asynchronous route (``query_fit.py``, ``query_state.py``: ``AsyncTransformer``, forecasts at any time
and variable the caller asks for). A fit leaves a fitted state (``state_``) that every later call uses.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd
import torch

from ..models import MODELS, QUERY_MODELS
from ..training import ForecastingModule
from ..training.query_module import QueryForecastingModule
from .backtest import BacktestResult, run_backtest, run_calibration
from .cross_validation import held_out_calibration, run_cross_validation
from .forecast_errors import NotFittedError, positive_int
from .frames import forecast_frame
from .grid_fit import Fitted, GridFit
from .grid_state import GridState
from .intervals import Level, bounds, check_names, parse_levels
from .options import split_options
from .persistence import load_grid_state, save_forecaster
from .plotting import plot_backtest, plot_forecast, plot_learning_curve
from .query_backtest import run_query_backtest, run_query_calibration, run_query_cross_validation
from .query_fit import QueryFit
from .query_frames import DUPLICATES
from .query_persistence import load_query_state, model_parts, model_spec, save_query_forecaster
from .query_plotting import plot_queries
from .query_state import QueryState
from .query_time import QueryTimes
from .saved_directory import read_saved, rebuild, saved_fit_record
from .steps import future_times

MODEL_ARGS = {"n_channels", "lookback", "horizon", "attention", "pos_encoding"}
Span = Union[int, float, str, pd.Timedelta]  # a number (nominal steps, or the time unit) or a duration
QUERY_MODEL_ARGS = {"n_variables", "attention", "pos_encoding", "horizon"}


class Forecaster:
    """Forecast the series of a DataFrame: ``horizon`` nominal steps ahead from ``lookback`` steps (grid
    models), or at any time and variable the caller asks for (the asynchronous model).

    Args:
        model: "patchtst" or "encoder" (grid models: regular steps, every variable of a row), or
            "async" (``AsyncTransformer``: every variable at its own times, forecasts at the times
            given to ``predict(at=...)``; also "patch-graph", ``PatchGraphTransformer``, and
            "grid-patchtst"). See ``docs/forecaster.md``.
        horizon, lookback: grid models: forecast and input lengths in nominal steps (positive
            integers; default 96 and 336). Asynchronous model: durations, as numbers in the time unit
            or as "24h"/``pd.Timedelta``: how far after a cutoff to forecast (required) and how much
            history before it to read (None: all of it).
        attention: "softmax" (default) or "continuous" (integrates over real time between
            observations). The defaults follow the study (``docs/forecaster.md#defaults``): the two
            attentions tied on every real dataset tried, and softmax costs less.
        freq: grid models: the nominal step: a fixed duration ('h', '15min', '7D', pd.Timedelta)
            for datetimes, a number for numeric times; None infers the median spacing (``freq_``).
        pos_encoding: "rope" (rotary positions at the real timestamps, so a softmax model also
            sees gaps), "learned" or "none" (token indices: blind to gaps, hence a warning on
            irregular data with softmax attention).
        interpolate_inputs: grid models: read each window's inputs out on every nominal step by
            linear interpolation between its own observations, so the model sees a complete regular
            window (targets stay the observations); None (default): True for grid models (nothing
            changes on complete regular data), not applicable to the asynchronous model. On ETT
            inputs dropped at random it beat both attentions (``benchmarks/results/RESULTS.md``).
        batch_size: training windows (examples) per step.
        early_stopping_patience: epochs without a better ``val_mse`` before stopping (with ``val_size``).
        seed: seeds weights, shuffling and dropout (the caller's global generators are restored after fit).
        cutoff: asynchronous model: the training cutoff, one per series: a time of the data (a number
            for numeric times: 24 for hours since admission; a timestamp) or a duration after each
            series' first observation ("24h"); None: rolling cutoffs every ``cutoff_step``.
        cutoff_step: asynchronous model: the spacing of rolling training cutoffs (default ``horizon``).
        time_unit: asynchronous model: the unit datetimes are measured in (default "h"); numbers
            stay in their own unit.
        duplicates: asynchronous model: "raise" refuses an (id, time, variable) observed twice with
            different values; "mean" averages them.
        **kwargs: model arguments (d_model, n_layers, dropout, attention_backend, ...), training
            arguments (lr, loss, lr_schedule, weight_decay; asynchronous model also ``weighting``:
            "variable" trains on the per-variable metric's weighting) and Lightning Trainer arguments
            (max_epochs, accelerator, enable_progress_bar, ...); unknown names are a ValueError.
    """

    def __init__(self, model: str = "patchtst", horizon: Span | None = None, lookback: Span | None = None,
                 attention: str = "softmax", freq=None, pos_encoding: str = "rope", *,
                 interpolate_inputs: bool | None = None, batch_size: int = 64, early_stopping_patience: int = 3,
                 seed: int = 0, cutoff=None, cutoff_step=None, time_unit: str | None = None,
                 duplicates: str = "raise", **kwargs):
        self.batch_size = positive_int("batch_size", batch_size)
        self.early_stopping_patience = positive_int("early_stopping_patience", early_stopping_patience)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise ValueError(f"seed must be an integer, got {seed!r}")
        if interpolate_inputs is not None and not isinstance(interpolate_inputs, (bool, np.bool_)):
            raise ValueError(f"interpolate_inputs must be True, False or None (the model's default), "
                             f"got {interpolate_inputs!r}")
        name = str(model).lower()
        self.interpolate_inputs = (name not in QUERY_MODELS) if interpolate_inputs is None else bool(interpolate_inputs)
        if name not in MODELS and name not in QUERY_MODELS:
            raise ValueError(f"unknown model {model!r}; choose one of {', '.join(map(repr, [*MODELS, *QUERY_MODELS]))}")
        self.model_name, self.seed = name, int(seed)
        self.attention, self.pos_encoding, self.freq = attention, pos_encoding, freq
        self._grid: GridFit | None = None
        self._query: QueryFit | None = None
        if name in QUERY_MODELS:
            self._init_query(horizon, lookback, cutoff, cutoff_step, time_unit, duplicates, kwargs)
        else:
            self._init_grid(horizon, lookback, dict(cutoff=cutoff, cutoff_step=cutoff_step, time_unit=time_unit,
                                                    duplicates=duplicates), kwargs)
        self.state_: GridState | QueryState | None = None
        self.fit_metrics_: dict = {}
        self.learning_curve_: pd.DataFrame | None = None

    def _init_grid(self, horizon, lookback, query_only: dict, kwargs: dict) -> None:
        given = [k for k, v in query_only.items() if v is not None and not (k == "duplicates" and v == "raise")]
        if given:
            raise ValueError(f"{', '.join(given)} set(s) the asynchronous model's cutoffs and reading; "
                             f"model={self.model_name!r} forecasts nominal steps: leave {given[0]} out, or use "
                             "Forecaster(model='async', ...)")
        self.horizon = positive_int("horizon", 96 if horizon is None else horizon)
        self.lookback = positive_int("lookback", 336 if lookback is None else lookback)
        self.model_cls = MODELS[self.model_name]
        self.options = split_options(self.model_cls, kwargs, MODEL_ARGS)
        self.init_args = dict(model=self.model_name, horizon=self.horizon, lookback=self.lookback,
                              attention=self.attention, freq=self.freq, pos_encoding=self.pos_encoding,
                              interpolate_inputs=self.interpolate_inputs,
                              batch_size=self.batch_size,
                              early_stopping_patience=self.early_stopping_patience, seed=self.seed, **kwargs)
        self._grid = GridFit(self.model_cls, self.horizon, self.lookback, self.attention, self.pos_encoding,
                             self.freq, self.interpolate_inputs, self.batch_size, self.early_stopping_patience,
                             self.seed, self.options)
        with torch.random.fork_rng(devices=[]):  # the throwaway weights leave the caller's generator alone
            ForecastingModule(self._grid.build_model(1), **self.options.module)  # bad arguments fail now

    def _init_query(self, horizon, lookback, cutoff, cutoff_step, time_unit, duplicates, kwargs: dict) -> None:
        if self.freq is not None or self.interpolate_inputs:
            raise ValueError(f"freq and interpolate_inputs shape the grid models' nominal steps; model="
                             f"{self.model_name!r} reads every observation at its own time: leave them out")
        if duplicates not in DUPLICATES:
            raise ValueError(f"duplicates must be 'raise' (refuse an (id, time, variable) observed twice with "
                             f"different values) or 'mean' (average them), got {duplicates!r}")
        times = QueryTimes.parse(horizon, lookback, cutoff, cutoff_step, time_unit)
        self.horizon, self.lookback = times.horizon, times.lookback
        self.model_cls = QUERY_MODELS[self.model_name]
        self.options = split_options(self.model_cls, kwargs, QUERY_MODEL_ARGS, QueryForecastingModule)
        settings = dict(cutoff=cutoff, cutoff_step=cutoff_step, time_unit=time_unit,
                        duplicates=None if duplicates == "raise" else duplicates)
        self.init_args = dict(model=self.model_name, horizon=_plain(horizon), lookback=_plain(lookback),
                              attention=self.attention, pos_encoding=self.pos_encoding, batch_size=self.batch_size,
                              early_stopping_patience=self.early_stopping_patience, seed=self.seed,
                              **{k: _plain(v) for k, v in settings.items() if v is not None}, **kwargs)
        self._query = QueryFit(self.model_cls, times, self.attention, self.pos_encoding, duplicates, self.batch_size,
                               self.early_stopping_patience, self.seed, self.options)
        with torch.random.fork_rng(devices=[]):
            QueryForecastingModule(self._query.build_model(1), **self.options.module)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.init_args.items())
        return f"Forecaster({args}){'' if self.state_ is None else ' [fitted]'}"

    @classmethod
    def from_model(cls, model: torch.nn.Module, *, variables: Sequence, horizon: Span, scale_min=None, scale_max=None,
                   lookback: Span | None = None, cutoff=None, time_unit: str | None = None,
                   id_col: str | None = "unique_id", time_col: str = "ds",
                   variable_col: str = "variable", value_col: str = "value",
                   duplicates: str = "raise") -> "Forecaster":
        """A fitted asynchronous Forecaster around a trained model of observation sets (``AsyncTransformer``
        or ``GridPatchTST``, e.g. a PhysioNet study run's): ``variables`` names its variables in the
        model's order, ``scale_min``/``scale_max`` the per-variable min-max scaling it was trained on
        (``PhysioNetDataModule.scale_min``; None: unscaled), ``horizon``, ``lookback``, ``cutoff`` and
        ``time_unit`` as in the constructor (PhysioNet: ``horizon=24, cutoff=24`` with times in hours
        since admission). Frames then use ``id_col``, ``time_col`` and either one column per variable
        or ``variable_col``/``value_col``. It holds no series: ``predict(df, at=...)`` takes the history;
        ``save`` writes it in the library's format."""
        name, variables, scaler, settings = model_parts(model, variables, scale_min, scale_max)
        config = model.config
        f = cls(model=name, horizon=horizon, lookback=lookback, attention=config.get("attention", "softmax"),
                pos_encoding=config.get("pos_encoding", "none"), cutoff=cutoff, time_unit=time_unit,
                duplicates=duplicates, **settings)
        spec = model_spec(f._query.times, variables, id_col, time_col, variable_col, value_col)
        return f._set_state(f._query.state(copy.deepcopy(model).eval(), spec, scaler, None), {}, None)

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
        """Grid models: the nominal step in native units (nanoseconds for datetimes)."""
        return getattr(self.state_, "freq", None)

    @property
    def scaler_(self):
        return None if self.state_ is None else self.state_.scaler

    @property
    def context_(self):
        """What ``predict()`` without a frame continues: each fitted series' last input window (grid
        models) or its observations within ``lookback`` of its end (the asynchronous model)."""
        return None if self.state_ is None else self.state_.context

    @property
    def spacing_(self):
        """Grid models: the training data's typical spacing (native units)."""
        return getattr(self.state_, "spacing", None)

    @property
    def series_(self) -> dict | None:
        """Series id -> index among the series fit saw."""
        return None if self.state_ is None else self.state_.series

    @property
    def calibration_(self):
        """The prediction-interval calibration (None: not calibrated)."""
        return None if self.state_ is None else self.state_.calibration

    def _set_state(self, state: GridState | QueryState, metrics: dict, curve: pd.DataFrame | None) -> "Forecaster":
        self.state_, self.fit_metrics_, self.learning_curve_ = state, metrics, curve
        return self

    # --- fitting ------------------------------------------------------------------------
    def fit(self, df: pd.DataFrame, id_col: str | None = None, time_col: str | None = "ds",
            target_cols: str | list[str] | None = None, val_size: int | float | None = None, *,
            calibration_windows: int | None = None, calibration_step: int | None = None,
            variable_col: str | None = None, value_col: str | None = None) -> "Forecaster":
        """Train on every series of ``df`` (long or wide format, see ``docs/forecaster.md``).

        ``val_size``: grid models: nominal steps at the end of each series held out for validation,
        early stopping and the choice of the best epoch (at least ``horizon``); the asynchronous
        model: the share (0 < val_size < 1) or number of whole series held out. None trains on all.
        Grid models need every series to span ``lookback + horizon (+ val_size)`` nominal steps.
        Datetimes spaced by calendar months, quarters or years are refused without ``freq=`` (a
        fixed step cannot follow them): fit on month numbers instead, see ``docs/forecaster.md``.

        The asynchronous model reads one column per variable (``target_cols``, default every column
        but id and time; NaN: not observed) or, when the frame has a ``variable_col`` column
        (default "variable"), one row per observation with its value in ``value_col`` ("value").

        ``calibration_windows`` (grid models; with ``calibration_step``, default ``horizon``) makes
        ``predict`` ready for ``level=`` in one call: a copy fitted on each series up to its last
        ``calibration_windows`` backtest windows scores them (conformal scores from data it never
        saw), then the forecaster fits on everything and keeps those scores. Two fits; ``calibrate``
        is the manual route.
        """
        if self._query is not None:
            if calibration_windows is not None or calibration_step is not None:
                raise ValueError("fit(calibration_windows=...) is for the grid models; for the asynchronous model "
                                 "call calibrate(df) on series (or times) fit did not train on")
            self._query.check_val_size(val_size)
            spec, obs = self._query.read_training(df, id_col, time_col, target_cols, variable_col, value_col)
            return self._take(self._query.fit(spec, obs, val_size))
        if variable_col is not None or value_col is not None:
            raise ValueError(f"variable_col and value_col read the asynchronous model's long form; model="
                             f"{self.model_name!r} reads one column per target (target_cols=[...])")
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
    def predict(self, df: pd.DataFrame | None = None, level: Level | None = None, *,
                at: pd.DataFrame | None = None) -> pd.DataFrame:
        """Grid models: the next ``horizon`` nominal steps after each series' last observation, in the
        input's format. The asynchronous model: forecasts at the rows of ``at`` (id, time and, in the
        long form, variable; in the columns form every variable), exactly those rows in their order.

        ``df=None`` continues the training series; a frame conditions on its history instead (new
        series are scaled by their own history). Grid timestamps are last + k * freq, k = 1..horizon.
        ``level`` (percent, e.g. ``[80, 95]``; needs ``calibrate`` first) adds conformal prediction
        intervals as columns ``<target>-lo-<level>`` and ``<target>-hi-<level>``.
        """
        state = self._fitted("predict")
        if self._query is not None:
            if at is None:
                raise ValueError("the asynchronous model forecasts at the times you ask for: predict(df, at=queries), "
                                 f"queries holding {state.spec.id_col or 'the'} id, {state.spec.time_col!r} and, in "
                                 "the "
                                 f"long form, {state.spec.variable_col!r}")
            return state.predict(df, at, level)
        if at is not None:
            raise ValueError(f"at= asks for forecasts at your own times, but model={self.model_name!r} forecasts only "
                             "the horizon nominal steps after each series' last observation: use "
                             "Forecaster(model='async', horizon=...), which answers at any time and variable")
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

    def backtest(self, df: pd.DataFrame, n_windows: int = 1, step=None,
                 level: Level | None = None, season_length: int | None = None) -> BacktestResult:
        """Rolling-origin evaluation without training: forecasts from the last ``n_windows`` cutoffs,
        ``step`` nominal steps apart (default ``horizon``), scored against what ``df`` observed after
        each cutoff. Windows whose targets fit trained on are in-sample (a warning says so): for honest
        scores fit on the data up to the first cutoff; see ``backtest.py``. ``level`` adds the
        calibrated intervals and their coverage (needs ``calibrate`` on earlier windows).
        ``season_length`` (nominal steps, e.g. 24 for hourly data with a daily cycle) adds the seasonal
        naive forecast's scores beside persistence's: the bar that matters for data with a cycle.
        The asynchronous model scores every observation after each cutoff (its fixed cutoff, or rolling
        ones ``step`` apart, a duration): see ``query_backtest.py``."""
        state = self._fitted("backtest")
        if self._query is not None:
            if season_length is not None:
                raise ValueError("season_length counts nominal steps, which the asynchronous model has none of")
            return run_query_backtest(state, df, n_windows, step, level)
        return run_backtest(state, df, n_windows, step, level, season_length)

    def cross_validation(self, df: pd.DataFrame, n_windows: int = 1, step=None, *, refit: bool = False,
                         id_col: str | None = None, time_col: str | None = "ds",
                         target_cols: str | list[str] | None = None, val_size: int | float | None = None,
                         season_length: int | None = None, folds: int | None = None,
                         variable_col: str | None = None, value_col: str | None = None) -> BacktestResult:
        """Honest rolling-origin scores of this configuration: fresh copies are fitted on the data
        before the windows (once with ``refit=False``; per window, up to its cutoff, with ``refit=True``)
        and score the ``backtest`` windows of ``df``; this forecaster is not changed. Arguments as in
        ``fit`` and ``backtest``; see ``cross_validation.py``. The asynchronous model can also hold out
        whole series: ``folds=k`` scores each of k groups of series with a copy fitted on the others
        (the only way with a fixed cutoff); see ``query_backtest.py``."""
        if self._query is not None:
            if season_length is not None:
                raise ValueError("season_length counts nominal steps, which the asynchronous model has none of")
            return run_query_cross_validation(self._query, df, n_windows, step, refit, folds, id_col, time_col,
                                              target_cols, variable_col, value_col, val_size)
        if folds is not None or variable_col is not None or value_col is not None:
            raise ValueError(f"folds, variable_col and value_col are the asynchronous model's; model="
                             f"{self.model_name!r} cross-validates over time windows")
        return run_cross_validation(self._grid, df, n_windows, step, refit, id_col, time_col, target_cols, val_size,
                                    season_length)

    def calibrate(self, df: pd.DataFrame, n_windows: int | None = None, step=None) -> "Forecaster":
        """Keep the errors of the backtest windows of ``df`` (as in ``backtest``) for conformal
        prediction intervals: then ``predict(level=[80, 95])``. Calibrate on data fit did not train
        on (a warning says when it did: the intervals would be too narrow). Replaces an earlier
        calibration; returns the forecaster. Grid models need ``n_windows``; the asynchronous model
        scores its backtest windows (one per series by default). See ``intervals.py``."""
        state = self._fitted("calibrate")
        if self._query is not None:
            state.calibration = run_query_calibration(state, df, 1 if n_windows is None else n_windows, step)
            return self
        if n_windows is None:
            raise ValueError("calibrate needs n_windows: how many backtest windows per series to keep the errors of")
        state.calibration = run_calibration(state, df, n_windows, step)
        return self

    # --- saving and plotting ---------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write config, weights, scalers and column metadata to the directory ``path``."""
        state = self._fitted("save")
        save = save_query_forecaster if self._query is not None else save_forecaster
        return save(Path(path).expanduser(), overwrite, self.init_args, state, self.fit_metrics_, self.learning_curve_)

    @classmethod
    def load(cls, path: str | Path) -> "Forecaster":
        """A forecaster saved by ``save``; it predicts exactly as the saved one did."""
        path = Path(path).expanduser()
        config = read_saved(path)
        if config["forecaster"].get("model", "patchtst") in MODELS:  # saved before the default changed
            config["forecaster"].setdefault("interpolate_inputs", False)
        f = rebuild(path, lambda: cls(**config["forecaster"]))
        if f._query is not None:
            state = load_query_state(path, config, f._query)
        else:
            state = load_grid_state(path, config, f._grid)
        return f._set_state(state, *saved_fit_record(config))

    def plot(self, history: pd.DataFrame, forecast: pd.DataFrame, id=None, history_steps: int | None = None, *,
             variables: list | None = None):
        """A matplotlib Figure of one series' history and ``predict()``'s forecast (one panel per target).
        The asynchronous model: each variable's history, the forecasts at the queried times and the
        actual values (observations of ``history`` after its forecast origin, or a backtest's);
        ``variables`` chooses the panels (default: the variables forecast for the series)."""
        state = self._fitted("plot")
        if self._query is not None:
            if history_steps is not None:
                raise ValueError("history_steps counts nominal steps; the asynchronous model draws the whole history")
            return plot_queries(state, history, forecast, id, variables)
        if variables is not None:
            raise ValueError("variables chooses the asynchronous model's panels; a grid model draws every target")
        return plot_forecast(state, history, forecast, id, history_steps)

    def plot_backtest(self, result: BacktestResult | pd.DataFrame, id=None):
        """A matplotlib Figure of ``backtest()``'s windows for one series: each cutoff's forecast over
        the actual values, one panel per target, with its MSE/MAE."""
        state = self._fitted("plot_backtest")
        if self._query is not None:
            forecasts = result.forecasts if isinstance(result, BacktestResult) else result
            return plot_queries(state, None, forecasts, id, None)
        return plot_backtest(state, result, id)

    def plot_learning_curve(self):
        """A matplotlib Figure of the training loss and validation MSE per epoch (the kept epoch
        marked) and the learning rate: is the model still improving, over-fitting, or stopped early?"""
        state = self._fitted("plot_learning_curve")
        title = f"{type(state.model).__name__}, {self.attention} attention"
        return plot_learning_curve(self.learning_curve_, self.options.module.get("loss", "mse"), title)

    def _fitted(self, action: str):
        if self.state_ is None:
            raise NotFittedError(f"this Forecaster is not fitted yet: call fit(df) (or Forecaster.load(path)) "
                                 f"before {action}")
        return self.state_


def _plain(value):
    """A time setting as given, in a form JSON holds and ``Forecaster`` reads back the same."""
    if isinstance(value, (pd.Timedelta, dt.timedelta, np.timedelta64)):
        return str(pd.Timedelta(value))
    if isinstance(value, (pd.Timestamp, dt.datetime, np.datetime64)):
        return pd.Timestamp(value).isoformat()
    return value.item() if isinstance(value, np.generic) else value
