"""The query models' training loss: every query alike, or every variable alike as the metric scores."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ts_continuum.models import AsyncTransformer
from ts_continuum.training.metrics import PerVariableError
from ts_continuum.training.query_module import (
    QueryForecastingModule,
    per_variable_loss,
    variable_weights,
    weighted_query_loss,
)


def batch_of(seed=0, B=3, C=4, M=6):
    g = torch.Generator().manual_seed(seed)
    query_lengths = torch.randint(0, M + 1, (B, C), generator=g)
    query_lengths[:, 0] = M  # a frequent variable beside rare ones
    query_lengths[:, 3] = 0  # a variable never asked
    query_lengths[0, 1], query_lengths[1:, 1] = 1, 0
    pred, target = torch.randn(B, C, M, generator=g), torch.randn(B, C, M, generator=g)
    mask = torch.arange(M) < query_lengths[..., None]
    return pred, target, mask


@pytest.mark.parametrize("kind,loss_fn", [("mse", F.mse_loss), ("mae", F.l1_loss)])
def test_per_variable_loss_is_the_metric_on_one_batch(kind, loss_fn):
    pred, target, mask = batch_of()
    metric = PerVariableError(4, kind)
    metric.update(pred, target, mask)
    got = per_variable_loss(loss_fn, pred, target, mask)
    assert got.item() == pytest.approx(metric.compute().item(), rel=1e-6)
    pooled = loss_fn(pred[mask], target[mask])
    assert abs(got.item() - pooled.item()) > 1e-3  # the weighting differs from pooling every query


def test_per_variable_loss_is_zero_with_a_gradient_when_nothing_is_asked():
    pred = torch.randn(2, 3, 4, requires_grad=True)
    loss = per_variable_loss(F.mse_loss, pred, torch.zeros(2, 3, 4), torch.zeros(2, 3, 4, dtype=torch.bool))
    loss.backward()
    assert loss.item() == 0.0 and (pred.grad == 0).all()


@pytest.mark.parametrize("kind,loss_fn", [("mse", F.mse_loss), ("mae", F.l1_loss)])
def test_global_variable_weights_give_the_metric_over_the_queries_they_were_counted_on(kind, loss_fn):
    pred, target, mask = batch_of()
    weights = variable_weights(mask.sum(dim=(0, 2)))
    assert weights[3] == 0 and (weights[:3] > 0).all()
    metric = PerVariableError(4, kind)
    metric.update(pred, target, mask)
    got = weighted_query_loss(loss_fn, pred, target, mask, weights.float())
    assert got.item() == pytest.approx(metric.compute().item(), rel=1e-6)
    # on a part of those queries it is not the part's own per-variable mean: rare variables keep their weight
    part = mask.clone()
    part[1:] = False
    assert weighted_query_loss(loss_fn, pred, target, part, weights.float()).item() != pytest.approx(
        per_variable_loss(loss_fn, pred, target, part).item(), rel=1e-3)


def fake_trainer(dataset):
    return SimpleNamespace(train_dataloader=SimpleNamespace(dataset=dataset))


def test_global_weighting_takes_the_shares_from_the_training_queries_or_says_why_not(monkeypatch):
    model = AsyncTransformer(4, d_model=8, n_heads=2, n_layers=1, d_ff=16, attention_backend="torch")
    module = QueryForecastingModule(model, weighting="variable-global")
    monkeypatch.setattr(module, "log", lambda *a, **k: None)
    pred, target, mask = batch_of(seed=1)
    batch = {"query_values": target, "query_times": torch.zeros_like(target), "query_lengths": mask.sum(-1),
             "values": torch.zeros(3, 4, 1)}
    monkeypatch.setattr(module, "forward", lambda b: pred)
    training_variables = np.array([0] * 90 + [1] * 9 + [2])  # shares 0.9, 0.09, 0.01; variable 3 never asked
    module._trainer = fake_trainer(SimpleNamespace(queries=SimpleNamespace(variable=training_variables)))
    loss = module.training_step(batch, 0)
    weights = torch.tensor([1 / (3 * 0.9), 1 / (3 * 0.09), 1 / (3 * 0.01), 0.0])
    err = (pred - target).square() * mask
    assert loss.item() == pytest.approx(((err * weights[None, :, None]).sum() / mask.sum()).item(), rel=1e-5)
    other = QueryForecastingModule(model, weighting="variable-global")
    other._trainer = fake_trainer(torch.utils.data.TensorDataset(torch.zeros(2)))
    monkeypatch.setattr(other, "forward", lambda b: pred)
    with pytest.raises(ValueError, match='use weighting="variable"'):
        other.training_step(batch, 0)


@pytest.mark.parametrize("weighting", ["query", "variable"])
def test_training_step_weights_as_asked_and_the_choice_is_saved(weighting, monkeypatch):
    model = AsyncTransformer(4, d_model=8, n_heads=2, n_layers=1, d_ff=16, attention_backend="torch")
    module = QueryForecastingModule(model, weighting=weighting)
    monkeypatch.setattr(module, "log", lambda *a, **k: None)
    pred, target, mask = batch_of(seed=1)
    lengths = mask.sum(-1)
    batch = {"query_values": target, "query_times": torch.zeros_like(target), "query_lengths": lengths,
             "values": torch.zeros(3, 4, 1)}
    monkeypatch.setattr(module, "forward", lambda b: pred)
    loss = module.training_step(batch, 0)
    want = per_variable_loss(F.mse_loss, pred, target, mask) if weighting == "variable" else F.mse_loss(
        pred[mask], target[mask])
    assert loss.item() == pytest.approx(want.item(), rel=1e-6)
    assert module.hparams["weighting"] == weighting


def test_unknown_weighting_is_refused_with_the_choices():
    model = AsyncTransformer(2, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    choices = "'query', 'variable', 'variable-global'"
    with pytest.raises(ValueError, match=rf"weighting must be one of {choices}; got 'per-stay'"):
        QueryForecastingModule(model, weighting="per-stay")
