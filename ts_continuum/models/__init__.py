"""Forecasting models: plain ``nn.Module``s, usable without Lightning."""

from __future__ import annotations

from torch import nn

from .async_transformer import AsyncTransformer
from .encoder import EncoderTransformer
from .grid_patchtst import GridPatchTST
from .observation_baselines import HistoryMean, LastObservation
from .patch_graph import PatchGraphTransformer
from .patchtst import PatchTST
from .query_base import QueryModel

MODELS: dict[str, type[nn.Module]] = {"patchtst": PatchTST, "encoder": EncoderTransformer}
# models of observation sets (every variable at its own times, forecasts at any time): Forecaster(model=...)
QUERY_MODELS: dict[str, type[QueryModel]] = {"async": AsyncTransformer, "patch-graph": PatchGraphTransformer,
                                              "grid-patchtst": GridPatchTST}


def build_model(name: str, **kwargs) -> nn.Module:
    """A model by short name ("patchtst", "encoder") or class name, with its keyword arguments."""
    key = name.lower()
    by_class = {cls.__name__.lower(): cls for cls in MODELS.values()}
    cls = MODELS.get(key) or by_class.get(key)
    if cls is None:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    return cls(**kwargs)


__all__ = ["PatchTST", "EncoderTransformer", "AsyncTransformer", "GridPatchTST", "PatchGraphTransformer",
           "LastObservation", "HistoryMean", "QueryModel", "MODELS", "QUERY_MODELS", "build_model"]
