"""PatchGraphTransformer: patch tokens of each variable's observations, attention over patches and
across the variables of each patch, forecasts at any (time, variable)."""

from __future__ import annotations

import pytest
import torch
from observation_batches import variable_0_sees_when_variable_1_was_observed

from ts_continuum.models import QUERY_MODELS, PatchGraphTransformer


def make(attention="continuous", **kw):
    torch.manual_seed(0)
    kw = {"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32, "dropout": 0.0, "attention_backend": "torch", **kw}
    return PatchGraphTransformer(4, attention=attention, **kw).eval()


def test_is_a_query_model_by_name():
    assert QUERY_MODELS["patch-graph"] is PatchGraphTransformer


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


@pytest.mark.parametrize("patch,sees_when", [(4.0, True), (24.0, False)])
def test_a_variable_sees_when_another_was_observed_through_its_patches(patch, sees_when):
    """Variable 1, seen once, moves from the patch [-8, -4) to [-4, 0) with 4-hour patches; with
    one patch of 24 hours a single observation's token cannot tell its time."""
    assert variable_0_sees_when_variable_1_was_observed(make(patch=patch)) == sees_when


@pytest.mark.parametrize("name,value", [("patch", 0.0), ("patch", -8.0), ("history", float("nan")),
                                        ("patch", True), ("history", "24h"), ("horizon", float("inf"))])
def test_spans_must_be_positive_numbers(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a positive number in the data's time unit"):
        PatchGraphTransformer(3, **{name: value})
