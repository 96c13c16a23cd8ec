"""Every bad argument of continuous_attention gets a ValueError naming it."""

from __future__ import annotations

import warnings

import pytest
import torch

from ts_continuum import continuous_attention
from ts_continuum.attention import backends


def qkv(B=2, H=2, T=5, D=4, dtype=torch.float32):
    return tuple(torch.randn(B, H, T, D, dtype=dtype) for _ in range(3))


def call(**overrides):
    q, k, v = qkv()
    args = dict(q=q, k=k, v=v)
    args.update(overrides)
    q, k, v = args.pop("q"), args.pop("k"), args.pop("v")
    return continuous_attention(q, k, v, backend=args.pop("backend", "torch"), **args)


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(q=torch.randn(2, 5, 4)), r"q must have shape \(B, H, T, D\)"),
        (dict(k=torch.randn(2, 3, 5, 4)), r"k must have shape \(B, H, T, D\) = \(2, 2, T, 4\)"),
        (dict(k=torch.randn(2, 2, 6, 4)), r"v must have shape \(B, H, T, Dv\) = \(2, 2, 6\)"),
        (dict(v=torch.randn(2, 2, 6, 4)), "v must have shape"),
        (dict(v=torch.randn(2, 2, 5, 4, dtype=torch.float64)), "share one dtype"),
        (dict(q=torch.ones(2, 2, 5, 4, dtype=torch.long)), "q must be a floating-point tensor"),
        (dict(k=torch.empty(2, 2, 5, 4, device="meta")), "must be on one device"),
        (dict(times=torch.arange(5.0, device="meta")), "times must be on the device of q"),
        (dict(q=[[1.0]]), "q must be a torch.Tensor"),
        (dict(times=torch.arange(4.0)), r"times must have shape \(T,\)"),
        (dict(times=torch.tensor([0.0, 1.0, 1.0, 2.0, 3.0])), "strictly increasing"),
        (dict(times=torch.tensor([0.0, 2.0, 1.0, 3.0, 4.0])), "strictly increasing"),
        (dict(times=torch.tensor([0.0, 1.0, float("nan"), 3.0, 4.0])), "finite"),
        (dict(times=torch.tensor([0.0, 1.0, 2.0, 3.0, float("inf")])), "finite"),
        (dict(times=[0.0, 1.0, 2.0, 3.0, 4.0]), "times must be a tensor"),
        (dict(lengths=torch.tensor([5, 0])), r"lengths must lie in \[1, T=5\]"),
        (dict(lengths=torch.tensor([6, 2])), r"lengths must lie in \[1, T=5\]"),
        (dict(lengths=torch.tensor([5])), r"lengths must have shape \(B,\)"),
        (dict(lengths=torch.tensor([5.0, 2.0])), "lengths must be an integer tensor"),
        (dict(sink="first"), "sink must be one of"),
        (dict(sink="learned"), "sink='learned' needs sink_k"),
        (dict(sink="learned", sink_k=torch.zeros(2, 4)), "sink='learned' needs sink_v"),
        (dict(sink="learned", sink_k=torch.zeros(3, 4), sink_v=torch.zeros(2, 4)), r"sink_k must have shape \(H, D\)"),
        (dict(sink="zero", sink_k=torch.zeros(2, 4)), "only used with sink='learned'"),
        (dict(sink_gap=0.0), "sink_gap must be a positive"),
        (dict(sink_gap=float("nan")), "sink_gap must be a positive"),
        (dict(scale=float("inf")), "scale must be a finite number"),
        (dict(backend="cuda"), "backend must be one of"),
        (dict(causal="no"), "causal must be True or False"),
        (dict(causal=None), "causal must be True or False"),
        (dict(times=torch.arange(5.0) + 0j), "times must be real numbers"),
        (dict(sink="learned", sink_k=torch.zeros(2, 4), sink_v=torch.zeros(2, 3)), r"sink_v must have shape \(H, Dv\)"),
        (dict(q=torch.zeros(2, 2, 0, 4), k=torch.zeros(2, 2, 0, 4), v=torch.zeros(2, 2, 0, 4)), "must be non-empty"),
        (dict(sink="learned", sink_k=torch.zeros(2, 4, dtype=torch.long), sink_v=torch.zeros(2, 4)),
         "sink_k must be floating point"),
        (dict(sink="learned", sink_k=torch.zeros(2, 4), sink_v=torch.zeros(2, 4, device="meta")),
         "sink_v must be on the device of q"),
        (dict(lengths=torch.tensor([5, 2], device="meta")), "lengths must be on the device of q"),
    ],
)
def test_bad_arguments_raise_value_error(overrides, match):
    with pytest.raises(ValueError, match=match):
        call(**overrides)


def test_numpy_numbers_and_list_lengths_are_accepted():
    import numpy as np

    q, k, v = qkv()
    want = call(q=q, k=k, v=v, scale=0.5, sink_gap=2.0, lengths=torch.tensor([5, 3]))
    torch.testing.assert_close(call(q=q, k=k, v=v, scale=np.float32(0.5), sink_gap=np.int64(2), lengths=[5, 3]), want)


def test_only_gaps_matter_even_far_from_zero_in_float32():
    """Gaps are taken in float64: in float32, 1e7 - 0.5 (the sink point) rounds to 1e7 - 1 or 1e7.
    Whole times are exact there, but float32 could not have held finer ones: that is said."""
    torch.manual_seed(0)
    q, k, v = qkv(B=1, T=6)
    near = continuous_attention(q, k, v, times=torch.arange(6.0, dtype=torch.float64), sink_gap=0.5, backend="torch")
    with pytest.warns(UserWarning, match=r"times in torch.float32 reach 1e\+07, .* up to 1.19 apart"):
        far = continuous_attention(q, k, v, times=torch.arange(6.0) + 1e7, sink_gap=0.5, backend="torch")
    torch.testing.assert_close(far, near, atol=1e-6, rtol=1e-6)


def test_float32_times_too_coarse_for_their_gaps_are_warned_about_and_float64_ones_are_not():
    """Unix seconds in float32 are multiples of 128 s: irregular gaps (here 3600, 1400, 4000 and 100 s)
    come out as multiples of 128, still increasing, so the op would integrate over wrong segment
    lengths without a word."""
    torch.manual_seed(0)
    q, k, v = qkv(B=1, T=5)
    unix = 1.7e9 + torch.tensor([0.0, 3600, 5000, 9000, 9100], dtype=torch.float64)
    expected = r"times in torch.float32 reach 1.7\d*e\+09.*of the smallest gap seen.*float64"
    with pytest.warns(UserWarning, match=expected):
        coarse = continuous_attention(q, k, v, times=unix.float(), backend="torch")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float64, or float32 relative to an origin: silent
        exact = continuous_attention(q, k, v, times=unix, backend="torch")
        relative = continuous_attention(q, k, v, times=(unix - unix[0]).float(), backend="torch")
    torch.testing.assert_close(relative, exact)
    assert (coarse - exact).abs().max() > 1e-4  # the rounding the warning is about


def test_integer_times_are_taken_as_the_same_float_times():
    q, k, v = qkv(B=1, T=5)
    times = torch.tensor([0, 2, 3, 7, 8])
    torch.testing.assert_close(continuous_attention(q, k, v, times=times, backend="torch"),
                               continuous_attention(q, k, v, times=times.double(), backend="torch"))


def test_times_that_require_grad_are_told_that_no_gradient_reaches_them():
    q, k, v = qkv(B=1, T=5)
    q.requires_grad_(True)
    times = torch.arange(5.0, requires_grad=True)
    with pytest.warns(UserWarning, match="no gradient flows to times.*times.detach"):
        out = continuous_attention(q, k, v, times=times, backend="torch")
    out.sum().backward()
    assert times.grad is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        continuous_attention(q, k, v, times=times.detach(), backend="torch")  # the advice: silent


def test_negative_scale_is_the_score_of_negated_queries():
    torch.manual_seed(1)
    q, k, v = qkv()
    times = torch.cumsum(torch.rand(2, 5) + 0.5, -1)
    got = continuous_attention(q, k, v, times=times, scale=-0.7, backend="torch")
    torch.testing.assert_close(got, continuous_attention(-q, k, v, times=times, scale=0.7, backend="torch"))
    assert (got - continuous_attention(q, k, v, times=times, scale=0.7, backend="torch")).abs().max() > 1e-3


def test_unsorted_times_beyond_the_valid_length_are_ignored():
    times = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 5.0, 0.0, float("nan")]])
    out = call(times=times, lengths=torch.tensor([5, 3]))
    assert torch.isfinite(out).all()


def test_unsorted_times_within_the_valid_length_are_refused_per_sequence():
    times = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0], [0.0, 2.0, 1.0, 5.0, 6.0]])
    with pytest.raises(ValueError, match="strictly increasing"):
        call(times=times, lengths=torch.tensor([5, 3]))


def test_triton_backend_on_cpu_without_interpreter_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="backend='triton' is unavailable"):
        call(backend="triton")


def test_backend_selection_refuses_an_unknown_name_instead_of_running_auto():
    """select() used to treat any unknown name as "auto"; models call the op through it."""
    q = torch.randn(1, 1, 3, 4)
    with pytest.raises(ValueError, match="backend must be one of 'auto', 'torch', 'triton'; got 'trition'"):
        backends.select("trition", q, 4, 4)


def test_integer_times_keep_exact_gaps_far_beyond_2_to_the_53():
    """Integers above 2**53 are not exact in float64: nanoseconds since 1970 lost their small gaps
    (changing the output) and 2**60 + i collapsed into repeats, refused as unsorted."""
    torch.manual_seed(0)
    q, k, v = qkv(B=1, T=5)
    gaps = torch.tensor([0, 3, 1, 4, 2])
    want = continuous_attention(q, k, v, times=torch.cumsum(gaps, 0).double(), backend="torch")
    for origin in (1_700_000_000_000_000_000, 2**60):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = continuous_attention(q, k, v, times=origin + torch.cumsum(gaps, 0), backend="torch")
        torch.testing.assert_close(got, want, atol=0, rtol=0)
    with pytest.raises(ValueError, match="strictly increasing"):
        continuous_attention(q, k, v, times=2**60 + torch.tensor([0, 1, 1, 2, 3]), backend="torch")


def test_integer_times_that_float64_cannot_resolve_within_a_sequence_are_refused():
    q, k, v = qkv(B=1, T=3)
    with pytest.raises(ValueError, match=r"integer times span 1152921504606846977 units.*float64.*coarser units"):
        continuous_attention(q, k, v, times=torch.tensor([0, 2**60, 2**60 + 1]), backend="torch")


def test_integer_times_beyond_the_valid_length_are_ignored():
    q, k, v = qkv()
    lengths = torch.tensor([5, 3])
    times = torch.tensor([[0, 1, 2, 3, 4], [2**62, 2**62 + 1, 2**62 + 3, -(2**62), 0]])
    want = continuous_attention(q, k, v, times=torch.tensor([[0.0, 1, 2, 3, 4], [0.0, 1, 3, 4, 5]]),
                                lengths=lengths, backend="torch")
    torch.testing.assert_close(continuous_attention(q, k, v, times=times, lengths=lengths, backend="torch"), want)


@pytest.mark.parametrize("dtype,times", [
    (torch.float32, 1e12 + torch.arange(5.0, dtype=torch.float64)),  # float32 spacing there: 65536
    (torch.float16, 1000 + 0.2 * torch.arange(5.0, dtype=torch.float64)),  # float16 spacing there: 0.5
    (torch.float64, 1.7e18 + torch.tensor([0.0, 100, 200, 300, 400], dtype=torch.float64)),  # spacing 256
])
def test_times_that_rounding_merged_are_refused_as_rounded_not_as_duplicates(dtype, times):
    with pytest.raises(ValueError, match=rf"times repeat where {dtype} values lie up to .* rounded to one value.*"
                                         r"relative to a nearby origin"):
        call(times=times.to(dtype))


@pytest.mark.parametrize("times", [
    torch.tensor([0.0, 1.0, 1.0, 2.0, 3.0]),  # a real duplicate: float32 resolves 1e-7 here
    1e12 + torch.tensor([0.0, 2e6, 1e6, 3e6, 4e6]),  # decreasing: rounding never reverses two times
])
def test_real_duplicates_and_decreasing_times_keep_the_sorting_advice(times):
    with pytest.raises(ValueError, match="strictly increasing.*sort observations and drop duplicates"):
        call(times=times)


def test_float64_times_too_coarse_for_their_gaps_are_warned_about_like_float32():
    """Nanoseconds since 1970 as float64 are multiples of 256 ns: gaps of 300 ns were rounded."""
    with pytest.warns(UserWarning, match=r"times in torch.float64 reach 1.7e\+18.*rounded before the op saw them"):
        call(times=1.7e18 + torch.tensor([0.0, 300, 600, 900, 1200], dtype=torch.float64))
