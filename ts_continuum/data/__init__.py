"""Data: bundled datasets, protocol splits and windows, the irregular regime, Lightning data modules."""

from .bundled import load_dataset
from .datamodule import ForecastDataModule
from .physionet import PhysioNetDataModule
from .protocol import IrregularRegime, split_rows
from .windows import WindowDataset

__all__ = ["load_dataset", "ForecastDataModule", "PhysioNetDataModule", "IrregularRegime", "WindowDataset",
           "split_rows"]
