"""Training with Lightning: the LightningModule, the command-line interface and the learning curve."""

from .memory import ReleaseFreedMemory
from .module import ForecastingModule
from .prediction_writer import PredictionWriter

__all__ = ["ForecastingModule", "PredictionWriter", "ReleaseFreedMemory"]
