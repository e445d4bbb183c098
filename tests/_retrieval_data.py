"""Synthetic retrieval runs for the retrieval tests: ties, graded relevance, empty and single-row queries."""
from __future__ import annotations

import torch


def make_run(seed: int, n_queries: int = 40, max_rows: int = 12, ties: bool = True, graded: bool = False,
             positive: bool = False, dtype=torch.float32):
    """``(preds, target, indexes)`` rows in shuffled order.

    Query ids are distinct non-contiguous ints; query 0 of the list has one row,
    every 5th query has no relevant row and every 7th no non-relevant row.
    ``ties``: scores on a 0.1 grid in [-0.2, 0.7] (many ties, some scores <= 0);
    otherwise distinct continuous scores (in (0, 1) when ``positive``).
    """
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, max_rows + 1, (n_queries,), generator=g)
    sizes[0] = 1
    ids = torch.randperm(10 * n_queries, generator=g)[:n_queries]
    indexes = torch.repeat_interleave(ids, sizes)
    query = torch.repeat_interleave(torch.arange(n_queries), sizes)
    n = indexes.shape[0]
    if graded:
        target = torch.randint(0, 4, (n,), generator=g) * (torch.rand(n, generator=g) < 0.5)
    else:
        target = (torch.rand(n, generator=g) < 0.35).long()
    target = torch.where(query % 5 == 4, 0, target)
    target = torch.where((query % 7 == 6) & (query % 5 != 4), target.clamp_min(1), target)
    if ties:
        preds = torch.randint(0, 10, (n,), generator=g).to(dtype) / 10 - 0.2
    elif positive:
        preds = (torch.randperm(n, generator=g).to(dtype) + 0.5) / n
    else:
        preds = torch.randperm(n, generator=g).to(dtype) / n - 0.3
    perm = torch.randperm(n, generator=g)
    return preds[perm], target[perm], indexes[perm]
