"""`Ranking`: a retrieval state's rows grouped by query and ranked by score, computed once.

Rows are ordered by (query id ascending, score descending) with two stable
int64 sorts (radix sorts on CPU): first on an order-preserving integer image
of the score, then on the query id. Per-query quantities are segment sums
over that order (differences of a cumulative sum), so nothing loops over
queries. ``ranking(state, ignore_index)`` caches the last result, so the
retrieval metrics of one `fmetrics.collection` finalize over one grouping.

Ties (equal scores within a query) form *tie groups*. `relevant` breaks them
pessimistically: within a tie group the non-relevant rows come first, so a
constant score never earns credit. NDCG averages gains over tie groups instead
(torchmetrics' rule), using `tie` / `tie_starts`.
"""
from __future__ import annotations

from functools import cached_property
from typing import Optional

import torch

from fmetrics.retrieval._state import RetrievalState
from fmetrics.state import cat_chunks, leaves

_FLIP = torch.iinfo(torch.int64).max


def _order_key(score: torch.Tensor) -> torch.Tensor:
    """int64 keys with the same order as float64 ``score`` (no NaN; -0.0 == 0.0)."""
    bits = (score + 0.0).view(torch.int64)
    return torch.where(bits < 0, bits ^ _FLIP, bits)


def _starts(new: torch.Tensor) -> torch.Tensor:
    return torch.nonzero(new).reshape(-1)


def segment_sum(x: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """Sums of ``x`` over the contiguous segments beginning at ``starts``."""
    c = torch.cumsum(x, 0)
    c = torch.cat([c.new_zeros(1), c])
    ends = torch.cat([starts[1:], starts.new_tensor([x.shape[0]])])
    return c[ends] - c[starts]


class Ranking:
    """Rows sorted by (query, score descending), with per-row and per-query indices.

    Attributes (rows are in ranked order):
      score, target: float64 per row.
      query: per row, the position of its query (0..num_queries-1).
      rank: per row, its 0-based rank within its query (ties: arrival order; see `relevant`).
      ids: per query, the query id; starts / sizes: its first row and row count.
      tie, tie_starts: per row, its tie group; per tie group, its first row.
    """

    def __init__(self, preds: torch.Tensor, target: torch.Tensor, indexes: torch.Tensor):
        n = preds.shape[0]
        score = preds.to(torch.float64)
        key = _order_key(score)
        by_score = torch.sort(~key, stable=True).indices  # score descending
        order = by_score[torch.sort(indexes[by_score], stable=True).indices]
        self.score = score[order]
        self.target = target[order].to(torch.float64)
        q = indexes[order]
        key = key[order]
        new_query = torch.ones(n, dtype=torch.bool, device=q.device)
        new_query[1:] = q[1:] != q[:-1]
        self.starts = _starts(new_query)
        self.num_queries = self.starts.shape[0]
        self.sizes = torch.diff(self.starts, append=self.starts.new_tensor([n]))
        self.query = torch.cumsum(new_query, 0) - 1
        self.position = torch.arange(n, device=q.device)
        self.rank = self.position - self.starts[self.query]
        self.ids = q[self.starts]
        new_tie = new_query.clone()
        new_tie[1:] |= key[1:] != key[:-1]
        self.tie_starts = _starts(new_tie)
        self.tie = torch.cumsum(new_tie, 0) - 1
        self.n = n

    def per_query(self, x: torch.Tensor) -> torch.Tensor:
        """Per-query sums of a per-row quantity."""
        return segment_sum(x, self.starts)

    def cumulative(self, x: torch.Tensor) -> torch.Tensor:
        """Per-row inclusive running sum of ``x`` within each query."""
        c = torch.cumsum(x, 0)
        return c - (c[self.starts] - x[self.starts])[self.query]

    @cached_property
    def relevant(self) -> torch.Tensor:
        """Per-row binary relevance in ranked order, ties broken pessimistically."""
        rel = self.target > 0
        if self.tie_starts.shape[0] == self.n:
            return rel
        tie_rel = segment_sum(rel.to(torch.int64), self.tie_starts)
        tie_size = torch.diff(self.tie_starts, append=self.tie_starts.new_tensor([self.n]))
        offset = self.position - self.tie_starts[self.tie]
        return offset >= (tie_size - tie_rel)[self.tie]

    @cached_property
    def num_relevant(self) -> torch.Tensor:
        """Per query: rows with target > 0 (int64)."""
        return self.per_query((self.target > 0).to(torch.int64))

    @cached_property
    def relevant_so_far(self) -> torch.Tensor:
        """Per row: relevant rows at or above it in its query (int64)."""
        return self.cumulative(self.relevant.to(torch.int64))

    @cached_property
    def retrieved(self) -> torch.Tensor:
        """Per row: score > 0 (torchmetrics' MAP/MRR/precision/recall treat the rest as not retrieved)."""
        return self.score > 0


_LAST: list = []  # [(fingerprint, state, ranking)]: the last grouping, for metrics sharing a state


def _fingerprint(state: RetrievalState, ignore_index: Optional[int]) -> tuple:
    parts: list = [ignore_index]
    for x in leaves(state):
        parts.append(id(x))
        try:
            parts.append(x._version)
        except RuntimeError:  # inference tensors carry no version counter
            pass
    return tuple(parts)


def ranking(state: RetrievalState, ignore_index: Optional[int]) -> Ranking:
    """The `Ranking` of a state's rows (rows whose target equals ``ignore_index`` dropped); cached."""
    fp = _fingerprint(state, ignore_index)
    if _LAST and _LAST[0][0] == fp:
        return _LAST[0][2]
    device = state.negative_indexes.device
    preds = cat_chunks(state.preds, torch.empty(0, device=device))
    target = cat_chunks(state.target, torch.empty(0, device=device))
    indexes = cat_chunks(state.indexes, torch.empty(0, dtype=torch.int64, device=device))
    if ignore_index is not None:
        keep = target != ignore_index
        preds, target, indexes = preds[keep], target[keep], indexes[keep]
    result = Ranking(preds, target, indexes)
    _LAST[:] = [(fp, state, result)]
    return result
