"""What every trained model of observation sets must do, whichever tokens it uses: forecast each
series as if alone, ignore padding, forecast variables never observed from the others, train every
parameter, learn a task that needs the history's timing, and name bad input and settings."""

from __future__ import annotations

import pytest
import torch
from observation_batches import call, random_sets

from ts_continuum.data.observations import collate
from ts_continuum.models import AsyncTransformer, PatchGraphTransformer

TINY = dict(d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, attention_backend="torch")
# each model with each of its options that changes how variables inform each other
MODELS = {
    "async": (AsyncTransformer, {}),
    "async-series": (AsyncTransformer, {"series_attention": True}),
    "async-windows": (AsyncTransformer, {"window_mixing": 4.0}),
    "patch-graph": (PatchGraphTransformer, {"patch": 8.0}),
    "patch-graph-4h": (PatchGraphTransformer, {"patch": 4.0}),
}


def make(name: str, attention: str = "continuous", n_variables: int = 4, **kw):
    cls, options = MODELS[name]
    torch.manual_seed(0)
    return cls(n_variables, attention=attention, **{**TINY, **options, **kw}).eval()


@pytest.mark.parametrize("attention", ["continuous", "softmax"])
@pytest.mark.parametrize("pos_encoding", ["rope", "none"])
@pytest.mark.parametrize("name", MODELS)
def test_each_series_is_forecast_as_if_it_were_alone(name, attention, pos_encoding):
    """Rows are bucketed and packed across the batch: nothing may leak between series."""
    history, queries = random_sets()
    model = make(name, attention, pos_encoding=pos_encoding)
    with torch.no_grad():
        together = call(model, collate(history, queries, range(5)))
        for s in range(5):
            alone = call(model, collate(history, queries, [s]))
            M = alone.shape[-1]
            torch.testing.assert_close(together[s, :, :M], alone[0], atol=1e-5, rtol=1e-5)
            assert (together[s, :, M:] == 0).all()


@pytest.mark.parametrize("name", MODELS)
def test_padding_changes_nothing_and_padded_queries_output_zero(name):
    history, queries = random_sets(seed=1)
    model = make(name)
    batch = collate(history, queries, range(5))
    wide = dict(batch)
    for key, pad in (("values", 3), ("times", 3), ("query_times", 4)):
        wide[key] = torch.nn.functional.pad(batch[key], (0, pad), value=float("nan") if key != "values" else 7.0)
    with torch.no_grad():
        out, out_wide = call(model, batch), call(model, wide)
    torch.testing.assert_close(out_wide[..., : out.shape[-1]], out)
    valid = torch.arange(out_wide.shape[-1]) < batch["query_lengths"][..., None]
    assert (out_wide[~valid] == 0).all() and torch.isfinite(out_wide).all()


@pytest.mark.parametrize("name", ["async", "patch-graph"])
def test_variables_never_observed_are_forecast_from_the_others(name):
    history, queries = random_sets(seed=2)
    batch = collate(history, queries, range(5))
    model = make(name)
    unseen = (batch["lengths"] == 0) & (batch["query_lengths"] > 0)
    assert unseen.any()
    with torch.no_grad():
        out = call(model, batch)
        out2 = call(model, dict(batch, values=batch["values"] + 0.5))  # other variables' values move it
    b, c = torch.nonzero(unseen)[0].tolist()
    assert (out[b, c, 0] != out2[b, c, 0]) and torch.isfinite(out).all()


def attentions_over_time(model) -> list:
    """The attentions the switch must reach: over each variable's tokens, patches and queries."""
    if isinstance(model, PatchGraphTransformer):
        return [model.encode, model.read, *(layer.attn for layer in model.layers)]
    return [model.read, *(layer.attn for layer in model.layers)]


@pytest.mark.parametrize("name", MODELS)
def test_attention_switch_keeps_the_parameters_and_changes_every_attention_over_time(name):
    history, queries = random_sets(seed=3)
    batch = collate(history, queries, range(5))
    model = make(name, "softmax")
    keys = set(model.state_dict())
    with torch.no_grad():
        soft = call(model, batch)
        model.set_attention("continuous")
        cont = call(model, batch)
    assert set(model.state_dict()) == keys and model.config["attention"] == "continuous"
    assert not torch.allclose(cont, soft)
    assert all(module.attention == "continuous" for module in attentions_over_time(model))


def test_series_attention_stays_softmax_when_the_model_is_switched():
    """A series' tokens of every variable are not one curve in time: nothing to integrate along."""
    model = make("async-series", "softmax")
    model.set_attention("continuous")
    assert model.series_read.attention == "softmax"
    assert all(layer.series_attn.attention == "softmax" for layer in model.layers)


@pytest.mark.parametrize("attention", ["continuous", "softmax"])
@pytest.mark.parametrize("name", MODELS)
def test_every_parameter_gets_a_gradient(name, attention):
    history, queries = random_sets(seed=4)
    batch = collate(history, queries, range(5))
    model = make(name, attention).train()
    out = call(model, batch)
    valid = torch.arange(out.shape[-1]) < batch["query_lengths"][..., None]
    ((out - batch["query_values"])[valid] ** 2).mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing


@pytest.mark.parametrize("name,steps", [("async", 150), ("patch-graph", 300)])
def test_learns_to_carry_the_last_value_forward(name, steps):
    """A task the model must solve by finding each variable's latest observation (the patch model
    reads it through a patch token, a level deeper: it plateaus for about 200 steps first)."""
    model = make(name, n_variables=2, n_layers=1).train()
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
    for _ in range(steps):
        values, times, lengths, q_times, q_len, target = batch()
        loss = ((model(values, times, lengths, q_times, q_len) - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    baseline = 1 / 12  # the variance of a uniform value: what predicting the mean would give
    assert sum(losses[-20:]) / 20 < 0.3 * baseline


@pytest.mark.parametrize("change,match", [
    (lambda b: dict(b, values=b["values"][:, :3]), r"values must have shape \(B, 4, N\)"),
    (lambda b: dict(b, lengths=b["lengths"].float()), "lengths must be an integer tensor"),
    (lambda b: dict(b, lengths=b["lengths"] + 100), r"lengths must lie in \[0, N="),
    (lambda b: dict(b, times=b["times"].flip(-1)), "strictly increasing"),
    (lambda b: dict(b, values=torch.where(b["lengths"][..., None] > 0, torch.nan, b["values"])), "NaN or inf"),
    (lambda b: dict(b, query_lengths=b["query_lengths"][:1]), r"query_lengths must have shape \(B, C\)"),
])
@pytest.mark.parametrize("name", ["async", "patch-graph"])
def test_bad_input_is_named(name, change, match):
    history, queries = random_sets(seed=5)
    batch = change(collate(history, queries, range(5)))
    with pytest.raises(ValueError, match=match):
        call(make(name), batch)


@pytest.mark.parametrize("cls", [AsyncTransformer, PatchGraphTransformer])
def test_learned_positions_are_refused_with_the_alternatives(cls):
    with pytest.raises(ValueError, match="use 'rope'"):
        cls(3, pos_encoding="learned")
