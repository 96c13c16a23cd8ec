"""Data: bundled datasets, protocol splits and windows, the irregular regime, Lightning data modules."""

from .bundled import load_dataset

__all__ = ["load_dataset"]
