"""ts-continuum: time-series forecasting with continuous softmax attention."""

from .attention import continuous_attention
from .data import load_dataset
from .forecasting import Forecaster

__version__ = "0.1.0"

__all__ = ["continuous_attention", "load_dataset", "Forecaster", "__version__"]
