"""Small batches of observation sets and checks shared by the tests of the query models."""

from __future__ import annotations

import torch

from ts_continuum.data.observations import ObservationSets


def random_sets(n_series=5, n_variables=4, seed=0, max_obs=9):
    """History before 0 and queries after it, each variable at its own random times; some variables
    of some series never observed (history or queries)."""
    g = torch.Generator().manual_seed(seed)
    rows = {"series": [], "variable": [], "time": [], "value": []}
    queries = {"series": [], "variable": [], "time": [], "value": []}
    for s in range(n_series):
        for c in range(n_variables):
            for target, sign in ((rows, -1.0), (queries, 1.0)):
                n = int(torch.randint(0, max_obs + 1, (1,), generator=g))
                if (s + c) % 3 == 0 and target is rows:
                    n = 0
                times = torch.sort(torch.rand(n, generator=g, dtype=torch.float64) * 24.0).values
                times = times + torch.arange(n) * 1e-3  # distinct
                target["series"] += [s] * n
                target["variable"] += [c] * n
                target["time"] += (sign * times if sign > 0 else -times.flip(0)).tolist()
                target["value"] += torch.rand(n, generator=g).tolist()
    ids = torch.arange(n_series).numpy()
    history = ObservationSets.build(ids, n_variables=n_variables, **rows)
    query = ObservationSets.build(ids, n_variables=n_variables, **queries)
    return history, query


def call(model, batch):
    return model(batch["values"], batch["times"], batch["lengths"], batch["query_times"], batch["query_lengths"])


def variable_0_sees_when_variable_1_was_observed(model) -> bool:
    """Whether variable 0's forecast moves when variable 1, seen once, moves from hour -6 (beside
    variable 0's token at -5) to -0.5 (beside its token at -1); variables 2 and 3 stay at -23, -22."""
    values = torch.tensor([[[0.2, 0.4, 0.3], [0.9, 0.0, 0.0], [0.5, 0.0, 0.0], [0.1, 0.0, 0.0]]])
    times = torch.tensor([[[-9.0, -5.0, -1.0], [-6.0, 0.0, 0.0], [-23.0, 0.0, 0.0], [-22.0, 0.0, 0.0]]])
    lengths = torch.tensor([[3, 1, 1, 1]])
    q_times, q_len = torch.full((1, 4, 1), 2.0), torch.tensor([[1, 0, 0, 0]])
    with torch.no_grad():
        early = model(values, times, lengths, q_times, q_len)[0, 0, 0]
        later = model(values, times.index_put((torch.tensor([0]), torch.tensor([1]), torch.tensor([0])),
                                              torch.tensor(-0.5)), lengths, q_times, q_len)[0, 0, 0]
    return bool(early != later)
