"""Continuous softmax attention: the op, its exact PyTorch path and rotary embeddings."""

from .op import continuous_attention

__all__ = ["continuous_attention"]
