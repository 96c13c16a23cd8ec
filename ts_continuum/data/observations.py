"""Observation sets: irregular multivariate series with every variable at its own times.

The sibling of the grid windows (``windows.py``) for asynchronous data: nothing is resampled or
filled. A series' history is, per variable, the sorted times and values it was observed at; its
queries are the (time, variable) pairs to forecast. Both are stored flat in numpy and padded into
tensors one batch at a time:

- ``values``, ``times``: (B, C, N) history per series and variable, right-padded (padding is 0);
- ``lengths``: (B, C) observations per series and variable (0: never observed);
- ``query_times``: (B, C, M), ``query_lengths``: (B, C); ``query_values``: (B, C, M) targets when known.

Times are in the caller's unit (hours for PhysioNet) relative to the forecast origin: history
before it (negative), queries at or after it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

BATCH_KEYS = ("values", "times", "lengths", "query_times", "query_lengths")


@dataclass(frozen=True)
class ObservationSets:
    """Observations of ``len(ids)`` series, flat, sorted by (series, variable, time).

    Rows ``offsets[s]:offsets[s + 1]`` belong to series ``s``; ``position`` is each row's index in
    its (series, variable) sequence. Times within one (series, variable) are strictly increasing.
    """

    ids: np.ndarray
    n_variables: int
    offsets: np.ndarray
    variable: np.ndarray
    time: np.ndarray
    value: np.ndarray
    position: np.ndarray

    @classmethod
    def build(cls, ids: np.ndarray, series: np.ndarray, variable: np.ndarray, time: np.ndarray,
              value: np.ndarray, n_variables: int) -> "ObservationSets":
        """From one row per observation: ``series`` indexes ``ids``; ``variable`` in [0, n_variables).
        Rows may come in any order; a repeated (series, variable, time) is refused."""
        series = np.asarray(series, dtype=np.int64)
        variable = np.asarray(variable, dtype=np.int64)
        time = np.asarray(time, dtype=np.float64)
        value = np.asarray(value, dtype=np.float32)
        order = np.lexsort((time, variable, series))
        series, variable, time, value = series[order], variable[order], time[order], value[order]
        same_sequence = (series[1:] == series[:-1]) & (variable[1:] == variable[:-1])
        if np.any(same_sequence & (time[1:] == time[:-1])):
            i = int(np.flatnonzero(same_sequence & (time[1:] == time[:-1]))[0])
            raise ValueError(f"series {ids[series[i]]!r}, variable {int(variable[i])} is observed twice at time "
                             f"{time[i]:g}; average or drop duplicate observations first")
        starts = np.flatnonzero(np.concatenate([[True], ~same_sequence]))
        run = np.repeat(starts, np.diff(np.concatenate([starts, [len(series)]])))
        position = (np.arange(len(series)) - run).astype(np.int32)
        offsets = np.searchsorted(series, np.arange(len(ids) + 1)).astype(np.int64)
        return cls(np.asarray(ids), int(n_variables), offsets, variable.astype(np.int32), time, value, position)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def series(self) -> np.ndarray:
        """The series index of every row."""
        return np.repeat(np.arange(len(self.ids)), np.diff(self.offsets))

    def counts(self) -> np.ndarray:
        """(S, C) observations per series and variable."""
        out = np.zeros((len(self.ids), self.n_variables), dtype=np.int64)
        np.add.at(out, (self.series, self.variable), 1)
        return out

    def select(self, rows: np.ndarray) -> "ObservationSets":
        """The observations at ``rows`` (a boolean mask over rows), positions renumbered."""
        return ObservationSets.build(self.ids, self.series[rows], self.variable[rows], self.time[rows],
                                     self.value[rows], self.n_variables)

    def take(self, series: np.ndarray) -> "ObservationSets":
        """The series at indices ``series`` (in that order), as sets of their own."""
        series = np.asarray(series, dtype=np.int64)
        lengths = np.diff(self.offsets)[series]
        rows = np.concatenate([np.arange(self.offsets[s], self.offsets[s + 1]) for s in series]) if len(series) \
            else np.zeros(0, dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return ObservationSets(self.ids[series], self.n_variables, offsets, self.variable[rows], self.time[rows],
                               self.value[rows], self.position[rows])

    def frame(self, variables: list[str] | None = None) -> pd.DataFrame:
        """One row per observation: id, variable (name if ``variables`` given), time, value."""
        names = np.asarray(variables, dtype=object)[self.variable] if variables is not None else self.variable
        return pd.DataFrame({"id": self.ids[self.series], "variable": names, "time": self.time, "value": self.value})


def pad(sets: ObservationSets, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(values, times, lengths) of the series ``rows``: (B, C, N), (B, C, N), (B, C); N >= 1."""
    rows = np.asarray(rows, dtype=np.int64)
    B, C = len(rows), sets.n_variables
    starts, ends = sets.offsets[rows], sets.offsets[rows + 1]
    idx = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)]) if B else np.zeros(0, dtype=np.int64)
    batch_row = np.repeat(np.arange(B), ends - starts)
    var, pos = sets.variable[idx], sets.position[idx]
    lengths = np.zeros((B, C), dtype=np.int64)
    np.add.at(lengths, (batch_row, var), 1)
    N = max(1, int(lengths.max()) if lengths.size else 1)
    values = np.zeros((B, C, N), dtype=np.float32)
    times = np.zeros((B, C, N), dtype=np.float32)
    values[batch_row, var, pos] = sets.value[idx]
    times[batch_row, var, pos] = sets.time[idx]
    return torch.from_numpy(values), torch.from_numpy(times), torch.from_numpy(lengths)


def drop_observations(sets: ObservationSets, rows: np.ndarray, fraction: float,
                      rng: np.random.Generator) -> ObservationSets:
    """The series ``rows`` (in that order) with each observation dropped with probability ``fraction``;
    a series that would lose all of them keeps its first. A training augmentation: the model sees its
    histories thinned anew in every batch."""
    part = sets.take(rows)
    keep = rng.random(len(part.time)) >= fraction
    kept = np.bincount(part.series[keep], minlength=len(part))
    emptied = (kept == 0) & (np.diff(part.offsets) > 0)
    keep[part.offsets[:-1][emptied]] = True
    return part.select(keep)


def move_origins(history: ObservationSets, queries: ObservationSets, rows: np.ndarray, shifts: np.ndarray,
                 horizon: float) -> tuple[ObservationSets, ObservationSets]:
    """The series ``rows`` (in that order) split again at their forecast origins moved by ``shifts``
    (one per series, <= 0: earlier): history is every observation before the new origin, queries every
    one from it to ``horizon`` after it, times relative to the new origin. A training augmentation:
    observations the fixed origin only ever shows as history become targets too."""
    shifts = np.asarray(shifts, dtype=np.float64)
    if shifts.shape != (len(rows),) or np.any(shifts > 0) or not np.all(np.isfinite(shifts)):
        raise ValueError(f"shifts must hold one finite value <= 0 per series ({len(rows)}), got {shifts!r}")
    h, q = history.take(rows), queries.take(rows)
    series = np.concatenate([h.series, q.series])
    time = np.concatenate([h.time, q.time]) - shifts[series]
    variable, value = np.concatenate([h.variable, q.variable]), np.concatenate([h.value, q.value])
    before, after = time < 0, (time >= 0) & (time <= horizon)
    return tuple(ObservationSets.build(h.ids, series[keep], variable[keep], time[keep], value[keep],
                                       history.n_variables) for keep in (before, after))


def collate(history: ObservationSets, queries: ObservationSets, rows: list[int] | np.ndarray,
            history_dropout: float = 0.0, origin_jitter: float = 0.0, horizon: float | None = None) -> dict:
    """A batch of the series ``rows``: history, queries and their targets (see the module docstring).
    Training augmentations, drawn from torch's generator so that seeded runs repeat:
    ``origin_jitter`` > 0 moves each series' forecast origin earlier by a uniform draw from
    [0, origin_jitter) and forecasts ``horizon`` from there (:func:`move_origins`); ``history_dropout``
    > 0 then thins the histories at random (:func:`drop_observations`)."""
    index = rows = np.asarray(rows, dtype=np.int64)
    rng = np.random.default_rng(int(torch.randint(2**62, ()))) if history_dropout > 0 or origin_jitter > 0 else None
    if origin_jitter > 0:
        if horizon is None:
            raise ValueError("origin_jitter needs the forecast horizon (how far after the origin queries reach)")
        history, queries = move_origins(history, queries, rows, -origin_jitter * rng.random(len(rows)), horizon)
        rows = np.arange(len(rows))
    if history_dropout > 0:
        values, times, lengths = pad(drop_observations(history, rows, history_dropout, rng), np.arange(len(rows)))
    else:
        values, times, lengths = pad(history, rows)
    q_values, q_times, q_lengths = pad(queries, rows)
    return {"values": values, "times": times, "lengths": lengths, "query_times": q_times,
            "query_lengths": q_lengths, "query_values": q_values, "index": torch.from_numpy(index)}


class ObservationDataset(torch.utils.data.Dataset):
    """Series indices; batches are built by :func:`collate` (pass ``dataset.collate`` to a DataLoader)."""

    def __init__(self, history: ObservationSets, queries: ObservationSets):
        if len(history) != len(queries) or not np.array_equal(history.ids, queries.ids):
            raise ValueError("history and queries must describe the same series in the same order")
        self.history, self.queries = history, queries

    def __len__(self) -> int:
        return len(self.history)

    def __getitem__(self, i: int) -> int:
        return i

    def collate(self, rows: list[int], history_dropout: float = 0.0, origin_jitter: float = 0.0,
                horizon: float | None = None) -> dict:
        return collate(self.history, self.queries, rows, history_dropout, origin_jitter, horizon)
