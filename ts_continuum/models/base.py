"""What every forecaster shares: its constructor arguments (so checkpoints rebuild it), the input
contract ``(x, x_mask, x_time) -> (B, horizon, C)``, and the switch between the two attentions."""

from __future__ import annotations

import torch
from torch import nn

from ..attention.backends import BACKENDS
from ..attention.choices import check_choice
from .layers import ATTENTIONS, POS_ENCODINGS, SINKS, Attention
from .packing import regular_grid


def check_string_options(config: dict) -> None:
    """The attention options a model has, checked before any layer is built (the CLI refuses them
    when parsing; a Python caller gets the same message here)."""
    for name, choices in (("attention", ATTENTIONS), ("pos_encoding", POS_ENCODINGS), ("sink", SINKS),
                          ("attention_backend", BACKENDS)):
        if name in config:
            check_choice(name, config[name], choices)


class ForecastModel(nn.Module):
    """Base of the library's forecasters, and of your own: a subclass passes its constructor's
    ``locals()`` (at least ``n_channels``, ``lookback`` and ``horizon``), so checkpoints can rebuild
    it and the CLI accepts it as ``--model.model``. The attention options are checked where the
    model has them; models without attention need not have them."""

    def __init__(self, arguments: dict, positive: tuple[str, ...] = ()):
        super().__init__()
        self.config = {k: v for k, v in arguments.items() if k not in ("self", "__class__")}
        for name in ("n_channels", "lookback", "horizon") + positive:
            value = self.config[name]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.n_channels, self.lookback, self.horizon = (self.config[k] for k in ("n_channels", "lookback", "horizon"))
        check_string_options(self.config)
        self.pos_encoding = self.config.get("pos_encoding")

    def set_attention(self, kind: Attention) -> None:
        """Switch every layer to ``"softmax"`` or ``"continuous"`` attention (same parameters)."""
        if "attention" not in self.config:
            raise ValueError(f"{type(self).__name__} has no attention to switch")
        self.encoder.set_attention(kind)
        self.config["attention"] = kind

    def check_input(self, x: torch.Tensor, x_mask: torch.Tensor | None = None,
                    x_time: torch.Tensor | None = None) -> bool:
        """The input contract, checked before any layer sees it, so a mistake is named here rather
        than as a shape or dtype error deep inside attention (or, worse, not at all). Returns whether
        the window lies on the regular grid (the fast path), read in the same single host sync as
        the checks: a GPU step pays for one, not one per check."""
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or tuple(x.shape[1:]) != (self.lookback, self.n_channels):
            got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"x must have shape (B, {self.lookback}, {self.n_channels}), got {got}")
        dtype = next(self.parameters()).dtype
        if x.dtype != dtype:
            raise ValueError(f"x must have the model's dtype {dtype}, got {x.dtype}; convert it with x.to({dtype})")
        B, L = x.shape[:2]
        if x_mask is not None:
            if not isinstance(x_mask, torch.Tensor) or x_mask.dtype != torch.bool or x_mask.shape != x.shape:
                got = (f"{x_mask.dtype} {tuple(x_mask.shape)}" if isinstance(x_mask, torch.Tensor)
                       else type(x_mask).__name__)
                raise ValueError(f"x_mask must be a bool tensor of x's shape {tuple(x.shape)} (True = observed), "
                                 f"got {got}")
            if x_mask.device != x.device:
                raise ValueError(f"x_mask must be on x's device {x.device}, got {x_mask.device}")
        if x_time is not None:
            if not isinstance(x_time, torch.Tensor) or tuple(x_time.shape) not in ((L,), (B, L)):
                got = tuple(x_time.shape) if isinstance(x_time, torch.Tensor) else type(x_time).__name__
                raise ValueError(f"x_time must have shape ({L},) or ({B}, {L}) (one time per input slot), got {got}")
            if not x_time.is_floating_point():
                raise ValueError(f"x_time must be a floating-point tensor (nominal steps), got dtype {x_time.dtype}")
            if x_time.device != x.device:
                raise ValueError(f"x_time must be on x's device {x.device}, got {x_time.device}")
        bad = ~torch.isfinite(x) if x_mask is None else ~torch.isfinite(x) & x_mask
        revin_empty = (~x_mask.any(1)).any() if x_mask is not None and getattr(self, "revin", None) is not None \
            else torch.zeros((), dtype=torch.bool, device=x.device)  # a channel RevIN would have no statistics for
        times_bad = ~times_valid(x_time) if x_time is not None else torch.zeros((), dtype=torch.bool, device=x.device)
        # one host sync for every check and the path; the details only when something is wrong
        any_bad, empty, wrong_times, regular = torch.stack(
            [bad.any(), revin_empty, times_bad, regular_grid(x_mask, x_time, x.device)]).tolist()
        if empty:
            raise ValueError("every channel needs at least one observed value in the lookback window: RevIN "
                             "scales each channel by its window's statistics, and a channel never observed "
                             "would be forecast at about 0 whatever its level")
        if any_bad:
            if x_mask is None and bool(torch.isnan(x).any()):
                raise ValueError("x holds NaN but no x_mask was given; pass x_mask (True = observed) so missing "
                                 "values are left out, or fill them")
            if x_mask is None:
                raise ValueError("x holds inf: the forecast would be NaN. Replace such values, or pass x_mask "
                                 "(False = not observed) to leave them out")
            raise ValueError("x holds NaN or inf where x_mask is True (observed): the forecast would be NaN. "
                             "Replace such values, or mark them missing in x_mask (False = not observed)")
        if wrong_times:
            explain_times(x_time)
        return regular

    def input_times(self, x_time: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
        """(B, L) input times in nominal steps; the regular grid -L+1..0 when none are given."""
        B, L = x.shape[:2]
        # at least float32: half precision cannot hold every step of a long window (bf16: 256)
        t = x_time if x_time is not None else torch.arange(-L + 1, 1, device=x.device,
                                                          dtype=torch.promote_types(x.dtype, torch.float32))
        return t.expand(B, L) if t.dim() == 1 else t


# Data-module jitter stays below half a step, so the last input slot's time stays within this of 0.
ORIGIN_TOLERANCE = 0.5


def times_valid(x_time: torch.Tensor) -> torch.Tensor:
    """Input times must be finite, strictly increasing and relative to the forecast origin (a 0-dim
    tensor, read with the other input checks; ``explain_times`` names what is wrong).

    On complete unit-spaced windows the fast path ignores ``x_time``, but one missing value sends the
    same window down the irregular path, where times place the read-out grid and the time
    embedding: absolute or reversed times would then give a wrong forecast without any error.
    """
    return (torch.isfinite(x_time).all() & (torch.diff(x_time, dim=-1) > 0).all()
            & (x_time[..., -1] <= ORIGIN_TOLERANCE).all())


def explain_times(x_time: torch.Tensor) -> None:
    """Raise the error that says why ``times_valid`` is False."""
    steps = torch.diff(x_time, dim=-1)
    last = x_time[..., -1]
    if not bool(torch.isfinite(x_time).all()):
        raise ValueError("x_time holds NaN or inf; every input slot needs a time, masked slots included "
                         "(give a missing value its nominal time and mask it with x_mask)")
    if not bool((steps > 0).all()):
        bad = (steps <= 0).reshape(-1, steps.shape[-1])
        i = int(torch.nonzero(bad.any(0))[0]) + 1
        row = x_time.reshape(-1, x_time.shape[-1])[int(torch.nonzero(bad[:, i - 1])[0])]
        before, at = float(row[i - 1]), float(row[i])
        if before == at and x_time.dtype in (torch.float16, torch.bfloat16):
            raise ValueError(f"x_time in {x_time.dtype} cannot tell slot {i} from slot {i - 1} (both {at:g}): half "
                             "precision holds too few distinct times; pass x_time in float32 (Lightning's "
                             "precision='bf16-true' or '16-true' converts the whole batch: use 'bf16-mixed' or "
                             "'16-mixed')")
        raise ValueError(f"x_time must be strictly increasing along the input slots (oldest first, no repeated "
                         f"times); slot {i} is not later than slot {i - 1} ({at:g} after {before:g}). Sort the "
                         "inputs by time and drop or merge duplicate timestamps")
    raise ValueError(f"x_time must be relative to the forecast origin (the last input slot at 0, earlier slots "
                     f"negative), got a last time of {float(last.max()):g}; subtract it: x_time - x_time[..., -1:]")
