"""What every model of observation sets shares: its constructor arguments (so checkpoints rebuild
it), the input contract of ``data/observations.py`` and the switch between the two attentions.

    model(values, times, lengths, query_times, query_lengths) -> (B, C, M) forecasts

``values``, ``times``: (B, C, N) each variable's history, right-padded; ``lengths``: (B, C) int
(0: never observed); ``query_times``: (B, C, M) the times to forecast each variable at, with
``query_lengths``: (B, C). Times are in the data's unit relative to the forecast origin, strictly
increasing within each (series, variable); padding may hold anything.
"""

from __future__ import annotations

import torch
from torch import nn

from ..attention.choices import check_choice
from .base import check_string_options
from .layers import ATTENTIONS, Attention


class QueryModel(nn.Module):
    """Base of the forecasters that answer queries at any (time, variable): a subclass passes its
    constructor's ``locals()`` (at least ``n_variables``), so checkpoints rebuild it and the CLI
    accepts it as ``--model.model``."""

    def __init__(self, arguments: dict):
        super().__init__()
        self.config = {k: v for k, v in arguments.items() if k not in ("self", "__class__")}
        n = self.config["n_variables"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"n_variables must be a positive integer, got {n!r}")
        self.n_variables = n
        check_string_options(self.config)

    def set_attention(self, kind: Attention) -> None:
        """Switch every attention over time to ``"softmax"`` or ``"continuous"`` (same parameters);
        attentions over tokens that are not one curve in time (marked ``switchable = False``) stay."""
        if "attention" not in self.config:
            raise ValueError(f"{type(self).__name__} has no attention to switch")
        kind = check_choice("attention", kind, ATTENTIONS)
        for module in self.modules():
            if (hasattr(module, "attention") and isinstance(module.attention, str) and module is not self
                    and getattr(module, "switchable", True)):
                module.attention = kind
        self.config["attention"] = kind

    def check_input(self, values: torch.Tensor, times: torch.Tensor, lengths: torch.Tensor,
                    query_times: torch.Tensor, query_lengths: torch.Tensor) -> None:
        """The input contract, named before any layer sees it (one host sync for the value checks)."""
        C = self.n_variables
        for name, t in (("values", values), ("times", times), ("query_times", query_times)):
            if not isinstance(t, torch.Tensor) or t.dim() != 3 or t.shape[1] != C:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{name} must have shape (B, {C}, N) (one row per variable), got {got}")
            if not t.is_floating_point():
                raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
        if times.shape != values.shape:
            raise ValueError(f"times must have the shape of values {tuple(values.shape)}, got {tuple(times.shape)}")
        B, _, N = values.shape
        M = query_times.shape[-1]
        for name, t in (("lengths", lengths), ("query_lengths", query_lengths)):
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != (B, C):
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{name} must have shape (B, C) = ({B}, {C}), got {got}")
            if t.is_floating_point() or t.dtype == torch.bool:
                raise ValueError(f"{name} must be an integer tensor, got dtype {t.dtype}")
        if query_times.shape[0] != B:
            raise ValueError(f"query_times must have {B} series like values, got {query_times.shape[0]}")
        valid = torch.arange(N, device=values.device) < lengths[..., None]
        steps_ok = (torch.diff(times, dim=-1) > 0) | ~valid[..., 1:]
        q_valid = torch.arange(M, device=values.device) < query_lengths[..., None]
        checks = torch.stack([
            (lengths < 0).any() | (lengths > N).any(), (query_lengths < 0).any() | (query_lengths > M).any(),
            (~torch.isfinite(values) & valid).any(), (~torch.isfinite(times) & valid).any(), ~steps_ok.all(),
            (~torch.isfinite(query_times) & q_valid).any()])
        lengths_bad, q_lengths_bad, values_bad, times_bad, unsorted, q_times_bad = checks.tolist()
        if lengths_bad:
            raise ValueError(f"lengths must lie in [0, N={N}] (observations per series and variable)")
        if q_lengths_bad:
            raise ValueError(f"query_lengths must lie in [0, M={M}] (queries per series and variable)")
        if values_bad:
            raise ValueError("values holds NaN or inf at an observed position; drop such observations")
        if times_bad or q_times_bad:
            raise ValueError(f"{'times' if times_bad else 'query_times'} holds NaN or inf at a valid position")
        if unsorted:
            raise ValueError("times must be strictly increasing within each series and variable (sort the "
                             "observations and average or drop repeated times)")


def refuse_grid_positions(pos_encoding: str) -> None:
    """Learned positions index grid slots, which observation sets do not have."""
    if pos_encoding == "learned":
        raise ValueError("pos_encoding='learned' indexes grid slots; observation sets have none: use 'rope' "
                         "(positions by real time) or 'none'")
