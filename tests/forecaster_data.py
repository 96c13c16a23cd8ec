"""Small frames and tiny model settings shared by the Forecaster tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

H, LB = 6, 24
TINY = dict(horizon=H, lookback=LB, d_model=8, n_heads=2, n_layers=1, d_ff=16, patch_len=8, stride=4,
            attention_backend="torch", max_epochs=1, enable_progress_bar=False, batch_size=32)


def long_frame(seed: int = 0, drop: float = 0.0, tz: str | None = None) -> pd.DataFrame:
    """Three hourly series of different lengths and starts, targets y and z; ``drop`` removes rows."""
    rng = np.random.default_rng(seed)
    parts = []
    for sid, n, start, level in (("a", 80, "2021-01-01", 0.0), ("b", 60, "2021-01-02 05:00", 10.0),
                                 ("c", 100, "2020-12-30 13:00", -5.0)):
        k = np.arange(n)
        parts.append(pd.DataFrame({
            "unique_id": sid,
            "ds": pd.date_range(start, periods=n, freq="h", tz=tz),
            "y": level + np.sin(2 * np.pi * k / 12) + 0.1 * rng.standard_normal(n),
            "z": np.cos(2 * np.pi * k / 8) + 0.1 * rng.standard_normal(n),
        }))
    df = pd.concat(parts, ignore_index=True)
    if drop:
        df = df.drop(index=rng.choice(len(df), int(drop * len(df)), replace=False)).reset_index(drop=True)
    return df


def wide_frame(n: int = 90, seed: int = 0) -> pd.DataFrame:
    """One series with a DatetimeIndex named 'date' and variables a, b."""
    rng = np.random.default_rng(seed)
    k = np.arange(n)
    index = pd.date_range("2022-03-01", periods=n, freq="15min", name="date")
    return pd.DataFrame({"a": np.sin(k / 3) + 0.1 * rng.standard_normal(n), "b": 0.01 * k}, index=index)
