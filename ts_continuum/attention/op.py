"""``continuous_attention``: argument checks, sink construction, backend dispatch."""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Literal, get_args

import torch

from . import backends
from .choices import check_choice
from .reference import SegmentLayout

# A Literal, so the CLI lists the choices (through the models' sink option) and refuses others
Sink = Literal["zero", "repeat", "none", "learned"]
SINKS: tuple[str, ...] = get_args(Sink)


def continuous_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    times: torch.Tensor | None = None,
    causal: bool = False,
    sink: Sink = "zero",
    sink_k: torch.Tensor | None = None,
    sink_v: torch.Tensor | None = None,
    sink_gap: float = 1.0,
    lengths: torch.Tensor | None = None,
    q_lengths: torch.Tensor | None = None,
    scale: float | None = None,
    backend: backends.BackendName = "auto",
) -> torch.Tensor:
    """Continuous softmax attention over linearly interpolated keys and values.

    Args:
        q, k, v: ``q`` of shape ``(B, H, Tq, D)``, ``k`` ``(B, H, T, D)``, ``v`` ``(B, H, T, Dv)``,
            the layout of ``torch.nn.functional.scaled_dot_product_attention``. With ``Tq = T``
            (self-attention) query t is observation t. With ``Tq != T`` (queries at their own
            times, e.g. forecast times; ``causal=False`` only) every query integrates over the
            whole interpolated key sequence; the query's time enters only through ``q`` itself
            (for example rotary positions applied to ``q`` and ``k`` before the call).
        times: the keys' times in nominal steps, ``None`` (τ_i = i), ``(T,)`` or ``(B, T)``;
            strictly increasing over each sequence's valid positions. Gaps are taken in float64,
            so large absolute times given in float64 keep their resolution, and integer times'
            gaps are exact at any magnitude (nanoseconds since 1970); float32 ones are rounded
            before the op sees them (Unix seconds to 128 s), which is warned about when the
            rounding can reach a tenth of the smallest gap (and named when it merged two times):
            pass them in float64 or relative to a nearby origin. No gradient flows to ``times`` (the
            maths doc, section 4): the segment lengths are data, not parameters (a warning says so
            when ``times`` requires grad).
        causal: query t integrates over [τ_0, τ_t] (needs ``Tq = T``: a query needs a key
            segment of its own); otherwise every query integrates over its whole sequence.
        sink: the extra point at τ_1 - ``sink_gap``: ``"zero"`` (k = v = 0), ``"repeat"``
            (a copy of the first observation), ``"learned"`` (``sink_k`` of shape ``(H, D)``,
            ``sink_v`` of shape ``(H, Dv)``) or ``"none"`` (no extra point).
        sink_gap: the length Δ_1 of the sink's segment, in nominal steps (default 1.0), with or
            without ``times``.
        lengths: ``(B,)`` valid keys (right padding, at least 1). Padded keys take no part. With
            ``Tq = T`` and no ``q_lengths``, query rows past ``lengths`` are padding too and output 0
            (self-attention); pass ``q_lengths`` to give queries their own valid lengths.
        q_lengths: ``(B,)`` valid query rows (right padding, 0 allowed), for queries that are not
            the observations; padded query rows output 0 and receive no gradient. Default: all
            ``Tq`` rows valid (``Tq != T``), or ``lengths`` (``Tq = T``).
        scale: score scale, default ``D ** -0.5``; a negative one is applied by negating ``q``
            (the kernel's segment moments assume a non-negative scale).
        backend: ``"torch"`` (exact PyTorch path), ``"triton"`` (fused kernel) or ``"auto"``
            (the fastest correct backend available for these inputs).

    Returns:
        ``(B, H, Tq, Dv)`` in the dtype of ``q``; half-precision inputs accumulate in float32.
    """
    B, H, Tq, T, D = _check_qkv(q, k, v)
    if not isinstance(causal, bool):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    if causal and Tq != T:
        raise ValueError(
            f"causal=True needs one query per key (query t is observation t and integrates up to its own "
            f"time), got {Tq} queries for {T} keys; queries at other times integrate over the whole history: "
            "use causal=False"
        )
    check_choice("sink", sink, SINKS)
    check_choice("backend", backend, backends.BACKENDS)
    lengths = _check_lengths(lengths, B, T, q.device)
    q_lengths = _check_q_lengths(q_lengths, B, Tq, T, lengths is None, q.device)
    times = _check_times(times, B, T, lengths, q.device)
    if not (_is_real(sink_gap) and math.isfinite(sink_gap) and sink_gap > 0):
        raise ValueError(f"sink_gap must be a positive finite number of nominal steps, got {sink_gap!r}")
    if scale is None:
        scale = D**-0.5
    elif not (_is_real(scale) and math.isfinite(scale)):
        raise ValueError(f"scale must be a finite number, got {scale!r}")
    sink_k, sink_v = _check_sink_params(sink, sink_k, sink_v, q, v)
    return attend(q, k, v, times=times, causal=causal, sink=sink, sink_k=sink_k, sink_v=sink_v,
                  sink_gap=float(sink_gap), lengths=lengths, q_lengths=q_lengths, scale=float(scale), backend=backend)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    times: torch.Tensor | None,
    causal: bool,
    sink: str,
    sink_k: torch.Tensor | None,
    sink_v: torch.Tensor | None,
    sink_gap: float,
    lengths: torch.Tensor | None,
    q_lengths: torch.Tensor | None,
    scale: float | None,
    backend: str,
) -> torch.Tensor:
    """:func:`continuous_attention` without its argument checks, for callers that validated their
    inputs once at their own boundary (the models check their input before any layer runs): no host
    synchronisation, so a GPU layer never waits on the device. The arguments must be what the checks
    would pass: shapes as documented there, ``lengths`` (B,) int64 in [1, T] (all-full is allowed),
    ``q_lengths`` (B,) int64 in [0, Tq] or None, ``times`` strictly increasing over each sequence's
    valid positions (padded positions may hold anything), ``sink_k``/``sink_v`` given for "learned".
    """
    T, D = k.shape[2], q.shape[-1]
    Tq = q.shape[2]
    if scale is None:
        scale = D**-0.5
    if scale < 0:  # (-q)·k·|scale| is the same score; the kernel's moments need scale >= 0
        q, scale = -q, -scale
    if times is not None:
        times = times.detach().to(torch.float64)

    impl = backends.select(backend, q, D, v.shape[-1])
    first = 2 if sink == "none" else 1
    layout = SegmentLayout(lengths, Tq, causal, first, q.device, keys=T, q_valid=q_lengths)
    q_pad = None
    if lengths is not None:  # padded positions may hold anything (NaN too): they take no part
        pad = (torch.arange(T, device=q.device) >= lengths[:, None])[:, None, :, None]
        k, v = k.masked_fill(pad, 0.0), v.masked_fill(pad, 0.0)
    if lengths is not None or q_lengths is not None:
        q_pad = (layout.last == 0)[:, None, :, None]  # rows without segments: the padded queries
        q = q.masked_fill(q_pad, 0.0)

    k_ext, v_ext = _with_sink_point(sink, k, v, sink_k, sink_v)
    work = torch.float64 if q.dtype == torch.float64 else torch.float32
    log_delta = _segment_log_lengths(times, float(sink_gap), T, q.device).to(work)
    out = impl(q, k_ext, v_ext, log_delta, layout, float(scale))
    if sink == "none":
        # A zero-length integral (t = 1 causal, or a one-key sequence) is defined by its limit: v_1.
        lone = layout.last < first  # (B|1, Tq), padded rows included: fixed up just below
        out = torch.where(lone[:, None, :, None], v_ext[:, :, 1:2], out)
        if q_pad is not None:
            out = out.masked_fill(q_pad, 0.0)
    return out.to(q.dtype)


def _is_real(x) -> bool:
    """A real number (Python or NumPy scalar), not a bool."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _check_qkv(q, k, v) -> tuple[int, int, int, int, int]:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor of shape (B, H, T, D), got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape (B, H, T, D) (4 dimensions), got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if k.shape[:2] != q.shape[:2] or k.shape[-1] != q.shape[-1]:
        B, H, _, D = q.shape
        raise ValueError(f"k must have shape (B, H, T, D) = ({B}, {H}, T, {D}) like q {tuple(q.shape)} (any number "
                         f"of keys T), got {tuple(k.shape)}")
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"v must have shape (B, H, T, Dv) = {tuple(k.shape[:3])} + (Dv,) like k, got {tuple(v.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    B, H, Tq, D = q.shape
    T = k.shape[2]
    if min(B, H, Tq, T, D, v.shape[-1]) == 0:
        raise ValueError(f"q, k, v must be non-empty, got shapes {tuple(q.shape)}, {tuple(k.shape)} and "
                         f"{tuple(v.shape)}")
    return B, H, Tq, T, D


def _row_lengths(name: str, lengths, B: int, device) -> tuple[torch.Tensor, int, int]:
    """``lengths`` as a (B,) integer tensor on ``device`` and its min and max (one host read)."""
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths, device=device)
    if lengths.shape != (B,):
        raise ValueError(f"{name} must have shape (B,) = ({B},), got {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got dtype {lengths.dtype}")
    if lengths.device != device:
        raise ValueError(f"{name} must be on the device of q ({device}), got {lengths.device}")
    lo, hi = torch.stack([lengths.min(), lengths.max()]).tolist()
    return lengths, lo, hi


def _check_lengths(lengths, B: int, T: int, device) -> torch.Tensor | None:
    if lengths is None:
        return None
    lengths, lo, hi = _row_lengths("lengths", lengths, B, device)
    if lo < 1 or hi > T:
        raise ValueError(f"lengths must lie in [1, T={T}] (at least one valid observation), got min {lo}, max {hi}")
    if lo == T:
        return None
    return lengths.long()


def _check_q_lengths(q_lengths, B: int, Tq: int, T: int, all_keys: bool, device) -> torch.Tensor | None:
    if q_lengths is None:
        return None
    q_lengths, lo, hi = _row_lengths("q_lengths", q_lengths, B, device)
    if lo < 0 or hi > Tq:
        raise ValueError(f"q_lengths must lie in [0, Tq={Tq}] (valid query rows of each batch row), "
                         f"got min {lo}, max {hi}")
    if lo == Tq and (Tq != T or all_keys):  # every row valid: the default
        return None
    return q_lengths.long()


def _check_times(times, B: int, T: int, lengths, device) -> torch.Tensor | None:
    if times is None:
        return None
    if not isinstance(times, torch.Tensor):
        raise ValueError(f"times must be a tensor of shape (T,) or (B, T), got {type(times).__name__}")
    if times.shape not in ((T,), (B, T)):
        raise ValueError(f"times must have shape (T,) = ({T},) or (B, T) = ({B}, {T}), got {tuple(times.shape)}")
    if times.device != device:
        raise ValueError(f"times must be on the device of q ({device}), got {times.device}")
    if times.is_complex() or times.dtype == torch.bool:
        raise ValueError(f"times must be real numbers (nominal steps), got dtype {times.dtype}")
    if times.requires_grad:
        warnings.warn("times requires grad, but no gradient flows to times (the segment lengths are data, not "
                      "parameters): times.grad stays None; pass times.detach() to say so", stacklevel=3)
    given = times.dtype
    # float gaps in float64 (float32 rounds 1e7 + 0.5 to 1e7); integer gaps from the integers themselves,
    # since float64 holds integers exactly only up to 2**53
    t2 = times.detach().reshape(-1, T).to(torch.float64 if given.is_floating_point else torch.int64)
    valid = torch.ones_like(t2, dtype=torch.bool)
    if lengths is not None:
        valid = torch.arange(T, device=device) < lengths.view(-1, 1)
    full = t2.expand(valid.shape[0], T)
    observed = full[valid]
    if given.is_floating_point and not bool(torch.isfinite(observed).all()):
        raise ValueError("times must be finite at every valid position (found NaN or inf)")
    steps = (full[:, 1:] - full[:, :-1])[valid[:, 1:]]
    if not given.is_floating_point:
        return _integer_times(t2, (full - full[:, :1])[valid], steps, times.shape)
    if steps.numel():
        _check_float_steps(observed, steps, given)
    return t2.to(torch.float64).reshape(times.shape)


def _check_float_steps(times: torch.Tensor, steps: torch.Tensor, dtype: torch.dtype) -> None:
    """Sorted, and not rounded coarsely by ``dtype`` before the op saw them; one host sync for both.
    Rounding is monotone, so it can merge distinct times into a repeat but never reverse two: a
    repeat where the dtype is coarse is named as rounding, not as a duplicate."""
    steps = steps.to(torch.float64)
    spacing = times.abs().max().to(torch.float64) * torch.finfo(dtype).eps  # the dtype's spacing there, at most
    positive = torch.where(steps > 0, steps, torch.full_like(steps, math.inf)).min()
    reference = torch.where(torch.isfinite(positive), positive, torch.ones_like(positive))  # no gap: one step
    increasing, decreasing, coarse = torch.stack(
        [(steps > 0).all(), (steps < 0).any(), spacing > 0.1 * reference]).tolist()
    if not increasing and (decreasing or not coarse):
        raise ValueError(
            "times must be strictly increasing over each sequence's valid positions "
            "(found a repeated or decreasing timestamp); sort observations and drop duplicates"
        )
    if not increasing:
        raise ValueError(
            f"times repeat where {dtype} values lie up to {float(spacing):.3g} apart (they reach "
            f"{float(times.abs().max()):.6g}): distinct times closer than that were rounded to one value before the "
            "op saw them. Pass times in float64 or relative to a nearby origin (times - times[..., :1]); if they "
            "are real duplicates, drop them"
        )
    if coarse:
        _warn_coarse(times, steps, dtype)


def _integer_times(t2: torch.Tensor, offsets: torch.Tensor, steps: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Integer times (int64, ``(1|B, T)``) as float64 times relative to each sequence's first: the
    op needs only the gaps, which are exact this way for any magnitude (2**60 + i, or nanoseconds
    since 1970), unless a sequence spans so many units that float64 cannot hold its small gaps.
    ``offsets``: the valid times relative to their sequence's first; ``steps``: the valid gaps."""
    if steps.numel():
        # one host sync; exact integer differences
        increasing, span, smallest = torch.stack(
            [(steps > 0).all().long(), offsets.abs().max(), steps.min()]).tolist()
        if not increasing:
            raise ValueError(
                "times must be strictly increasing over each sequence's valid positions "
                "(found a repeated or decreasing timestamp); sort observations and drop duplicates"
            )
        spacing = span * torch.finfo(torch.float64).eps
        if spacing > 0.1 * smallest:
            raise ValueError(
                f"integer times span {span} units within a sequence, where float64 (in which the op integrates) "
                f"resolves only {spacing:.3g}, too coarse for the smallest gap of {smallest}: give times in "
                "coarser units (e.g. seconds instead of nanoseconds), or split the sequence"
            )
    return (t2 - t2[:, :1]).to(torch.float64).reshape(shape)


def _warn_coarse(times: torch.Tensor, steps: torch.Tensor, dtype: torch.dtype) -> None:
    """Times in a float dtype so far from 0 that its spacing there exceeds 10 % of the smallest gap:
    they were rounded before the op saw them (Unix seconds in float32 are multiples of 128 s), and
    the rounded gaps still increase, so nothing else notices."""
    spacing, smallest = times.abs().max() * torch.finfo(dtype).eps, steps.min()
    warnings.warn(f"times in {dtype} reach {float(times.abs().max()):.6g}, where that dtype's values lie up to "
                  f"{float(spacing):.3g} apart ({float(spacing / smallest):.1%} of the smallest gap seen, "
                  f"{float(smallest):.3g}): finer times were rounded before the op saw them. Unless they are "
                  "whole multiples of that, pass times in float64 or relative to a nearby origin "
                  "(times - times[..., :1])", stacklevel=5)


def _check_sink_params(sink, sink_k, sink_v, q, v):
    if sink != "learned":
        if sink_k is not None or sink_v is not None:
            raise ValueError(f"sink_k / sink_v are only used with sink='learned', got sink={sink!r}")
        return None, None
    H, D, Dv = q.shape[1], q.shape[-1], v.shape[-1]
    for name, p, shape, label in (("sink_k", sink_k, (H, D), "(H, D)"), ("sink_v", sink_v, (H, Dv), "(H, Dv)")):
        if p is None:
            raise ValueError(f"sink='learned' needs {name} of shape {label} = {shape}; pass the learned parameter")
        if not isinstance(p, torch.Tensor) or tuple(p.shape) != shape:
            got = tuple(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__
            raise ValueError(f"{name} must have shape {label} = {shape}, got {got}")
        if p.device != q.device:
            raise ValueError(f"{name} must be on the device of q ({q.device}), got {p.device}")
        if not p.is_floating_point():
            raise ValueError(f"{name} must be floating point, got dtype {p.dtype}")
    return sink_k, sink_v


def _with_sink_point(sink, k, v, sink_k, sink_v):
    """Prepend point 0. Autograd routes its gradient: to k_1/v_1 (repeat), the parameters (learned)."""
    B, H = k.shape[:2]
    if sink == "zero":
        k0, v0 = k.new_zeros(B, H, 1, k.shape[-1]), v.new_zeros(B, H, 1, v.shape[-1])
    elif sink in ("repeat", "none"):  # for "none" point 0 exists but its segment is switched off
        k0, v0 = k[:, :, :1], v[:, :, :1]
    else:
        k0 = sink_k.to(k.dtype)[None, :, None, :].expand(B, H, 1, k.shape[-1])
        v0 = sink_v.to(v.dtype)[None, :, None, :].expand(B, H, 1, v.shape[-1])
    return torch.cat([k0, k], dim=2), torch.cat([v0, v], dim=2)


def _segment_log_lengths(times, sink_gap: float, T: int, device) -> torch.Tensor:
    """log Δ_j for segments j = 1..T, shape (B|1, T); Δ_1 = sink_gap. Padded entries are unused."""
    if times is None:
        log_delta = torch.zeros(1, T, device=device, dtype=torch.float64)
        log_delta[:, 0] = math.log(sink_gap)
        return log_delta
    t2 = times.reshape(-1, T).to(torch.float64)  # _check_times made them float64 already
    delta = torch.diff(t2, dim=-1, prepend=t2[:, :1] - sink_gap)
    delta = torch.where(delta > 0, delta, torch.ones_like(delta))  # padded positions: any finite value
    return torch.log(delta)
