"""Which attention backend a model's layers use is the model's business: ``eager_attention`` switches
every attention layer of a model to the exact eager path for a block of code and back.

A library call that forecasts once (``Forecaster.predict``) must not pay a ``torch.compile`` of the
CPU path (tens of seconds) nor depend on the Triton kernel being available where the model was moved.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn

from .layers import MultiHeadAttention, QueryAttention


@contextlib.contextmanager
def eager_attention(model: nn.Module) -> Iterator[nn.Module]:
    """Every attention layer of ``model`` on ``backend="torch"`` inside the block, as before after it."""
    layers = [m for m in model.modules() if isinstance(m, (MultiHeadAttention, QueryAttention))]
    saved = [m.backend for m in layers]
    for m in layers:
        m.backend = "torch"
    try:
        yield model
    finally:
        for m, backend in zip(layers, saved):
            m.backend = backend
