"""Models: shapes, parity of the two attentions, masking, the regular/irregular paths agreeing."""

from __future__ import annotations

import inspect
from argparse import ArgumentError

import docstring_parser
import numpy as np
import pytest
import torch
from jsonargparse import ArgumentParser

from ts_continuum.attention.op import SINKS
from ts_continuum.models import EncoderTransformer, PatchTST, build_model
from ts_continuum.models import patchtst as patchtst_module
from ts_continuum.models.layers import MaskedBatchNorm, MultiHeadAttention
from ts_continuum.models.packing import interpolate_to_grid, right_align, slot_index
from ts_continuum.models import base as base_module
from ts_continuum.models import encoder as encoder_module

SMALL = {
    PatchTST: dict(n_channels=3, lookback=48, horizon=6, patch_len=8, stride=4, d_model=16, n_heads=2, n_layers=2,
                   d_ff=32, dropout=0.0),
    EncoderTransformer: dict(n_channels=3, lookback=24, horizon=6, d_model=16, n_heads=2, n_layers=2, d_ff=32,
                             dropout=0.0),
}
MODELS = list(SMALL)


def make(cls, **kw):
    torch.manual_seed(0)
    return cls(**{**SMALL[cls], "attention_backend": "torch", **kw}).eval()


def irregular_batch(cls, B=4, p=0.4, seed=0, jitter=0.3):
    g = torch.Generator().manual_seed(seed)
    L, C = SMALL[cls]["lookback"], SMALL[cls]["n_channels"]
    x = torch.randn(B, L, C, generator=g)
    mask = torch.rand(B, L, C, generator=g) > p
    mask[:, -1] = True
    t = torch.arange(-L + 1, 1.0) + jitter * (torch.rand(B, L, generator=g) - 0.5)
    return x.masked_fill(~mask, float("nan")), mask, t


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("attention", ["softmax", "continuous"])
@pytest.mark.parametrize("pos_encoding", ["learned", "rope", "none"])
def test_output_shapes_regular_and_irregular(cls, attention, pos_encoding):
    m = make(cls, attention=attention, pos_encoding=pos_encoding)
    L, C, H = m.lookback, m.n_channels, m.horizon
    assert m(torch.randn(2, L, C)).shape == (2, H, C)
    x, mask, t = irregular_batch(cls)
    y = m(x, mask, t)
    assert y.shape == (4, H, C) and torch.isfinite(y).all()


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("sink", ["zero", "repeat", "none", "learned"])
@pytest.mark.parametrize("pos_encoding", ["learned", "rope", "none"])
def test_both_attentions_own_identical_parameters(cls, sink, pos_encoding):
    a = make(cls, attention="softmax", sink=sink, pos_encoding=pos_encoding)
    b = make(cls, attention="continuous", sink=sink, pos_encoding=pos_encoding)
    assert {k: v.shape for k, v in a.state_dict().items()} == {k: v.shape for k, v in b.state_dict().items()}


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_unobserved_values_cannot_change_the_forecast(cls, attention):
    m = make(cls, attention=attention, pos_encoding="rope")
    x, mask, t = irregular_batch(cls)
    y1 = m(x, mask, t)
    y2 = m(torch.where(mask, x, torch.full_like(x, 1e6)), mask, t)
    torch.testing.assert_close(y1, y2)
    # and an observed value does change it
    x3 = x.clone()
    x3[0, -1, 0] += 5.0
    assert not torch.allclose(m(x3, mask, t)[0], y1[0])


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("revin", [False, True])
def test_the_input_checks_and_the_choice_of_path_cost_one_host_sync(cls, revin, monkeypatch):
    """Every check (values, RevIN channels, times) and the fast-path decision read back together: a
    GPU step waited on the device once per check before."""
    m = make(cls, revin=revin)
    x = torch.randn(2, m.lookback, m.n_channels)
    grid = torch.arange(-m.lookback + 1, 1.0)
    reads = []
    for name in ("__bool__", "item", "tolist"):
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _o=original, _n=name: reads.append(_n) or _o(self, *a))
    m.check_input(x, torch.ones_like(x, dtype=torch.bool), grid)
    m.check_input(x)
    assert reads == ["tolist", "tolist"], reads


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("attention", ["softmax", "continuous"])
@pytest.mark.parametrize("pos_encoding", ["learned", "rope", "none"])
@pytest.mark.parametrize("sink", SINKS)
def test_irregular_path_on_complete_data_equals_the_regular_path(cls, attention, pos_encoding, sink, monkeypatch):
    """A learned sink key is not rotated, so RoPE's origin must be the same on both paths."""
    m = make(cls, attention=attention, pos_encoding=pos_encoding, sink=sink)
    x = torch.randn(3, m.lookback, m.n_channels)
    fast = m(x)
    monkeypatch.setattr(base_module, "regular_grid", lambda mask, times, device: torch.zeros((), dtype=torch.bool))
    slow = m(x, torch.ones_like(x, dtype=torch.bool), torch.arange(-m.lookback + 1, 1.0))
    torch.testing.assert_close(slow, fast, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_rope_attention_ignores_a_common_shift_and_sees_gaps(attention):
    """The shift part holds by construction (the layer counts times from the first token); that
    the rotation itself depends only on differences is
    test_rope_scores_depend_only_on_time_differences_far_from_zero."""
    torch.manual_seed(0)
    layer = MultiHeadAttention(16, 2, attention=attention, rope=True, backend="torch")
    x = torch.randn(3, 9, 16)
    t = torch.cumsum(0.5 + torch.rand(3, 9), -1)
    lengths = torch.tensor([9, 7, 4])
    out = layer(x, t, lengths)
    torch.testing.assert_close(layer(x, t + 17.0, lengths), out, atol=1e-4, rtol=1e-4)
    valid = torch.arange(9)[None, :] < lengths[:, None]
    moved = t.clone()
    moved[:, 0] -= 3.0  # a longer gap before the first token changes what it attends to
    assert (layer(x, moved, lengths)[valid] - out[valid]).abs().max() > 1e-4


def test_rope_scores_depend_only_on_time_differences_far_from_zero():
    """Angles are formed in float64: in float32, times near 1e5 move q·k by about 1 %."""
    from ts_continuum.attention.rope import apply_rope

    torch.manual_seed(0)
    q, k = torch.randn(2, 1, 2, 8, 16)
    t = torch.cumsum(0.5 + torch.rand(8, dtype=torch.float64), -1)

    def scores(times):
        return apply_rope(q, times) @ apply_rope(k, times).transpose(-1, -2)

    torch.testing.assert_close(scores(t + 1e5), scores(t), atol=1e-4, rtol=1e-4)


def test_apply_rope_names_wrong_shapes_and_is_exported():
    from ts_continuum.attention import apply_rope, rope_frequencies

    x = torch.randn(2, 3, 5, 8)
    assert apply_rope(x, torch.arange(5.0)).shape == apply_rope(x, torch.zeros(2, 5)).shape == x.shape
    for times in (torch.arange(4.0), torch.zeros(3, 5), [0.0, 1.0]):
        with pytest.raises(ValueError, match=r"apply_rope needs times of shape \(T,\) = \(5,\) or \(B, T\)"):
            apply_rope(x, times)
    with pytest.raises(ValueError, match=r"x of shape \(B, H, T, D\)"):
        apply_rope(x[0], torch.arange(5.0))
    assert rope_frequencies(8).shape == (4,)


def test_patchtst_irregular_readout_is_time_aligned():
    """Dropping the newest observations must tell the model the data ends earlier, not shift it."""
    m = make(PatchTST, attention="softmax", pos_encoding="learned")
    x, mask, t = irregular_batch(PatchTST, p=0.0, jitter=0.0)
    late = mask.clone()
    late[:, -6:] = False  # the last 6 steps unobserved
    y_gap = m(x.masked_fill(~late, float("nan")), late, t)
    shifted = torch.cat([x[:, :6], x[:, :-6]], dim=1)  # same values, but ending at the origin
    y_shift = m(shifted.masked_fill(~torch.cat([late[:, :6], late[:, :-6]], 1), float("nan")),
                torch.cat([late[:, -6:], late[:, :-6]], 1), t)
    assert (y_gap - y_shift).abs().max() > 1e-3


@pytest.mark.parametrize("cls", MODELS)
def test_continuous_attention_sees_the_gaps(cls):
    """Same values and order, different timestamps: continuous attention must notice."""
    m = make(cls, attention="continuous", pos_encoding="none")
    x, mask, t = irregular_batch(cls, p=0.0, jitter=0.0)
    stretched = t.clone()
    stretched[:, : t.shape[1] // 2] -= 10.0  # a long gap in the middle of the window
    assert (m(x, mask, t) - m(x, mask, stretched)).abs().max() > 1e-4


@pytest.mark.parametrize("cls", MODELS)
def test_attention_switch_changes_and_restores(cls):
    m = make(cls, attention="softmax")
    x = torch.randn(2, m.lookback, m.n_channels)
    y_soft = m(x)
    m.set_attention("continuous")
    y_cont = m(x)
    assert not torch.allclose(y_soft, y_cont)
    m.set_attention("softmax")
    torch.testing.assert_close(m(x), y_soft)
    with pytest.raises(ValueError, match="attention must be one of"):
        m.set_attention("linear")


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(attention="linear"), "attention must be one of"),
        (dict(pos_encoding="sinusoidal"), "pos_encoding must be one of"),
        (dict(sink="first"), "sink must be one of"),
        (dict(lookback=0), "lookback must be a positive integer"),
        (dict(n_heads=3), "divisible by n_heads"),
        (dict(d_model=6, n_heads=2, pos_encoding="rope"), "rotary positions .* need an even head dimension"),
        (dict(dropout=1.0), r"dropout must lie in \[0, 1\)"),
        # a misspelt backend used to run as "auto" (softmax never noticed; continuous failed at the first forward)
        (dict(attention_backend="trition"),
         "attention_backend must be one of 'auto', 'torch', 'triton'; got 'trition'"),
        (dict(attention="continuous", attention_backend="Torch"), "attention_backend must be one of"),
    ],
)
@pytest.mark.parametrize("cls", MODELS)
def test_bad_options_are_clear_errors(cls, kw, match):
    with pytest.raises(ValueError, match=match):
        cls(**{**SMALL[cls], **kw})


def test_the_attention_layer_refuses_an_unknown_backend():
    with pytest.raises(ValueError, match="backend must be one of 'auto', 'torch', 'triton'; got 'trition'"):
        MultiHeadAttention(8, 2, backend="trition")


def model_parser(cls) -> ArgumentParser:
    """The model's arguments as the CLI sees them (jsonargparse reads the signature and docstring)."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(cls, "model")
    return parser


STRING_OPTIONS = {"attention": ("softmax", "continuous"), "pos_encoding": ("learned", "rope", "none"),
                  "sink": ("zero", "repeat", "none", "learned"), "attention_backend": ("auto", "torch", "triton")}


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("option,choices", STRING_OPTIONS.items())
def test_the_cli_lists_each_string_options_choices_and_refuses_a_typo_when_parsing(cls, option, choices):
    parser = model_parser(cls)
    assert f"--model.{option} {{{','.join(choices)}}}" in " ".join(parser.format_help().split())
    with pytest.raises(ArgumentError, match=rf"(?s)model\.{option}\b.*Got value: typo"):
        parser.parse_args(["--model.n_channels", "3", f"--model.{option}", "typo"])
    for choice in choices:
        assert parser.parse_args(["--model.n_channels", "3", f"--model.{option}", choice]).model[option] == choice


@pytest.mark.parametrize("cls", MODELS)
def test_every_constructor_argument_is_described_for_the_cli_help(cls):
    documented = {p.arg_name: p.description for p in docstring_parser.parse(cls.__doc__ or "").params}
    arguments = [n for n in inspect.signature(cls.__init__).parameters if n != "self"]
    assert list(documented) == arguments and all(documented.values())
    help_text = " ".join(model_parser(cls).format_help().split())
    assert all(" ".join(text.split()) in help_text for text in documented.values())


@pytest.mark.parametrize("cls", MODELS)
def test_wrong_input_shape_is_a_clear_error(cls):
    m = make(cls)
    with pytest.raises(ValueError, match="x must have shape"):
        m(torch.randn(2, m.lookback + 1, m.n_channels))


@pytest.mark.parametrize("cls", MODELS)
def test_bad_masks_times_and_dtypes_are_clear_errors(cls):
    m = make(cls)
    x, mask, t = irregular_batch(cls)
    B, L = x.shape[:2]
    for kwargs, match in ((dict(x_mask=mask[..., 0]), "x_mask must be a bool tensor of x's shape"),
                          (dict(x_mask=mask.float()), "x_mask must be a bool tensor"),
                          (dict(x_mask=mask, x_time=torch.arange(-L, 1.0)), r"x_time must have shape"),
                          (dict(x_mask=mask, x_time=t.long()), "x_time must be a floating-point tensor"),
                          (dict(), "x holds NaN but no x_mask was given")):
        with pytest.raises(ValueError, match=match):
            m(x, **kwargs)
    with pytest.raises(ValueError, match="x must have the model's dtype torch.float32"):
        m(torch.randn(B, L, x.shape[-1], dtype=torch.float64))


@pytest.mark.parametrize("cls", MODELS)
def test_bad_times_are_clear_errors(cls):
    """Times that are not finite, not increasing or not relative to the origin are refused on both
    paths: complete data would take the fast path and ignore them, one missing value would not."""
    m = make(cls)
    x, mask, t = irregular_batch(cls)
    L = x.shape[1]
    nan_t, repeated, swapped = t.clone(), t.clone(), t.clone()
    nan_t[1, 3] = float("nan")
    repeated[0, 5] = repeated[0, 4]
    swapped[2, [5, 6]] = swapped[2, [6, 5]]
    absolute = torch.arange(0, L, dtype=torch.float32)  # unit-spaced, but the origin is at L-1
    full = torch.ones_like(mask)
    for times, match in ((nan_t, "x_time holds NaN or inf"),
                         (repeated, "strictly increasing.*slot 5 is not later than slot 4"),
                         (swapped, "strictly increasing.*slot 6 is not later than slot 5"),
                         (absolute, rf"relative to the forecast origin.*last time of {L - 1}")):
        for values, observed in ((x, mask), (x.nan_to_num(), full)):
            with pytest.raises(ValueError, match=match):
                m(values, observed, times)
    close = (-0.3 + 0.001 * torch.arange(L)).to(torch.bfloat16)  # increasing in float32, ties in bfloat16
    with pytest.raises(ValueError, match="x_time in torch.bfloat16 cannot tell slot .* use 'bf16-mixed'"):
        m(x, mask, close)
    jittered = t.clone()
    jittered[:, -1] = 0.45  # the data module's jitter (below half a step) may move the origin slot
    m(x, mask, jittered)


@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_affine_revin_trains_on_irregular_inputs(attention):
    """Unobserved inputs are NaN: they must not reach the affine weight's gradient."""
    m = make(PatchTST, attention=attention, revin_affine=True).train()
    x, mask, t = irregular_batch(PatchTST)
    m(x, mask, t).square().mean().backward()
    bad = [n for n, p in m.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert not bad, bad


def test_patchtst_patch_count_matches_the_published_model():
    assert PatchTST(n_channels=7, lookback=336).n_patches == 42


def test_patchtst_handles_channels_with_fewer_observations_than_a_patch():
    m = make(PatchTST)
    _, mask, t = irregular_batch(PatchTST)
    x = torch.randn(mask.shape)
    mask[0, :, 1] = False
    mask[0, -3:, 1] = True  # 3 observations < patch_len 8
    y = m(x.masked_fill(~mask, float("nan")), mask, t)
    assert torch.isfinite(y).all()


def test_build_model_by_name():
    assert isinstance(build_model("patchtst", n_channels=2, lookback=32, patch_len=8, stride=4), PatchTST)
    with pytest.raises(ValueError, match="unknown model"):
        build_model("informer", n_channels=2)


def test_patchtst_individual_heads():
    shared, individual = make(PatchTST), make(PatchTST, individual=True)
    assert len(individual.head) == SMALL[PatchTST]["n_channels"] and len(shared.head) == 1
    x = torch.randn(2, individual.lookback, individual.n_channels)
    assert individual(x).shape == shared(x).shape
    x_same = x[:, :, :1].expand_as(x).contiguous()  # identical channels: only the heads differ
    y = individual(x_same)
    assert not torch.allclose(y[..., 0], y[..., 1])
    torch.testing.assert_close(shared(x_same)[..., 0], shared(x_same)[..., 1])


def garbage_beyond_counts(pack):
    """``pack`` whose entries past each row's count hold large random numbers instead of copies."""
    def packed_with_garbage(mask, *tensors):
        counts, packed = pack(mask, *tensors)
        g = torch.Generator().manual_seed(1)
        out = []
        for p in packed:
            pad = (torch.arange(p.shape[1])[None, :] >= counts[:, None]).view(*p.shape[:2], *[1] * (p.dim() - 2))
            out.append(torch.where(pad, 100 * torch.randn(p.shape, generator=g, dtype=p.dtype), p))
        return counts, tuple(out)
    return packed_with_garbage


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("attention", ["softmax", "continuous"])
@pytest.mark.parametrize("pos_encoding", ["learned", "rope"])
@pytest.mark.parametrize("train", [False, True])
def test_what_lies_past_each_rows_observations_cannot_change_the_forecast(cls, attention, pos_encoding, train,
                                                                         monkeypatch):
    """Padding after packing must be invisible: to pooling, read-out, positions, attention and (in
    training) BatchNorm's batch statistics."""
    m = make(cls, attention=attention, pos_encoding=pos_encoding).train(train)
    x, mask, t = irregular_batch(cls, p=0.6)
    want = m(x, mask, t)
    module = patchtst_module if cls is PatchTST else encoder_module
    monkeypatch.setattr(module, "pack", garbage_beyond_counts(module.pack))
    torch.testing.assert_close(m(x, mask, t), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_encoder_learned_positions_count_from_the_most_recent_token(attention):
    """A window whose oldest slot is empty is the same forecast as a model one slot shorter given
    the rest, with the position table cut at its old end: positions are right-aligned."""
    m = make(EncoderTransformer, attention=attention, pos_encoding="learned")
    x, mask, t = irregular_batch(EncoderTransformer)
    mask[:, 0] = False
    short = EncoderTransformer(**{**SMALL[EncoderTransformer], "lookback": m.lookback - 1, "attention": attention,
                                  "attention_backend": "torch"}).eval()
    state = dict(m.state_dict(), pos=m.pos.detach()[1:])
    short.load_state_dict(state)
    torch.testing.assert_close(short(x[:, 1:], mask[:, 1:], t[:, 1:]), m(x, mask, t), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_patchtst_learned_positions_count_from_the_most_recent_patch(attention):
    """Without the oldest stride of observations, the irregular path forms the last n_patches - 1
    regular patches; each must get the same learned position as in the complete window."""
    m = make(PatchTST, attention=attention, pos_encoding="learned", revin=False)  # RevIN sees fewer values
    x, _, _ = irregular_batch(PatchTST, p=0.0)
    mask = torch.ones_like(x, dtype=torch.bool)
    mask[:, : m.stride] = False  # a missing value: the irregular path, with unit-spaced times
    seen = []
    m.encoder.register_forward_pre_hook(lambda _, args: seen.append(args[0].detach()))
    m(x)
    m(x, mask, torch.arange(-m.lookback + 1, 1.0))
    full, dropped = seen
    assert dropped.shape[1] == m.n_patches  # padded to the full count: compare the valid patches
    torch.testing.assert_close(dropped[:, : m.n_patches - 1], full[:, 1:], atol=1e-6, rtol=1e-6)


def test_masked_batchnorm_takes_statistics_from_valid_tokens_only():
    torch.manual_seed(0)
    bn = MaskedBatchNorm(4).train()
    ref = torch.nn.BatchNorm1d(4).train()
    x = torch.randn(3, 5, 4)
    valid = torch.arange(5)[None, :] < torch.tensor([5, 3, 1])[:, None]
    out = bn(torch.where(valid[..., None], x, 1e3 * torch.randn(3, 5, 4)), valid)
    torch.testing.assert_close(out[valid], ref(x[valid]))
    assert (out[~valid] == 0).all()
    torch.testing.assert_close(bn.bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.bn.running_var, ref.running_var)


def test_right_align_and_slot_index_put_the_most_recent_token_last():
    z = torch.arange(2 * 4, dtype=torch.float32).view(2, 4, 1) + 1
    lengths = torch.tensor([4, 2])
    torch.testing.assert_close(right_align(z, lengths)[..., 0], torch.tensor([[1.0, 2, 3, 4], [0, 0, 5, 6]]))
    assert slot_index(lengths, 4).tolist() == [[0, 1, 2, 3], [2, 3, 3, 3]]  # past the count: clamped, ignored


def test_interpolate_to_grid_is_linear_in_time_and_nearest_outside():
    g = torch.Generator().manual_seed(0)
    N, S, d = 4, 6, 3
    times = torch.cumsum(0.3 + 2 * torch.rand(N, S, generator=g, dtype=torch.float64), 1) - 8
    z = torch.randn(N, S, d, generator=g, dtype=torch.float64)
    counts = torch.tensor([6, 3, 1, 2])
    grid = torch.linspace(-9.0, 6.0, 11, dtype=torch.float64)
    got = interpolate_to_grid(z, times, counts, grid)
    for i, n in enumerate(counts.tolist()):
        for j in range(d):
            want = np.interp(grid.numpy(), times[i, :n].numpy(), z[i, :n, j].numpy())  # numpy clamps to the ends
            np.testing.assert_allclose(got[i, :, j].numpy(), want, atol=1e-12)


def test_patchtst_lookback_shorter_than_a_patch_is_refused():
    with pytest.raises(ValueError, match=r"lookback \(4\) must be at least patch_len \(8\)"):
        PatchTST(**{**SMALL[PatchTST], "lookback": 4})


@pytest.mark.parametrize("cls,match", [(PatchTST, "every channel needs at least one observed value"),
                                       (EncoderTransformer, "every window needs at least one observed time step")])
def test_a_window_with_nothing_observed_is_a_clear_error(cls, match):
    m = make(cls, revin=False)  # with RevIN, its per-channel check (below) names it first
    x, mask, t = irregular_batch(cls)
    mask[1] = False  # PatchTST: every channel of window 1 empty; the encoder: every step of it
    with pytest.raises(ValueError, match=match):
        m(x, mask, t)


@pytest.mark.parametrize("cls", MODELS)
def test_revin_refuses_a_channel_never_observed_in_its_window(cls):
    """RevIN scales each channel by its window's statistics: a channel with none was forecast at
    about 0 by the encoder whatever its level (PatchTST refused it later, in its patching)."""
    m = make(cls)
    x, mask, t = irregular_batch(cls)
    x[..., 1] += 50.0
    mask[2, :, 1] = False
    with pytest.raises(ValueError, match="every channel needs at least one observed value.*RevIN"):
        m(x, mask, t)


@pytest.mark.parametrize("cls", MODELS)
def test_non_finite_values_where_observed_are_refused(cls):
    m = make(cls)
    x, mask, t = irregular_batch(cls)
    observed = torch.nonzero(mask[0, :, 1])[0, 0]
    for bad in (float("nan"), float("inf")):
        y = x.clone()
        y[0, observed, 1] = bad
        with pytest.raises(ValueError, match="x holds NaN or inf where x_mask is True"):
            m(y, mask, t)
    full = x.nan_to_num()
    full[1, 2, 0] = -float("inf")
    with pytest.raises(ValueError, match="x holds inf: .*pass x_mask"):
        m(full)
    y = x.clone()
    y[~mask] = float("inf")  # where not observed, anything goes
    torch.testing.assert_close(m(y, mask, t), m(x, mask, t))


@pytest.mark.parametrize("cls", MODELS)
def test_a_unit_spaced_window_ending_before_the_origin_is_not_read_as_ending_at_it(cls):
    """The fast path never reads x_time: a complete unit-spaced window whose last slot is 2 steps
    before the origin took it and was forecast as if it ended at the origin, while one missing value
    (or an offset of -2.1) changed the answer. Such windows take the time-aware path now."""
    m = make(cls, attention="continuous")
    L = m.lookback
    x = torch.randn(2, L, m.n_channels)
    grid = torch.arange(-L + 1, 1.0)
    torch.testing.assert_close(m(x, None, grid), m(x), rtol=0, atol=0)  # the grid itself: the fast path
    early, nearby = m(x, None, grid - 2.0), m(x, None, grid - 2.0 - 1e-4)
    assert (early - m(x)).abs().max() > 1e-3  # the forecast lies 2 steps further ahead
    torch.testing.assert_close(early, nearby, atol=1e-3, rtol=1e-3)  # continuous in x_time
    observed = torch.ones_like(x, dtype=torch.bool)
    observed[0, 3, 0] = False
    torch.testing.assert_close(m(x, observed, grid - 2.0)[1], early[1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cls", MODELS)
def test_x_time_in_another_float_dtype_than_the_model_is_taken(cls):
    """float64 times (from numpy) beside a float32 model failed in PatchTST's patch embedding, and
    only on batches with a missing value."""
    m = make(cls)
    x, mask, t = irregular_batch(cls)
    torch.testing.assert_close(m(x, mask, t.double()), m(x, mask, t))
    half = make(cls).to(torch.bfloat16)
    y = half(x.to(torch.bfloat16), mask, t)  # float32 times beside a bfloat16 model
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()


class _NeedsValues(torch.nn.Module):
    """A model of one's own whose constructor reads tensor values, which the meta device has not."""

    def __init__(self, width: int = 4):
        super().__init__()
        if width < 1:
            raise ValueError("width must be positive")
        self.layer = torch.nn.Linear(int(torch.ones(width).sum().item()), 1)


def test_the_size_check_leaves_models_it_cannot_build_without_memory_to_the_real_build():
    from ts_continuum.models.size import check_model_size

    check_model_size(_NeedsValues, "a model of one's own")  # RuntimeError on the meta device: not checked
    with pytest.raises(ValueError, match="width must be positive"):  # bad arguments still say so
        check_model_size(lambda: _NeedsValues(0), "a model of one's own")


HOST_READS = ("__bool__", "item", "tolist", "__int__", "__float__", "__index__")


@pytest.mark.parametrize("cls", MODELS)
@pytest.mark.parametrize("sink", ["zero", "learned"])
def test_attention_layers_never_read_back_from_the_device(cls, sink, monkeypatch):
    """The model checks its input once; its attention layers call the op's unchecked entry, which
    reads nothing back (the public op's checks read lengths and times: about five waits per layer)."""
    m = make(cls, attention="continuous", pos_encoding="rope", sink=sink)
    x, mask, t = irregular_batch(cls)
    reads, inside = [], []
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(torch.Tensor, name,
                            lambda self, *a, _o=original, _n=name: (inside and reads.append(_n)) or _o(self, *a))
    original_forward = MultiHeadAttention.forward

    def counted(self, *args, **kwargs):
        inside.append(True)
        try:
            return original_forward(self, *args, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(MultiHeadAttention, "forward", counted)
    m(x, mask, t)
    assert reads == []


@pytest.mark.gpu
def test_attention_layers_do_not_synchronise_on_a_gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    layer = MultiHeadAttention(32, 2, attention="continuous", rope=True).cuda()
    x = torch.randn(4, 20, 32, device="cuda")
    times = torch.cumsum(torch.rand(4, 20, device="cuda") + 0.1, -1)
    lengths = torch.tensor([20, 15, 9, 3], device="cuda")
    layer(x, times, lengths)  # compile / autotune outside the check
    torch.cuda.set_sync_debug_mode("error")
    try:
        layer(x, times, lengths)
    finally:
        torch.cuda.set_sync_debug_mode(0)
