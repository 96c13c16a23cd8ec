"""Saved forecasters from earlier versions keep loading and forecasting as they did.

``tests/data/forecaster-format-1`` was written by ``Forecaster.save`` at commit 40cf01c (format 1,
before the fitted-state object and the asynchronous route), from ``Forecaster(**TINY).fit(
long_frame(drop=0.2), target_cols=["y", "z"], calibration_windows=2)``; beside it is what its
``predict(level=[50])`` returned then.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ts_continuum import Forecaster

DATA = Path(__file__).resolve().parent / "data"


def test_a_format_1_save_loads_and_predicts_what_it_predicted_when_saved():
    f = Forecaster.load(DATA / "forecaster-format-1")
    then = pd.read_csv(DATA / "forecaster-format-1-predict.csv", parse_dates=["ds"])
    now = f.predict(level=[50])
    pd.testing.assert_frame_equal(now, then, check_exact=False, rtol=1e-5, atol=1e-6)
