"""The forecast API on pandas DataFrames: ``Forecaster`` (docs/forecaster.md)."""

from .backtest import BacktestResult
from .forecast_errors import NotFittedError, TrainingDivergedError
from .forecaster import Forecaster

__all__ = ["Forecaster", "BacktestResult", "NotFittedError", "TrainingDivergedError"]
