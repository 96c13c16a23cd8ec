"""Training with Lightning: the LightningModule and the command-line interface."""

from .module import ForecastingModule

__all__ = ["ForecastingModule"]
