"""What a Forecaster must leave alone or honour in the user's session: global random generators,
the home directory in paths, the training precision, and a backend that cannot run here."""

from __future__ import annotations

import os
import random

import numpy as np
import pandas as pd
import pytest
import torch
from forecaster_data import TINY, long_frame

from ts_continuum import Forecaster

TARGETS = ["y", "z"]


def draws() -> tuple:
    return tuple(np.random.rand(2)), random.random(), torch.rand(2).tolist()


def test_fit_gives_back_the_callers_random_generators():
    """A loop that draws between fits (bootstrap samples, noise) must not get the same draws after
    every fit: fit seeds its own training, then restores Python's, NumPy's and torch's generators."""
    data = long_frame()
    seen = []
    for seed in (1, 2):
        np.random.seed(seed), random.seed(seed), torch.manual_seed(seed)
        expected = draws()
        np.random.seed(seed), random.seed(seed), torch.manual_seed(seed)
        Forecaster(**TINY, seed=0).fit(data, target_cols=TARGETS)
        assert draws() == expected, "fit moved or reseeded a global generator"
        seen.append(expected)
    assert seen[0] != seen[1]


def test_fit_restores_lightnings_seed_variables(monkeypatch):
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    monkeypatch.delenv("PL_SEED_WORKERS", raising=False)
    Forecaster(**TINY).fit(long_frame(), target_cols=TARGETS)
    assert "PL_GLOBAL_SEED" not in os.environ and "PL_SEED_WORKERS" not in os.environ
    monkeypatch.setenv("PL_GLOBAL_SEED", "7")
    monkeypatch.setenv("PL_SEED_WORKERS", "1")  # a user's seed_everything(7, workers=True)
    Forecaster(**TINY, seed=3).fit(long_frame(), target_cols=TARGETS)
    assert os.environ["PL_GLOBAL_SEED"] == "7" and os.environ["PL_SEED_WORKERS"] == "1"


def test_the_same_seed_still_trains_the_same_model_whatever_the_caller_drew():
    data = long_frame()
    torch.manual_seed(123), np.random.seed(123)
    a = Forecaster(**TINY, seed=5).fit(data, target_cols=TARGETS).predict()
    torch.rand(10), np.random.rand(10)
    b = Forecaster(**TINY, seed=5).fit(data, target_cols=TARGETS).predict()
    pd.testing.assert_frame_equal(a, b)


def test_save_and_load_expand_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    fitted = Forecaster(**TINY).fit(long_frame(), target_cols=TARGETS)
    path = fitted.save("~/models/tiny")
    assert path == tmp_path / "home" / "models" / "tiny" and path.is_dir()
    assert not (tmp_path / "~").exists()
    pd.testing.assert_frame_equal(Forecaster.load("~/models/tiny").predict(), fitted.predict())


def test_a_model_trained_in_double_precision_predicts_backtests_and_reloads_in_it(tmp_path):
    data = long_frame()
    fitted = Forecaster(**TINY, precision="64-true").fit(data, target_cols=TARGETS)
    assert next(fitted.model_.parameters()).dtype == torch.float64
    forecast = fitted.predict()
    assert forecast[TARGETS].notna().all().all()
    with pytest.warns(UserWarning, match="in-sample"):
        assert fitted.backtest(data, n_windows=2).overall["n"].min() > 0
    loaded = Forecaster.load(fitted.save(tmp_path / "double"))
    assert next(loaded.model_.parameters()).dtype == torch.float64
    pd.testing.assert_frame_equal(loaded.predict(), forecast)


@pytest.mark.parametrize("option", [{"max_epochs": 0}, {"max_steps": 0}, {"limit_train_batches": 0},
                                    {"limit_train_batches": 0.0}])
def test_settings_that_train_nothing_are_refused_rather_than_forecasting_with_random_weights(option):
    name = next(iter(option))
    forecaster = Forecaster(**{**TINY, **option})  # refused at fit, so that an older save made so still loads
    with pytest.raises(ValueError, match=f"{name}=0(.0)? trains nothing.*random weights"):
        forecaster.fit(long_frame(), target_cols=TARGETS)
    assert forecaster.model_ is None


def test_the_triton_backend_on_the_cpu_is_refused_before_training(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # CI sets it; without it Triton needs CUDA
    forecaster = Forecaster(**{**TINY, "attention_backend": "triton"}, accelerator="cpu")  # a GPU save loads
    with pytest.raises(ValueError, match=r"attention_backend='triton' cannot train with accelerator='cpu'"):
        forecaster.fit(long_frame(), target_cols=TARGETS)
    assert forecaster.model_ is None


def test_float16_weights_are_refused_before_training_because_adam_turns_them_nan():
    model = torch.nn.Linear(4, 1).half()  # why: one Adam step on float16 weights with small gradients
    model(torch.full((8, 4), 1e-3, dtype=torch.float16)).sum().mul(1e-3).backward()
    torch.optim.Adam(model.parameters(), lr=1e-3).step()
    assert not torch.isfinite(model.weight).all()
    forecaster = Forecaster(**TINY, precision="16-true")
    with pytest.raises(ValueError, match=r"precision='16-true' trains float16 weights with Adam.*'bf16-mixed'"):
        forecaster.fit(long_frame(), target_cols=TARGETS)
    assert forecaster.model_ is None
