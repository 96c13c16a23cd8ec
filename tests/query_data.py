"""Small asynchronous frames and tiny model settings shared by the asynchronous Forecaster's tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

TINY_ASYNC = dict(model="async", horizon="12h", lookback="24h", d_model=8, n_heads=2, n_layers=1, d_ff=16,
                  attention_backend="torch", max_epochs=1, enable_progress_bar=False, batch_size=16)
VARIABLES = ("hr", "lab", "temp")  # sorted, as the long form learns them


def long_records(n_series: int = 6, seed: int = 0, hours: float = 48.0, tz: str | None = None) -> pd.DataFrame:
    """One row per observation (unique_id, ds, variable, value): each variable at its own random times,
    at its own rate (hr often, temp sometimes, lab rarely), series starting at different hours."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(n_series):
        start = pd.Timestamp("2024-01-01", tz=tz) + pd.Timedelta(hours=int(rng.integers(0, 5)))
        for name, rate, freq, level in (("hr", 1.0, 0.3, 70.0), ("temp", 0.3, 0.1, 37.0), ("lab", 0.1, 0.05, 1.0)):
            n = max(int(rng.poisson(rate * hours)), 2)
            t = np.sort(rng.choice(np.arange(int(hours * 60)), size=n, replace=False)) / 60.0  # whole minutes
            v = level + np.sin(freq * t + s) + 0.1 * rng.standard_normal(n)
            rows += [(f"s{s}", start + pd.Timedelta(hours=float(x)), name, y) for x, y in zip(t, v)]
    return pd.DataFrame(rows, columns=["unique_id", "ds", "variable", "value"])


def columns_form(records: pd.DataFrame) -> pd.DataFrame:
    """The same observations with one column per variable (NaN where a variable was not measured)."""
    wide = records.pivot_table(index=["unique_id", "ds"], columns="variable", values="value").reset_index()
    wide.columns.name = None
    return wide
