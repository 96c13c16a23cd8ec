"""Rows of different lengths stored flat, padded only for attention, in buckets of similar length.

Observation sets are very uneven (PhysioNet: a heart rate seen 100 times in a day beside a lab value
seen once), so padding every (series, variable) row to the longest wastes most of the compute.
Position-wise layers run on the flat tokens; attention runs per bucket of rows whose lengths share a
power of two, padded to that bucket's longest (at most 2x waste); rows of up to ``MIN_WIDTH``
tokens share one bucket, since a call per tiny bucket costs more than its padding.
"""

from __future__ import annotations

import torch
from torch import nn

MIN_WIDTH = 8


class Ragged:
    """``lengths`` (R,) >= 1 tokens per row, stored flat in row order (row 0's tokens first)."""

    def __init__(self, lengths: torch.Tensor):
        self.lengths = lengths
        self.offsets = torch.cumsum(lengths, 0) - lengths
        self.total = int(lengths.sum())
        self.row = torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)
        level = torch.ceil(torch.log2(lengths.double().clamp_min(MIN_WIDTH))).long()
        self.buckets = [torch.nonzero(level == v).squeeze(1) for v in torch.unique(level).tolist()]

    def gather_index(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(R_b, N_b) flat token indices of ``rows`` (padding points at the row's first token) and
        the row lengths."""
        lengths = self.lengths[rows]
        width = int(lengths.max())
        pos = torch.arange(width, device=lengths.device)
        index = self.offsets[rows, None] + torch.where(pos < lengths[:, None], pos, torch.zeros_like(pos))
        return index, lengths

    def scatter(self, padded: torch.Tensor, rows: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """Write (R_b, N_b, d) padded rows back into the flat ``out`` (T, d) (valid positions only)."""
        index, lengths = self.gather_index(rows)
        valid = torch.arange(index.shape[1], device=index.device) < lengths[:, None]
        return out.index_copy(0, index[valid], padded[valid])

    def mean(self, flat: torch.Tensor) -> torch.Tensor:
        """(T, d) -> (R, d) mean of each row's tokens."""
        sums = flat.new_zeros(len(self.lengths), flat.shape[-1]).index_add(0, self.row, flat)
        return sums / self.lengths[:, None].to(flat.dtype)


def read_by_row(attn: nn.Module, qn: torch.Tensor, q_times: torch.Tensor, q_offsets: torch.Tensor,
                q_counts: torch.Tensor, hn: torch.Tensor, h_times: torch.Tensor, ragged: Ragged) -> torch.Tensor:
    """Each flat query (``qn`` (Q, d) at ``q_times`` (Q,)) reads the tokens of its row of ``ragged``
    (``hn`` (T, d) at ``h_times`` (T,)) by the query attention ``attn`` at its own time, per bucket
    of row length. ``q_offsets``, ``q_counts``: (R,) where each row's queries start in ``qn`` and how
    many (rows without queries read nothing). Returns (Q, d), zero for queries of no row."""
    read = torch.zeros_like(qn)
    for bucket in ragged.buckets:
        bucket = bucket[q_counts[bucket] > 0]
        if not bucket.numel():
            continue
        n_q = q_counts[bucket]
        pos = torch.arange(int(n_q.max()), device=qn.device)
        q_index = q_offsets[bucket, None] + torch.where(pos < n_q[:, None], pos, torch.zeros_like(pos))
        k_index, k_len = ragged.gather_index(bucket)
        full_k = bool((k_len == k_index.shape[1]).all())
        out = attn(qn[q_index], q_times[q_index], n_q, hn[k_index], h_times[k_index], None if full_k else k_len)
        valid = pos < n_q[:, None]
        read = read.index_copy(0, q_index[valid], out[valid])
    return read


def read_fixed_rows(attn: nn.Module, qn: torch.Tensor, q_times: torch.Tensor, q_counts: torch.Tensor,
                    keys: torch.Tensor, key_times: torch.Tensor) -> torch.Tensor:
    """Each flat query (``qn`` (Q, d) at ``q_times`` (Q,), stored row by row, ``q_counts`` (R,) per
    row) reads its row of ``keys`` (R, P, d) at ``key_times`` (R, P), every row of P tokens, by the
    query attention ``attn``. Rows are batched by their number of queries (buckets as
    :class:`Ragged`'s), so the keys are projected once per row rather than once per query.
    Returns (Q, d)."""
    rows = torch.nonzero(q_counts > 0).squeeze(1)
    read = torch.zeros_like(qn)
    if not rows.numel():
        return read
    queries = Ragged(q_counts[rows])
    for bucket in queries.buckets:
        q_index, n_q = queries.gather_index(bucket)
        out = attn(qn[q_index], q_times[q_index], n_q, keys[rows[bucket]], key_times[rows[bucket]], None)
        read = queries.scatter(out, bucket, read)
    return read
