"""The memory a model's weights take, checked before they are allocated.

``Forecaster(horizon=10**9)`` or ``ts-continuum fit --data.horizon 1000000000`` would otherwise fail
inside torch's allocator (asking for hundreds of gigabytes) or, where the system overcommits memory,
be killed while the weights are initialised.
The model is built on torch's "meta" device, which records shapes and allocates nothing.
"""

from __future__ import annotations

import os
from typing import Callable

import torch


def physical_memory() -> int | None:
    """This machine's memory in bytes, None where the system does not say (Windows)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_model_size(build: Callable[[], torch.nn.Module], what: str) -> None:
    """Refuse a model whose weights (and buffers) alone exceed this machine's memory; ``build``
    makes the model, ``what`` names the settings behind it for the message."""
    memory = physical_memory()
    if memory is None:
        return
    try:
        with torch.device("meta"):
            model = build()
    except ValueError:  # bad arguments: the model's own message
        raise
    except Exception:  # a constructor that needs real tensors (a model of one's own): built unchecked
        return
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    if size <= memory:
        return
    largest, tensor = max(tensors.items(), key=lambda item: item[1].numel())
    count = sum(p.numel() for p in model.parameters())
    raise ValueError(
        f"{what}: the {type(model).__name__} model would hold {count:.3g} parameters, {size / 2**30:,.1f} GiB of "
        f"weights (the largest, {largest}, of shape {tuple(tensor.shape)}), more than this machine's "
        f"{memory / 2**30:,.1f} GiB of memory, and training needs about four times that (gradients and Adam's two "
        "moments). Use a smaller horizon or lookback, or a smaller model (d_model, n_layers)"
    )
