"""The wide recipe's saved softmax model (physionet2012-weighting/wide/best/model.ckpt, seed 0), against
which these analyses were made, or any benchmark run's checkpoint, with its data module and results row, for the scripts
beside this file."""

import json
from pathlib import Path

import pandas as pd
import torch

from benchmarks.physionet.cell import SETTINGS, build_model, data_module
from ts_continuum.data.physionet import PhysioNetDataModule
from ts_continuum.training.query_module import QueryForecastingModule

FOLDER = Path("benchmarks/results/physionet2012-weighting/wide")
CELL = "async_softmax_rope_1.0_none_0"


def load_run(folder: Path, cell_id: str, checkpoint: Path) -> tuple[QueryForecastingModule, PhysioNetDataModule, pd.Series]:
    """A benchmark run's checkpoint: (the model in eval mode, its data module set up, its row of
    ``folder``'s results.csv)."""
    row = pd.read_csv(folder / "results.csv").set_index("cell_id").loc[cell_id]
    cell = {**SETTINGS, **json.loads(row["config"])}
    dm = data_module(cell)
    module = QueryForecastingModule(build_model(cell, dm))
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    module.load_state_dict(state)
    return module.eval(), dm, row


def load_best() -> tuple[QueryForecastingModule, PhysioNetDataModule, pd.Series]:
    """The library's best model (module docstring)."""
    return load_run(FOLDER, CELL, FOLDER / "best" / "model.ckpt")
