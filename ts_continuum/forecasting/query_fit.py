"""Fitting the asynchronous model (``AsyncTransformer``) on a frame: read the observations, cut each
series at its training cutoffs (``query_time.py``) into examples, hold out whole series for
validation, train with ``QueryForecastingModule`` (the per-variable metric of the PhysioNet
protocol), and the ``QueryState`` that results.

``QueryFit`` holds the Forecaster's settings for the asynchronous route; cross-validation fits fresh
models with the same settings through it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader

from ..data.observations import ObservationDataset
from ..models.size import check_model_size
from ..training.learning_curve import learning_curve_frame
from ..training.memory import ReleaseFreedMemory
from ..training.query_module import QueryForecastingModule
from .forecast_errors import listing
from .fit_loop import check_finite_weights, run_fit, seeded
from .grid_fit import Fitted
from .options import Options, check_backend, check_trains
from .query_examples import example_sets, query_rows
from .query_frames import Observations, QuerySpec, detect_query_spec, read_observations
from .query_state import QueryState
from .query_time import QueryTimes, TimeAxis
from ..data.scaling import VariableScaler


@dataclass(frozen=True)
class QueryFit:
    """The settings of an asynchronous Forecaster (its arguments, checked) and its fit."""

    model_cls: type
    times: QueryTimes
    attention: str
    pos_encoding: str
    duplicates: str
    batch_size: int
    early_stopping_patience: int
    seed: int
    options: Options

    def check_val_size(self, val_size) -> None:
        """``val_size``: a share of the series in (0, 1) or a number of series, held out to validate."""
        if val_size is None:
            return
        if isinstance(val_size, (bool, np.bool_)) or not isinstance(val_size, (int, float, np.integer, np.floating)):
            raise ValueError(f"val_size must be a share of the series (0 < val_size < 1) or a number of series held "
                             f"out for validation, got {val_size!r}")
        if isinstance(val_size, (float, np.floating)) and not 0 < val_size < 1 or val_size <= 0:
            raise ValueError(f"val_size must be a share of the series (0 < val_size < 1) or a positive number of "
                             f"series, got {val_size!r}")

    def read_training(self, df: pd.DataFrame, id_col: str | None, time_col: str | None,
                      target_cols: str | list[str] | None, variable_col: str | None,
                      value_col: str | None) -> tuple[QuerySpec, Observations]:
        """The frame's layout and its observations, with every variable observed."""
        spec = detect_query_spec(df, id_col, time_col, target_cols, variable_col, value_col)
        spec, obs = read_observations(df, spec, "training data", self.duplicates, learn_variables=True)
        seen = np.bincount(obs.variable, minlength=len(spec.variables))
        if (seen == 0).any():
            never = [spec.variables[c] for c in np.flatnonzero(seen == 0)]
            raise ValueError(f"variable(s) {listing(never)} are never observed in the training data (all NaN), so "
                             "the model could learn nothing of them; leave them out (target_cols=[...])")
        self.times.axis(obs.time_kind, obs.tz is not None)  # settings that do not fit the data fail now
        return spec, obs

    def build_model(self, n_variables: int) -> torch.nn.Module:
        """The model with the Forecaster's settings where its constructor takes them: the attention,
        positions, the horizon (its lead-time scale) and, for a grid model, the lookback as its history."""
        takes = inspect.signature(self.model_cls).parameters
        given = dict(attention=self.attention, pos_encoding=self.pos_encoding,
                     horizon=self.times.units(self.times.horizon))
        if self.times.lookback is not None:
            given["history"] = self.times.units(self.times.lookback)
        elif "history" in takes and "history" not in self.options.model:
            raise ValueError(f"{self.model_cls.__name__} reads a fixed span of history before each cutoff: give "
                             "lookback (e.g. lookback='24h'), or use model='async', which reads all of it")
        given = {k: v for k, v in given.items() if k in takes and k not in self.options.model}

        def build() -> torch.nn.Module:
            return self.model_cls(n_variables=n_variables, **given, **self.options.model)

        check_model_size(build, f"Forecaster(model={self.model_cls.__name__}) with {n_variables} variable(s)")
        return build()

    def examples(self, obs: Observations, axis: TimeAxis, series: np.ndarray, cutoffs: np.ndarray,
                 scaler: VariableScaler) -> ObservationDataset:
        """Training or validation examples with every observation they query as a target."""
        q_example, rows = query_rows(obs, series, cutoffs, axis)
        sets = example_sets(obs, series, cutoffs, axis, scaler, len(scaler.offset), q_example, obs.variable[rows],
                            obs.times[rows], obs.values[rows])
        return ObservationDataset(sets.history, sets.queries)

    def fit(self, spec: QuerySpec, obs: Observations, val_size) -> Fitted:
        """Train a fresh model on ``obs``; ``val_size`` of the series (chosen with ``seed``) validate."""
        check_backend(self.options)
        check_trains(self.options)
        axis = self.times.axis(obs.time_kind, obs.tz is not None)
        series, cutoffs = axis.training_cutoffs(obs)
        q_example, _ = query_rows(obs, series, cutoffs, axis)
        has = np.bincount(q_example, minlength=len(series)) > 0
        series, cutoffs = series[has], cutoffs[has]
        if not len(series):
            raise ValueError("no training example: no series has an observation within horizon of a training cutoff "
                             "(see docs/forecaster.md, 'Asynchronous observations'); check horizon, lookback and "
                             "cutoff against the data's times")
        train, val = self._split(series, val_size)
        scaler = VariableScaler.fit(obs.values, obs.variable, len(spec.variables))
        train_data = self.examples(obs, axis, series[train], cutoffs[train], scaler)
        val_loader = None
        if val is not None:
            val_data = self.examples(obs, axis, series[val], cutoffs[val], scaler)
            val_loader = DataLoader(val_data, batch_size=self.batch_size, shuffle=False, collate_fn=val_data.collate)
        with seeded(self.seed):
            model = self.build_model(len(spec.variables))
            module = QueryForecastingModule(model, **self.options.module)
            order = torch.Generator().manual_seed(self.seed)
            train_loader = DataLoader(train_data, batch_size=self.batch_size, shuffle=True, generator=order,
                                      collate_fn=train_data.collate)
            metrics, curve = run_fit(module, with_memory_release(self.options.trainer), train_loader, val_loader,
                                     self.early_stopping_patience)
        check_finite_weights(module, curve)
        context = obs
        if axis.lookback is not None:  # predict() reads the last lookback of each series
            ends = obs.last_times()[obs.series]
            context = obs.select(obs.times >= ends - np.asarray(axis.lookback).astype(obs.times.dtype))
        return Fitted(self.state(model.eval(), spec, scaler, context), metrics, learning_curve_frame(curve))

    def _split(self, series: np.ndarray, val_size) -> tuple[np.ndarray, np.ndarray | None]:
        """Example masks of the training and validation series: whole series are held out."""
        if val_size is None:
            return np.ones(len(series), dtype=bool), None
        ids = np.unique(series)
        n_val = int(round(val_size * len(ids))) if isinstance(val_size, (float, np.floating)) else int(val_size)
        n_val = max(n_val, 1)
        if n_val >= len(ids):
            raise ValueError(f"val_size={val_size!r} holds out {n_val} of the {len(ids)} series with training "
                             "examples, leaving none to train on: use a smaller val_size")
        held = np.random.default_rng(self.seed).permutation(ids)[:n_val]
        val = np.isin(series, held)
        return ~val, val

    def state(self, model: torch.nn.Module, spec: QuerySpec, scaler: VariableScaler,
              context: Observations | None) -> QueryState:
        return QueryState(model, spec, scaler, self.times, context, self.duplicates)


def with_memory_release(trainer_kwargs: dict) -> dict:
    """The Trainer's arguments with :class:`ReleaseFreedMemory` added to the user's callbacks: ragged
    batches fragment the C heap, so a long fit's resident memory would otherwise climb epoch by epoch."""
    given = trainer_kwargs.get("callbacks") or []
    given = list(given) if isinstance(given, (list, tuple)) else [given]
    if any(isinstance(c, ReleaseFreedMemory) for c in given):
        return dict(trainer_kwargs)
    return {**trainer_kwargs, "callbacks": given + [ReleaseFreedMemory()]}
