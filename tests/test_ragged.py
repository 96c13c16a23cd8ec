"""Batched reads of ragged rows equal one read per query."""

from __future__ import annotations

import pytest
import torch

from ts_continuum.models.layers import QueryAttention
from ts_continuum.models.ragged import read_fixed_rows


@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_queries_batched_by_row_read_as_one_query_at_a_time(attention):
    """Rows with 0, 1, 2, 5, 9 and 20 queries (several buckets) over rows of 3 keys: the same values
    and gradients as each query reading its own row alone."""
    torch.manual_seed(0)
    attn = QueryAttention(8, 2, attention=attention, rope=True, backend="torch").double()
    counts = torch.tensor([2, 0, 1, 20, 5, 0, 9])
    R, P, Q = len(counts), 3, int(counts.sum())
    qn = torch.randn(Q, 8, dtype=torch.float64, requires_grad=True)
    q_times = torch.rand(Q, dtype=torch.float64) * 24
    keys = torch.randn(R, P, 8, dtype=torch.float64, requires_grad=True)
    key_times = torch.tensor([-20.0, -12.0, -4.0], dtype=torch.float64).expand(R, P)

    batched = read_fixed_rows(attn, qn, q_times, counts, keys, key_times)
    row = torch.repeat_interleave(torch.arange(R), counts)
    alone = torch.cat([attn(qn[i, None, None], q_times[i, None, None], None, keys[row[i], None],
                            key_times[row[i], None], None)[0] for i in range(Q)])
    torch.testing.assert_close(batched, alone)
    weights = torch.randn(Q, 8, dtype=torch.float64)
    grads = torch.autograd.grad((batched * weights).sum(), (qn, keys))
    expected = torch.autograd.grad((alone * weights).sum(), (qn, keys))
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_no_queries_read_nothing():
    attn = QueryAttention(8, 2, backend="torch")
    out = read_fixed_rows(attn, torch.zeros(0, 8), torch.zeros(0), torch.zeros(3, dtype=torch.long),
                          torch.randn(3, 2, 8), torch.zeros(3, 2))
    assert out.shape == (0, 8)
