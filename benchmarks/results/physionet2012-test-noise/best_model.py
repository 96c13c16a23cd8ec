"""The library's saved best model (physionet2012-weighting/wide/best/model.ckpt, seed 0 of the wide
recipe) with its data module and results row, for the scripts beside this file."""

import json
from pathlib import Path

import pandas as pd
import torch

from benchmarks.physionet.cell import SETTINGS, build_model, data_module
from ts_continuum.data.physionet import PhysioNetDataModule
from ts_continuum.training.query_module import QueryForecastingModule

FOLDER = Path("benchmarks/results/physionet2012-weighting/wide")
CELL = "async_softmax_rope_1.0_none_0"


def load_best() -> tuple[QueryForecastingModule, PhysioNetDataModule, pd.Series]:
    """(the model in eval mode, its data module set up, its row of results.csv)."""
    row = pd.read_csv(FOLDER / "results.csv").set_index("cell_id").loc[CELL]
    cell = {**SETTINGS, **json.loads(row["config"])}
    dm = data_module(cell)
    module = QueryForecastingModule(build_model(cell, dm))
    state = torch.load(FOLDER / "best" / "model.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    module.load_state_dict(state)
    return module.eval(), dm, row
