"""The long-term forecasting protocol of ``ForecastDataModule``: splits and the irregular regime.

Splits (Informer/Autoformer protocol, also used by PatchTST):
- ETT hourly: train rows [0, 8640), val [8640 - L, 11520), test [11520 - L, 14400);
- ETT 15-minute: the same months, four times the rows;
- any other series: 70 / 10 / 20 % in time order, val and test starting L rows early.
A window starting at row s has inputs rows [s, s + L) and targets rows [s + L, s + L + H); every
window whose targets lie inside the split is kept (no dropped last batch at test time). The windows
themselves are cut by ``windows.WindowDataset``.

The irregular regime removes a fraction of the *input* observations (independently per channel
or whole time steps) and may jitter timestamps. The removal pattern is drawn once per series and
seed, so overlapping windows agree on which observations exist, as with a genuinely irregular
sensor. Targets stay the full regular future, so every regime is scored on identical targets.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

ETT_HOUR_BORDERS = (8640, 11520, 14400)
# A Literal, so the CLI lists the choices and refuses others when parsing
DropMode = Literal["channel", "step"]
DROP_MODES: tuple[str, ...] = get_args(DropMode)


def split_rows(name: str | None, n_rows: int, lookback: int) -> dict[str, tuple[int, int]]:
    """Row ranges [start, end) of the train/val/test splits for a dataset of ``n_rows`` rows."""
    key = (name or "").lower()
    if key in ("etth1", "etth2", "ettm1", "ettm2"):
        factor = 4 if key.startswith("ettm") else 1
        a, b, c = (factor * r for r in ETT_HOUR_BORDERS)
        return {"train": (0, a), "val": (a - lookback, b), "test": (b - lookback, c)}
    n_train, n_test = int(n_rows * 0.7), int(n_rows * 0.2)
    n_val = n_rows - n_train - n_test
    return {
        "train": (0, n_train),
        "val": (n_train - lookback, n_train + n_val),
        "test": (n_rows - n_test - lookback, n_rows),
    }


def min_rows(lookback: int, horizon: int) -> int:
    """Fewest rows from which on each split of the 70/10/20 protocol holds at least one window."""
    need = lookback + horizon

    def fits(n: int) -> bool:
        return all(end - start >= need for start, end in split_rows(None, n, lookback).values())

    # From here on every split fits (0.7 n >= L + H, 0.2 n and 0.1 n >= H; + 10 for rounding) ...
    n = max(math.ceil(need / 0.7), 10 * horizon) + 10
    while n > need and fits(n - 1):  # ... and going down, the last length before one does not
        n -= 1
    return n


@dataclass(frozen=True)
class IrregularRegime:
    """How inputs are thinned and their timestamps disturbed; deterministic per ``seed``."""

    drop: float = 0.0
    mode: str = "channel"
    jitter: float = 0.0
    seed: int = 0

    def __post_init__(self):
        for name, value in (("drop", self.drop), ("jitter", self.jitter)):
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise ValueError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
        if not isinstance(self.seed, numbers.Integral) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"regime_seed must be a non-negative integer, got {self.seed!r}")
        if not 0.0 <= self.drop < 1.0:
            raise ValueError(f"drop must be a fraction in [0, 1), got {self.drop!r}")
        if self.mode not in DROP_MODES:
            raise ValueError(f"drop_mode must be one of {DROP_MODES}, got {self.mode!r}")
        if not 0.0 <= self.jitter < 0.5:
            raise ValueError(f"jitter must lie in [0, 0.5) nominal steps (to keep time order), got {self.jitter!r}")

    @property
    def is_regular(self) -> bool:
        return self.drop == 0.0 and self.jitter == 0.0

    def observation_mask(self, n_rows: int, n_channels: int, max_gap: int) -> np.ndarray:
        """(n_rows, n_channels) bool, True = observed. No gap exceeds ``max_gap`` rows, so every
        window of ``max_gap + 1`` rows sees each channel at least once."""
        rng = np.random.default_rng([self.seed, 1])
        shape = (n_rows, n_channels) if self.mode == "channel" else (n_rows, 1)
        keep = rng.random(shape) >= self.drop
        for c in range(keep.shape[1]):
            kept = np.flatnonzero(keep[:, c])
            if np.diff(np.concatenate([[-1], kept, [n_rows]])).max() - 1 <= max_gap:
                continue  # the usual case: no overlong gap
            run = 0
            for r in range(n_rows):  # restore one observation in every gap longer than max_gap
                run = 0 if keep[r, c] else run + 1
                if run > max_gap:
                    keep[r, c], run = True, 0
        return np.broadcast_to(keep, (n_rows, n_channels)).copy()

    def time_offsets(self, n_rows: int) -> np.ndarray:
        """Jitter of each row's timestamp in nominal steps, uniform in [-jitter, jitter]."""
        if self.jitter == 0.0:
            return np.zeros(n_rows)
        rng = np.random.default_rng([self.seed, 2])
        return rng.uniform(-self.jitter, self.jitter, n_rows)
