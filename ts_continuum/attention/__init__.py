"""Continuous softmax attention: the op, its exact PyTorch path and rotary embeddings."""

from .op import continuous_attention
from .rope import apply_rope, rope_frequencies

__all__ = ["continuous_attention", "apply_rope", "rope_frequencies"]
