"""The one window builder: series -> model windows, for regular and irregular timestamps alike,
vectorised with numpy. The grid ``Forecaster`` uses ``Windows`` on many series; ``ForecastDataModule``
uses ``WindowDataset``, the special case of one regular series with the irregular regime on top.
(The asynchronous observation sets, ``observations.py``, are its sibling for data without a grid.)

An origin is an observation (a row). Its inputs are the observations in (origin - lookback,
origin] in nominal steps, the most recent ``lookback`` of them if denser, right-aligned into the
model's ``lookback`` slots; unused slots are masked. Input times are relative to the origin, so a
regular, complete window has times -lookback+1..0 and takes the models' regular fast path. Targets
are the observations after the origin: one at t lands in horizon slot k = round((t - origin) / freq),
k = 1..horizon (observations rounding to the same slot are averaged); ``y_mask`` is False where none
lands. On regular complete data this is exactly the standard sliding window.

With ``fill_inputs``, each window's inputs are read out on every nominal step -lookback+1..0 by
linear interpolation between that window's own observations (held flat before the first), the
conventional way to give irregular data to a model built for regular steps; targets stay the
observations, and nothing after the origin is used. Data denser than the nominal step then
contributes every observation of the window's span, not only the most recent ``lookback``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler

from .interpolation import interpolate_window

EPS = 1e-6
SNAP = 1e-6  # times this close to a whole number of steps are taken as exact (float noise)


def to_steps(delta: np.ndarray, freq: float | int) -> np.ndarray:
    """Native time differences -> nominal steps (float64), whole numbers made exact."""
    steps = np.asarray(delta, dtype=np.float64) / float(freq)
    whole = np.rint(steps)
    return np.where(np.abs(steps - whole) < SNAP, whole, steps)


class Windows:
    """Window bounds of every row of series concatenated row-wise (``bounds``: (S + 1,) offsets)."""

    def __init__(self, times: np.ndarray, bounds: np.ndarray, freq: float | int, lookback: int, horizon: int,
                 fill_inputs: bool = False):
        self.times, self.bounds, self.freq = times, bounds, freq
        self.lookback, self.horizon, self.fill_inputs = lookback, horizon, fill_inputs
        n = len(times)
        self.steps = np.empty(n)  # nominal steps since the series' first observation
        self.in_lo = np.empty(n, dtype=np.int64)  # first input row (inclusive)
        self.tgt_lo = np.empty(n, dtype=np.int64)  # target rows [tgt_lo, tgt_hi)
        self.tgt_hi = np.empty(n, dtype=np.int64)
        for b, e in zip(bounds[:-1], bounds[1:]):
            s = to_steps(times[b:e] - times[b], freq)
            self.steps[b:e] = s
            rows = np.arange(b, e)
            first = b + np.searchsorted(s, s - lookback + EPS, side="right")
            self.in_lo[b:e] = first if fill_inputs else np.maximum(first, rows - lookback + 1)
            self.tgt_lo[b:e] = b + np.searchsorted(s, s + 0.5, side="left")
            self.tgt_hi[b:e] = b + np.searchsorted(s, s + horizon + 0.5, side="left")

    def _relative(self, rows: np.ndarray, origins: np.ndarray) -> np.ndarray:
        """Times of ``rows`` (W, K) relative to ``origins`` (W,), in nominal steps."""
        return to_steps(self.times[rows] - self.times[origins][:, None], self.freq)

    def inputs(self, values: np.ndarray, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x (W, L, C) with 0 where unobserved, x_mask (W, L, C) bool, x_time (W, L) float32."""
        L = self.lookback
        count = origins - self.in_lo[origins] + 1
        K = max(L, int(count.max(initial=0)))  # more than L only with fill_inputs on data denser than freq
        slots = np.arange(K)
        first = (K - count)[:, None]
        used = slots[None, :] >= first
        rows = np.where(used, origins[:, None] - (K - 1) + slots[None, :], origins[:, None])
        x = values[rows]
        mask = used[..., None] & ~np.isnan(x)
        t = self._relative(rows, origins)
        t_first = np.take_along_axis(t, first, axis=1)
        t = np.where(used, t, t_first - (first - slots[None, :]))  # unused slots: any increasing times
        if self.fill_inputs:
            return on_grid(x, mask, t, L)
        return np.where(mask, x, 0.0).astype(np.float32), mask, t.astype(np.float32)

    def targets(self, values: np.ndarray, origins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """y (W, H, C) with NaN where nothing was observed, y_mask (W, H, C) bool."""
        H, C, W = self.horizon, values.shape[1], len(origins)
        lo, hi = self.tgt_lo[origins], self.tgt_hi[origins]
        width = max(1, int((hi - lo).max(initial=0)))
        rows = lo[:, None] + np.arange(width)[None, :]
        valid = rows < hi[:, None]
        rows = np.where(valid, rows, origins[:, None])
        k = np.clip(np.floor(self._relative(rows, origins) + 0.5).astype(np.int64) - 1, 0, H - 1)
        v = values[rows]
        observed = valid[..., None] & ~np.isnan(v)
        cell = ((np.arange(W)[:, None, None] * H + k[..., None]) * C + np.arange(C))[observed]
        sums = np.bincount(cell, weights=v[observed], minlength=W * H * C)
        counts = np.bincount(cell, minlength=W * H * C)
        y_mask = (counts > 0).reshape(W, H, C)
        y = np.full(W * H * C, np.nan)
        np.divide(sums, counts, out=y, where=counts > 0)
        return y.reshape(W, H, C), y_mask

    def input_counts(self, values: np.ndarray, origins: np.ndarray) -> np.ndarray:
        """Observed values of each variable in each origin's input window, (W, C)."""
        cum = np.concatenate([np.zeros((1, values.shape[1]), dtype=np.int64), np.cumsum(~np.isnan(values), 0)])
        return cum[origins + 1] - cum[self.in_lo[origins]]

    def origins(self, end: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """Rows whose window fits its series: a full lookback span before the origin, the horizon
        before ``end`` (S,) and the origin at or after ``start`` (S,), all in series steps."""
        codes = np.repeat(np.arange(len(self.bounds) - 1), np.diff(self.bounds))
        ok = (self.steps >= self.lookback - 1.5) & (self.steps + self.horizon <= end[codes] + 0.5)
        if start is not None:
            ok &= self.steps >= start[codes] - EPS
        return np.flatnonzero(ok)

    def usable(self, values: np.ndarray, origins: np.ndarray) -> np.ndarray:
        """Training origins with every variable observed in the inputs and some target observed."""
        has_inputs = (self.input_counts(values, origins) > 0).all(1)
        return origins[has_inputs & (self.tgt_hi[origins] > self.tgt_lo[origins])]

    def batch(self, values: np.ndarray, origins: np.ndarray, with_targets: bool = True) -> dict[str, torch.Tensor]:
        x, x_mask, x_time = self.inputs(values, origins)
        out = {"x": torch.from_numpy(x), "x_mask": torch.from_numpy(x_mask), "x_time": torch.from_numpy(x_time)}
        if with_targets:
            y, y_mask = self.targets(values, origins)
            out["y"], out["y_mask"] = torch.from_numpy(y.astype(np.float32)), torch.from_numpy(y_mask)
        return out


def on_grid(x: np.ndarray, mask: np.ndarray, t: np.ndarray, L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs (W, K, C) at times ``t`` (W, K) read out on the nominal steps -L+1..0 by linear
    interpolation between each window's observed values of each variable; a variable with none in a
    window stays masked there (fit skips such windows; predict and backtest refuse them)."""
    W, C = x.shape[0], x.shape[2]
    grid = np.arange(-L + 1, 1, dtype=np.float64)
    out = np.zeros((W, L, C), dtype=np.float32)
    seen = np.zeros((W, C), dtype=bool)
    for w in range(W):
        out[w], seen[w] = interpolate_window(grid, t[w], x[w].astype(np.float32), mask[w])
    filled = np.broadcast_to(seen[:, None, :], (W, L, C)).copy()
    return out, filled, np.broadcast_to(grid.astype(np.float32), (W, L)).copy()


class WindowBatches(Dataset):
    """Whole batches built at once: the sampler hands over a list of window indices."""

    def __init__(self, windows: Windows, values: np.ndarray, origins: np.ndarray):
        self.windows, self.values, self.origins = windows, values, origins

    def __len__(self) -> int:
        return len(self.origins)

    def __getitem__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        return self.windows.batch(self.values, self.origins[np.asarray(indices)])


def window_loader(windows: Windows, values: np.ndarray, origins: np.ndarray, batch_size: int,
                  shuffle: bool, seed: int = 0) -> DataLoader:
    data = WindowBatches(windows, values, origins)
    order = RandomSampler(data, generator=torch.Generator().manual_seed(seed)) if shuffle else SequentialSampler(data)
    return DataLoader(data, batch_size=None, sampler=BatchSampler(order, batch_size, drop_last=False))


class WindowDataset(Dataset):
    """``Windows`` over rows [start, end) of one regular scaled (rows, channels) array, row r at
    time r: the data module's sliding windows, origin ``start + lookback - 1 + i`` for item i.

    Items are dicts: ``x`` (L, C) inputs, NaN where not observed (``mask``); ``x_mask`` (L, C) bool;
    ``x_time`` (L,) input times in nominal steps relative to the last input slot (0), plus each row's
    ``time_offsets`` (jitter); ``y`` (H, C) targets, every row observed or not (each regime is scored
    on identical targets); ``y_time`` (H,) = 1..H. With ``interpolate``, dropped inputs are filled by
    linear interpolation between the window's own (jittered) observations (the conventional
    baseline: no look-ahead past the forecast origin) and every slot is marked observed.
    """

    def __init__(
        self,
        values: np.ndarray,
        start: int,
        end: int,
        lookback: int,
        horizon: int,
        mask: np.ndarray | None = None,
        time_offsets: np.ndarray | None = None,
        interpolate: bool = False,
    ):
        self.values = np.ascontiguousarray(values, dtype=np.float32)
        self.start, self.lookback, self.horizon = start, lookback, horizon
        self.count = end - start - lookback - horizon + 1
        if self.count < 1:
            raise ValueError(
                f"rows [{start}, {end}) hold {end - start} rows: too few for one window of lookback {lookback} "
                f"+ horizon {horizon}; use a shorter lookback/horizon or more data"
            )
        self.mask = mask
        self.offsets = None if time_offsets is None else time_offsets.astype(np.float32)
        self.interpolate = interpolate and mask is not None
        self.targets = self.values[start:end]
        self.inputs = self.targets if mask is None else np.where(mask[start:end], self.targets, np.float32(np.nan))
        self.windows = Windows(np.arange(end - start, dtype=np.float64), np.array([0, end - start]), 1, lookback,
                               horizon)
        self.origins = self.windows.origins(end=np.array([end - start - 1.0]))
        self.y_time = torch.arange(1, horizon + 1, dtype=torch.float32)

    def __len__(self) -> int:
        return self.count

    def observed(self, i: int) -> np.ndarray:
        """(L, C) bool: which inputs of window ``i`` were observed, also when ``interpolate`` fills the rest."""
        if self.mask is None:
            return np.ones((self.lookback, self.values.shape[1]), bool)
        return self.mask[self.start + i : self.start + i + self.lookback]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.__getitems__([i])[0]

    def __getitems__(self, indices: list[int]) -> list[dict[str, torch.Tensor]]:
        """Items ``indices`` cut at once (the DataLoader asks so for each batch)."""
        index = np.asarray(indices, dtype=np.int64)
        if ((index < 0) | (index >= self.count)).any():
            raise IndexError(indices)
        origins = self.origins[index]
        x, m, t = self.windows.inputs(self.inputs, origins)
        y = self.windows.targets(self.targets, origins)[0].astype(np.float32)
        if self.offsets is not None:
            t = t + self.offsets[self.start + index[:, None] + np.arange(self.lookback)]
        if self.interpolate:
            x, _, t = on_grid(x, m, t, self.lookback)
            m = np.ones_like(m)
        else:
            x[~m] = np.nan
        return [{"x": torch.from_numpy(x[k]), "x_mask": torch.from_numpy(m[k]), "x_time": torch.from_numpy(t[k]),
                 "y": torch.from_numpy(y[k]), "y_time": self.y_time} for k in range(len(index))]
