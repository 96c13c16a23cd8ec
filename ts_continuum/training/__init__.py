"""Training with Lightning: the LightningModule, the command-line interface and the learning curve."""

from .module import ForecastingModule

__all__ = ["ForecastingModule"]
