"""The example scripts run end to end on small data (their default runs take minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from forecaster_data import long_frame

ROOT = Path(__file__).resolve().parents[1]


def test_compare_on_your_data_cross_validates_three_configurations_on_a_csv(tmp_path):
    long_frame()[["unique_id", "ds", "y"]].to_csv(tmp_path / "data.csv", index=False)
    out = tmp_path / "compare.png"
    run = subprocess.run([sys.executable, str(ROOT / "examples/compare_on_your_data.py"), str(tmp_path / "data.csv"),
                          "--horizon", "6", "--lookback", "24", "--windows", "2", "--epochs", "1", "--batches", "2",
                          "--season-length", "12", "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    table = run.stdout.split("torch thread(s):")[1]
    assert "snaive_mse" in table.splitlines()[1]
    for name in ("continuous", "softmax + rope", "softmax, interpolated inputs"):
        assert f"{name} " in table  # one row each, with its scores
    assert out.stat().st_size > 1000
