"""VariableNorm: each variable's inputs standardized by its training statistics, forecasts scaled back."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
import torch
from query_data import TINY_ASYNC, long_records

from ts_continuum import Forecaster
from ts_continuum.data.observations import ObservationSets, collate
from ts_continuum.models import AsyncTransformer
from ts_continuum.models.value_norm import VariableNorm

from test_async_transformer import call, random_sets


def make(**kw):
    torch.manual_seed(0)
    return AsyncTransformer(4, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, attention_backend="torch",
                            value_norm=True, **kw)


def test_statistics_are_exact_over_batches_and_ignore_padding_and_queries():
    history, queries = random_sets(n_series=6, seed=5)
    model = make().train()
    seen = []
    for rows in ([0, 1], [2, 3, 4], [5]):
        batch = collate(history, queries, rows)
        wide = dict(batch, values=torch.nn.functional.pad(batch["values"], (0, 2), value=7.0),
                    times=torch.nn.functional.pad(batch["times"], (0, 2), value=float("nan")))
        call(model, wide)
        valid = torch.arange(batch["values"].shape[-1]) < batch["lengths"][..., None]
        seen.append((batch["values"][valid], torch.nonzero(valid)[:, 1]))
    values = torch.cat([v for v, _ in seen]).double()
    variable = torch.cat([c for _, c in seen])
    norm = model.value_norm
    for c in range(4):
        x = values[variable == c]
        assert int(norm.count[c]) == len(x)
        torch.testing.assert_close(norm.mean[c].double(), x.mean(), atol=1e-6, rtol=0)
        torch.testing.assert_close(norm.std()[c].double(), x.std(unbiased=False), atol=1e-6, rtol=0)


def test_a_variable_never_seen_in_training_is_left_as_it_is_and_a_constant_one_is_finite():
    norm = VariableNorm(3).train()
    x = norm.inputs(torch.tensor([0.5, 0.5, 0.2]), torch.tensor([1, 1, 2]))
    assert norm.std()[0] == 1 and norm.mean[0] == 0 and norm.count.tolist() == [0, 2, 1]
    assert torch.isfinite(x).all() and (x == 0).all()  # every value at its variable's mean
    out = norm.eval().inputs(torch.tensor([0.3, 0.7, 0.2]), torch.tensor([0, 1, 2]))
    assert out[0] == torch.asinh(torch.tensor(0.3)) and torch.isfinite(out).all() and out[1] > 10
    torch.testing.assert_close(norm.outputs(torch.tensor([2.0, 2.0]), torch.tensor([0, 1])), torch.tensor([2.0, 0.5]))


def test_evaluation_does_not_move_the_statistics_and_they_are_saved_with_the_weights():
    history, queries = random_sets(seed=6)
    batch = collate(history, queries, range(5))
    model = make().train()
    call(model, batch)
    model.eval()
    before = {k: v.clone() for k, v in model.state_dict().items() if k.startswith("value_norm.")}
    with torch.no_grad():
        out = call(model, batch)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    twin = AsyncTransformer(**model.config)
    twin.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(call(twin.eval(), batch), out)


def test_forecasts_do_not_depend_on_each_variables_units():
    """Rescale and shift every variable's data (history and targets): the standardized inputs are
    the same, so the forecasts are the original ones in the new units."""
    history, queries = random_sets(seed=7)
    scale, shift = torch.tensor([0.01, 3.0, 0.5, 40.0]), torch.tensor([0.2, -1.0, 5.0, 0.0])

    def moved(sets: ObservationSets) -> ObservationSets:
        c = torch.as_tensor(sets.variable, dtype=torch.int64)
        value = (torch.as_tensor(sets.value, dtype=torch.float64) * scale[c].double() + shift[c].double()).numpy()
        return ObservationSets.build(sets.ids, sets.series, sets.variable, sets.time, value, 4)

    forecasts = []
    for h, q in ((history, queries), (moved(history), moved(queries))):
        model = make().train()
        batch = collate(h, q, range(5))
        call(model, batch)  # the statistics, from this data's training values
        with torch.no_grad():
            forecasts.append(call(model.eval(), batch))
    c = torch.arange(4)[None, :, None]
    torch.testing.assert_close(forecasts[1], torch.where(forecasts[0] != 0, forecasts[0] * scale[c] + shift[c], 0.0),
                               atol=1e-4, rtol=1e-4)


def test_the_model_without_it_forecasts_in_the_data_units_and_has_no_statistics():
    history, queries = random_sets(seed=8)
    model = AsyncTransformer(4, d_model=16, n_heads=2, d_ff=32, attention_backend="torch")
    assert model.value_norm is None and not any(k.startswith("value_norm") for k in model.state_dict())


def test_value_norm_must_be_a_bool():
    with pytest.raises(ValueError, match="value_norm must be True or False"):
        AsyncTransformer(3, value_norm="yes")


@pytest.mark.parametrize("attention", ["continuous", "softmax"])
def test_each_series_is_forecast_as_if_it_were_alone(attention):
    history, queries = random_sets(seed=9)
    model = make(attention=attention).train()
    call(model, collate(history, queries, range(5)))
    model.eval()
    with torch.no_grad():
        together = call(model, collate(history, queries, range(5)))
        for s in range(5):
            alone = call(model, collate(history, queries, [s]))
            torch.testing.assert_close(together[s, :, : alone.shape[-1]], alone[0], atol=1e-5, rtol=1e-5)


def test_every_parameter_gets_a_gradient_and_the_statistics_none():
    history, queries = random_sets(seed=10)
    batch = collate(history, queries, range(5))
    model = make().train()
    out = call(model, batch)
    valid = torch.arange(out.shape[-1]) < batch["query_lengths"][..., None]
    ((out - batch["query_values"])[valid] ** 2).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    assert not any(b.requires_grad for b in model.value_norm.buffers())


def test_forecaster_trains_saves_and_loads_it(tmp_path):
    records = long_records()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = Forecaster(**TINY_ASYNC, value_norm=True).fit(records, val_size=2)
    norm = fitted.state_.model.value_norm
    fitted.save(tmp_path / "m")
    loaded = Forecaster.load(tmp_path / "m")
    last = records.groupby("unique_id")["ds"].max()
    series = ["s0", "s1", "s2"]
    at = pd.DataFrame({"unique_id": series, "ds": [last[s] + pd.Timedelta("2h") for s in series],
                       "variable": ["hr", "lab", "temp"]})
    pred = fitted.predict(at=at)
    assert pred["value"].notna().all()
    pd.testing.assert_frame_equal(loaded.predict(at=at), pred)
    assert (norm.count > 0).all() and torch.equal(loaded.state_.model.value_norm.mean, norm.mean)
