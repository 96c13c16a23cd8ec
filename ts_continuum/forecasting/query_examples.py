"""Examples for the asynchronous model: a series cut at a time into history and queries, as the
observation sets of ``data/observations.py`` (times in the time unit relative to the cut, values
scaled), and the forecasts of a batch of them mapped back to their queries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..data.observations import ObservationSets, pad
from ..models.eager_attention import eager_attention
from .query_frames import Observations, ranges
from .query_time import TimeAxis
from ..data.scaling import VariableScaler

PREDICT_CHUNK = 256  # examples per forward pass


def history_rows(obs: Observations, series: np.ndarray, cutoffs: np.ndarray, axis: TimeAxis,
                 inclusive: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rows of each example's history: its series' observations before the cutoff (at or before it
    with ``inclusive``: ``predict``'s origin is the last observation), within ``lookback``.
    Returns (example of each row, row)."""
    lo = np.empty(len(series), dtype=np.int64)
    hi = np.empty(len(series), dtype=np.int64)
    side = "right" if inclusive else "left"
    for s in np.unique(series):
        e = np.flatnonzero(series == s)
        b, end = obs.offsets[s], obs.offsets[s + 1]
        times = obs.times[b:end]
        hi[e] = b + np.searchsorted(times, cutoffs[e], side=side)
        if axis.lookback is None:
            lo[e] = b
        else:
            lo[e] = b + np.searchsorted(times, cutoffs[e] - _span(axis.lookback, times), side="left")
    return np.repeat(np.arange(len(series)), hi - lo), ranges(lo, hi)


def query_rows(obs: Observations, series: np.ndarray, cutoffs: np.ndarray,
               axis: TimeAxis) -> tuple[np.ndarray, np.ndarray]:
    """Rows each example queries: its series' observations from the cutoff to ``cutoff + horizon``."""
    lo = np.empty(len(series), dtype=np.int64)
    hi = np.empty(len(series), dtype=np.int64)
    for s in np.unique(series):
        e = np.flatnonzero(series == s)
        b, end = obs.offsets[s], obs.offsets[s + 1]
        times = obs.times[b:end]
        lo[e] = b + np.searchsorted(times, cutoffs[e], side="left")
        hi[e] = b + np.searchsorted(times, cutoffs[e] + _span(axis.horizon, times), side="right")
    return np.repeat(np.arange(len(series)), hi - lo), ranges(lo, hi)


def _span(span: float, times: np.ndarray):
    return np.int64(round(span)) if np.issubdtype(times.dtype, np.integer) else span


@dataclass(frozen=True)
class ExampleSets:
    """History and queries of ``n`` examples as observation sets (ids 0..n-1); ``query_order`` maps
    the query sets' rows (sorted by example, variable, time) to the caller's query indices."""

    history: ObservationSets
    queries: ObservationSets
    query_order: np.ndarray


def sorted_sets(n: int, example: np.ndarray, variable: np.ndarray, times: np.ndarray, values: np.ndarray,
                n_variables: int) -> tuple[ObservationSets, np.ndarray]:
    """Observation sets of rows given in any order, and the order they are stored in."""
    order = np.lexsort((times, variable, example))
    sets = ObservationSets.build(np.arange(n), example[order], variable[order], times[order], values[order],
                                 n_variables)
    return sets, order


def example_sets(obs: Observations, series: np.ndarray, cutoffs: np.ndarray, axis: TimeAxis,
                 scaler: VariableScaler, n_variables: int, query_example: np.ndarray, query_variable: np.ndarray,
                 query_times: np.ndarray, query_values: np.ndarray | None = None,
                 inclusive: bool = False) -> ExampleSets:
    """The examples (``series``, ``cutoffs``) with the given queries (example index, variable, native
    time, value in the data's units or None): history scaled, times relative to each cutoff."""
    n = len(series)
    h_example, rows = history_rows(obs, series, cutoffs, axis, inclusive)
    history, _ = sorted_sets(n, h_example, obs.variable[rows], axis.units(obs.times[rows] - cutoffs[h_example]),
                             scaler.transform(obs.values[rows], obs.variable[rows]), n_variables)
    q_values = np.zeros(len(query_example)) if query_values is None else scaler.transform(query_values,
                                                                                         query_variable)
    queries, order = sorted_sets(n, query_example, query_variable,
                                 axis.units(query_times - cutoffs[query_example]), q_values, n_variables)
    return ExampleSets(history, queries, order)


def forecast(model: torch.nn.Module, sets: ExampleSets) -> np.ndarray:
    """Scaled forecasts of every query, in the caller's query order: no-grad passes of up to
    ``PREDICT_CHUNK`` examples in eval mode with eager attention."""
    model = model.eval()
    dtype = next(model.parameters(), torch.zeros(())).dtype
    out = np.empty(len(sets.query_order))
    queries = sets.queries
    q_example, q_position = queries.series, queries.position
    with torch.no_grad(), eager_attention(model):
        for start in range(0, len(queries), PREDICT_CHUNK):
            rows = np.arange(start, min(start + PREDICT_CHUNK, len(queries)))
            values, times, lengths = pad(sets.history, rows)
            _, q_times, q_lengths = pad(queries, rows)
            pred = model(values.to(dtype), times.to(dtype), lengths, q_times.to(dtype), q_lengths)
            pred = pred.float().cpu().numpy()
            sel = np.arange(*np.searchsorted(q_example, [rows[0], rows[-1] + 1]))  # sorted by example
            out[sel] = pred[q_example[sel] - rows[0], queries.variable[sel], q_position[sel]]
    result = np.empty_like(out)
    result[sets.query_order] = out
    return result
