"""AsyncTransformer: forecasts at any (time, variable) from each variable's own observations."""

from __future__ import annotations

import pytest
import torch
from observation_batches import call, random_sets, variable_0_sees_when_variable_1_was_observed

from ts_continuum.data.observations import collate
from ts_continuum.models import AsyncTransformer


def make(attention="continuous", **kw):
    torch.manual_seed(0)
    return AsyncTransformer(4, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.0, attention=attention,
                            attention_backend="torch", **kw).eval()


@pytest.mark.parametrize("series_attention", [False, True])
def test_series_attention_lets_a_variable_see_when_another_was_observed(series_attention):
    """Variable 1 seen once: its summary cannot tell when (one token attends only to itself), so
    only series attention lets variable 0's forecast depend on that time."""
    assert variable_0_sees_when_variable_1_was_observed(make(series_attention=series_attention)) == series_attention


def test_series_attention_must_be_a_bool():
    with pytest.raises(ValueError, match="series_attention must be True or False"):
        AsyncTransformer(3, series_attention="yes")


@pytest.mark.parametrize("width,sees_when", [(0.0, False), (4.0, True), (24.0, False)])
def test_window_mixing_lets_a_variable_see_what_another_did_in_the_same_window(width, sees_when):
    """With 4-hour windows variable 1 moves from the window [-8, -4) to [-4, 0), so it is mixed with
    another of variable 0's tokens; one window of 24 hours is again a whole-history summary."""
    assert variable_0_sees_when_variable_1_was_observed(make(window_mixing=width)) == sees_when


def test_time_windows_are_fixed_in_time_and_means_cover_only_their_cell():
    from ts_continuum.models.window_mixing import TimeWindows

    times = torch.tensor([-7.0, -5.0, -1.0, -3.0, -9.0, -0.5])
    series_row = torch.tensor([0, 0, 0, 1, 4, 5])  # series 0: variables 0, 0, 0, 1; series 1 (C=4): 0, 1
    windows = TimeWindows(times, series_row, n_variables=4, width=4.0)
    # (series, window) pairs with tokens: (0, [-8,-4)), (0, [-4,0)), (1, [-12,-8)), (1, [-4,0))
    assert windows.n_groups == 4
    assert windows.observed.tolist() == [[True, False, False, False], [True, True, False, False],
                                         [True, False, False, False], [False, True, False, False]]
    h = torch.tensor([[1.0], [3.0], [10.0], [20.0], [30.0], [40.0]])
    means = windows.mean(h)
    assert means[0, 0].item() == 2.0 and means[1, 0].item() == 10.0 and means[1, 1].item() == 20.0
    assert means[0, 1].item() == 0.0
    assert windows.broadcast(means)[:, 0].tolist() == [2.0, 2.0, 10.0, 20.0, 30.0, 40.0]


def test_variable_mixer_attends_only_to_observed_variables():
    from ts_continuum.models.async_transformer import VariableMixer

    torch.manual_seed(0)
    mixer = VariableMixer(8, 2, dropout=0.0)
    summary = torch.randn(1, 4, 8)
    observed = torch.tensor([[True, False, True, False]])
    with torch.no_grad():
        masked = mixer(summary, observed)
        subset = mixer(summary[:, [0, 2]])
    torch.testing.assert_close(masked[:, [0, 2]], subset)
    assert torch.isfinite(masked).all()  # unobserved rows attend to themselves, never to nothing


@pytest.mark.parametrize("width", [-1.0, float("nan"), True, "8h"])
def test_window_mixing_must_be_a_width(width):
    with pytest.raises(ValueError, match="window_mixing must be a window width >= 0"):
        AsyncTransformer(3, window_mixing=width)


def test_simple_baselines_carry_the_last_value_or_the_mean_and_fall_back_where_unobserved():
    from ts_continuum.models import HistoryMean, LastObservation

    history, queries = random_sets(seed=6)
    batch = collate(history, queries, range(5))
    fallback = [0.1, 0.2, 0.3, 0.4]
    last = call(LastObservation(4, fallback=fallback), batch)
    mean = call(HistoryMean(4, fallback=fallback), batch)
    for b in range(5):
        for c in range(4):
            n, m = int(batch["lengths"][b, c]), int(batch["query_lengths"][b, c])
            if not m:
                continue
            seen = batch["values"][b, c, :n]
            want_last = seen[-1] if n else torch.tensor(fallback[c])
            want_mean = seen.mean() if n else torch.tensor(fallback[c])
            torch.testing.assert_close(last[b, c, :m], want_last.expand(m))
            torch.testing.assert_close(mean[b, c, :m], want_mean.expand(m))
    with pytest.raises(ValueError, match="one value per variable"):
        LastObservation(4, fallback=[0.0])


def test_grid_interpolation_is_linear_between_observations_and_constant_beyond():
    from ts_continuum.models import GridPatchTST

    model = GridPatchTST(2, history=4.0, horizon=2.0, step=1.0, patch_len=2, stride=1, d_model=8, n_heads=2)
    times = torch.tensor([[[-3.5, -1.0, 0.0], [-2.0, 9.0, 9.0]]])  # grid: -3.5, -2.5, -1.5, -0.5
    values = torch.tensor([[[1.0, 4.0, 7.0], [2.0, 0.0, 0.0]]])
    out = model.grid_history(values, times, torch.tensor([[2, 1]]))[0].T
    torch.testing.assert_close(out, torch.tensor([[1.0, 2.2, 3.4, 4.0], [2.0, 2.0, 2.0, 2.0]]))


@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_grid_patchtst_answers_every_query_and_trains(attention):
    from ts_continuum.models import GridPatchTST

    history, queries = random_sets(seed=7)
    batch = collate(history, queries, range(5))
    model = GridPatchTST(4, attention=attention, d_model=8, n_heads=2, n_layers=1, d_ff=16, attention_backend="torch")
    out = call(model, batch)
    valid = torch.arange(out.shape[-1]) < batch["query_lengths"][..., None]
    assert torch.isfinite(out).all() and (out[~valid] == 0).all()
    ((out - batch["query_values"])[valid] ** 2).mean().backward()
    assert model.unobserved.grad is not None and model.unobserved.grad.abs().sum() > 0
