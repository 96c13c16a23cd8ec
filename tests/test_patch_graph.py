"""PatchGraphTransformer: patch tokens of each variable's observations, attention over patches and
across the variables of each patch, forecasts at any (time, variable)."""

from __future__ import annotations

import pytest
import torch
from observation_batches import call, random_sets, variable_0_sees_when_variable_1_was_observed

from ts_continuum.data.observations import collate
from ts_continuum.models import QUERY_MODELS, PatchGraphTransformer


def make(attention="continuous", **kw):
    torch.manual_seed(0)
    kw = {"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32, "dropout": 0.0, "attention_backend": "torch", **kw}
    return PatchGraphTransformer(4, attention=attention, **kw).eval()


def test_is_a_query_model_by_name():
    assert QUERY_MODELS["patch-graph"] is PatchGraphTransformer


@pytest.mark.parametrize("attention", ["continuous", "softmax"])
@pytest.mark.parametrize("pos_encoding", ["rope", "none"])
def test_each_series_is_forecast_as_if_it_were_alone(attention, pos_encoding):
    history, queries = random_sets()
    model = make(attention, pos_encoding=pos_encoding)
    with torch.no_grad():
        together = call(model, collate(history, queries, range(5)))
        for s in range(5):
            alone = call(model, collate(history, queries, [s]))
            M = alone.shape[-1]
            torch.testing.assert_close(together[s, :, :M], alone[0], atol=1e-5, rtol=1e-5)
            assert (together[s, :, M:] == 0).all()


def test_padding_changes_nothing_and_padded_queries_output_zero():
    history, queries = random_sets(seed=1)
    model = make()
    batch = collate(history, queries, range(5))
    wide = dict(batch)
    for key, pad in (("values", 3), ("times", 3), ("query_times", 4)):
        wide[key] = torch.nn.functional.pad(batch[key], (0, pad), value=float("nan") if key != "values" else 7.0)
    with torch.no_grad():
        out, out_wide = call(model, batch), call(model, wide)
    torch.testing.assert_close(out_wide[..., : out.shape[-1]], out)
    valid = torch.arange(out_wide.shape[-1]) < batch["query_lengths"][..., None]
    assert (out_wide[~valid] == 0).all() and torch.isfinite(out_wide).all()


def test_patches_are_counted_back_from_the_origin_and_older_observations_join_the_first():
    model = make(history=24.0, patch=8.0)
    times = torch.tensor([-30.0, -24.0, -16.5, -16.0, -8.0, -0.1, 0.0])
    assert model.n_patches == 3
    assert model.patch_of(times).tolist() == [0, 0, 0, 1, 2, 2, 2]
    assert make(history=24.0, patch=7.0).n_patches == 4  # a partial patch is still a patch


def test_a_cells_token_depends_on_its_own_observations_only():
    """Moving one observation of variable 0 in patch 1 changes that cell's token and no other."""
    values = torch.tensor([[[0.1, 0.5, 0.7, 0.2], [0.3, 0.9, 0.0, 0.0], [0.0] * 4, [0.6, 0.0, 0.0, 0.0]]])
    times = torch.tensor([[[-20.0, -12.0, -10.0, -2.0], [-15.0, -1.0, 0.0, 0.0], [0.0] * 4, [-9.0, 0.0, 0.0, 0.0]]])
    lengths = torch.tensor([[4, 2, 0, 1]])
    model = make(patch=8.0)
    with torch.no_grad():
        z, observed = model.encode_patches(values, times, lengths)
        z2, _ = model.encode_patches(values.index_put((torch.tensor([0]),) * 2 + (torch.tensor([2]),),
                                                      torch.tensor(0.95)), times, lengths)
    assert observed[0].tolist() == [[True, True, True], [False, True, True], [False] * 3, [False, True, False]]
    changed = (z2 - z).abs().amax(-1)[0] > 0
    assert changed.tolist() == [[False, True, False], [False] * 3, [False] * 3, [False] * 3]


def test_variables_never_observed_are_forecast_from_the_others():
    history, queries = random_sets(seed=2)
    batch = collate(history, queries, range(5))
    model = make()
    unseen = (batch["lengths"] == 0) & (batch["query_lengths"] > 0)
    assert unseen.any()
    with torch.no_grad():
        out = call(model, batch)
        out2 = call(model, dict(batch, values=batch["values"] + 0.5))
    b, c = torch.nonzero(unseen)[0].tolist()
    assert (out[b, c, 0] != out2[b, c, 0]) and torch.isfinite(out).all()


@pytest.mark.parametrize("patch,sees_when", [(4.0, True), (24.0, False)])
def test_a_variable_sees_when_another_was_observed_through_its_patches(patch, sees_when):
    """Variable 1, seen once, moves from the patch [-8, -4) to [-4, 0) with 4-hour patches; with
    one patch of 24 hours a single observation's token cannot tell its time."""
    assert variable_0_sees_when_variable_1_was_observed(make(patch=patch)) == sees_when


def test_attention_switch_keeps_the_parameters_and_changes_every_attention_over_time():
    history, queries = random_sets(seed=3)
    batch = collate(history, queries, range(5))
    model = make("continuous")
    keys = set(model.state_dict())
    with torch.no_grad():
        cont = call(model, batch)
        model.set_attention("softmax")
        soft = call(model, batch)
    assert set(model.state_dict()) == keys and model.config["attention"] == "softmax"
    assert not torch.allclose(cont, soft)
    timed = [model.encode, model.read, *(layer.attn for layer in model.layers)]
    assert all(module.attention == "softmax" for module in timed)


@pytest.mark.parametrize("attention", ["continuous", "softmax"])
def test_every_parameter_gets_a_gradient(attention):
    history, queries = random_sets(seed=4)
    batch = collate(history, queries, range(5))
    model = make(attention).train()
    out = call(model, batch)
    valid = torch.arange(out.shape[-1]) < batch["query_lengths"][..., None]
    ((out - batch["query_values"])[valid] ** 2).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing


def test_learns_to_carry_the_last_value_forward():
    """A task the model must solve by finding the latest observation: in its patch, and the patch."""
    torch.manual_seed(0)
    model = PatchGraphTransformer(2, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0,
                                  attention_backend="torch")
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    B, N, M = 16, 6, 3

    def batch():
        times = -torch.sort(torch.rand(B, 2, N) * 24, dim=-1, descending=True).values
        values = torch.rand(B, 2, N)
        q_times = torch.sort(torch.rand(B, 2, M) * 24, dim=-1).values
        lengths = torch.randint(1, N + 1, (B, 2))
        last = torch.gather(values, 2, (lengths - 1)[..., None])
        return values, times, lengths, q_times, torch.full((B, 2), M), last.expand(B, 2, M)

    losses = []
    for _ in range(300):  # deeper than AsyncTransformer's read: it plateaus for about 200 steps first
        values, times, lengths, q_times, q_len, target = batch()
        loss = ((model(values, times, lengths, q_times, q_len) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    baseline = 1 / 12  # the variance of a uniform value: what predicting the mean would give
    assert sum(losses[-20:]) / 20 < 0.3 * baseline


@pytest.mark.parametrize("name,value", [("patch", 0.0), ("patch", -8.0), ("history", float("nan")),
                                        ("patch", True), ("history", "24h"), ("horizon", float("inf"))])
def test_spans_must_be_positive_numbers(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a positive number in the data's time unit"):
        PatchGraphTransformer(3, **{name: value})


def test_learned_positions_are_refused_with_the_alternatives():
    with pytest.raises(ValueError, match="use 'rope'"):
        PatchGraphTransformer(3, pos_encoding="learned")


def test_bad_input_is_named_before_any_layer():
    history, queries = random_sets(seed=5)
    batch = collate(history, queries, range(5))
    with pytest.raises(ValueError, match="strictly increasing"):
        call(make(), dict(batch, times=batch["times"].flip(-1)))
