"""The asynchronous Forecaster on PhysioNet 2012 agrees with the study's evaluation of the same model,
and the example script runs (on 50 stays: the bundled file is read once in this module)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from benchmarks.physionet.cell import evaluate
from ts_continuum import Forecaster
from ts_continuum.data.physionet import PhysioNetDataModule
from ts_continuum.models import AsyncTransformer
from ts_continuum.training.query_module import QueryForecastingModule

ROOT = Path(__file__).resolve().parents[1]
STAYS, SEED = 50, 0


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny AsyncTransformer trained for a few steps the study's way, and the study's test scores."""
    dm = PhysioNetDataModule(split_seed=SEED, max_stays=STAYS, batch_size=8, eval_batch_size=4)
    dm.setup("fit")
    torch.manual_seed(0)
    model = AsyncTransformer(dm.n_variables, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0,
                             attention_backend="torch")
    module = QueryForecastingModule(model, lr=3e-3)
    trainer = L.Trainer(max_steps=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    trainer.fit(module, dm)
    ckpt = tmp_path_factory.mktemp("run") / "best.ckpt"
    trainer.save_checkpoint(ckpt)  # as the study keeps a run's best model
    return dm, module, evaluate(module, dm.test_dataloader(), dm.n_variables), ckpt


def load_example():
    spec = importlib.util.spec_from_file_location("physionet_forecaster", ROOT / "examples/physionet_forecaster.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


@pytest.mark.parametrize("saved", ["forecaster", "checkpoint"])
def test_the_example_reproduces_the_study_evaluation_of_a_saved_model(trained, tmp_path, saved):
    """Pointed at a Forecaster saved from the model, or at the run's checkpoint itself."""
    dm, module, study, ckpt = trained
    path = ckpt
    if saved == "forecaster":
        f = Forecaster.from_model(module.model, variables=dm.variables, scale_min=dm.scale_min,
                                  scale_max=dm.scale_max, horizon=24.0, cutoff=24.0, duplicates="mean")
        path = f.save(tmp_path / "model")
    out = tmp_path / "stay.png"
    scores = load_example().main(["--model", str(path), "--max-stays", str(STAYS), "--split-seed", str(SEED),
                                  "--out", str(out)])
    assert scores["stays"] == len(dm.split_ids["test"])
    assert scores["queries"] == len(dm.datasets["test"].queries.value)
    np.testing.assert_allclose(scores["test_mse"], study["mse"], rtol=1e-6)  # float32 model, float64 sums
    np.testing.assert_allclose(scores["test_mae"], study["mae"], rtol=1e-6)
    assert out.stat().st_size > 1000


def test_the_example_fits_a_small_model_from_the_raw_frame(trained, tmp_path):  # trained: the file is read once
    scores = load_example().main(["--max-stays", str(STAYS), "--split-seed", str(SEED), "--epochs", "1",
                                  "--out", str(tmp_path / "stay.png")])
    assert np.isfinite(scores["test_mse"]) and scores["queries"] > 0
