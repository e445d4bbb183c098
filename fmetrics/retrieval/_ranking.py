"""`Ranking`: a retrieval state's rows grouped by query and ranked by score, computed once.

Rows are ordered by (query id ascending, score descending) with one stable
int64 sort (a radix sort on CPU) of a packed key: the query id and an
order-preserving integer image of the score (`sort_rows`). Per-query quantities are segment sums
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
_LOW32 = (1 << 32) - 1


def _order_key(score: torch.Tensor) -> torch.Tensor:
    """int64 keys with the same order as float64 ``score`` (no NaN; -0.0 == 0.0)."""
    bits = (score.to(torch.float64) + 0.0).view(torch.int64)
    return torch.where(bits < 0, bits ^ _FLIP, bits)


def _order_key32(score: torch.Tensor) -> torch.Tensor:
    """Keys in [0, 2^32) with the same order as float32 ``score`` (no NaN; -0.0 == 0.0)."""
    bits = (score + 0.0).view(torch.int32).to(torch.int64)
    return torch.where(bits < 0, -1 - bits, bits + (1 << 31))


def sort_rows(values: torch.Tensor, groups: torch.Tensor):
    """Rows ordered by (group ascending, value descending): ``(order, sorted groups, sorted tie keys)``.

    Equal tie keys within a group mean equal values. Float32-exact values and a
    group range under 2^31 take one stable int64 sort of a packed key
    ``group << 32 | descending value bits`` (a radix sort on CPU); anything else
    two (value, then group). The order within a tie is unspecified.
    """
    n = values.shape[0]
    if values.dtype in (torch.float16, torch.bfloat16) or (
        values.dtype == torch.float64 and bool((values.float().double() == values).all())
    ):
        values = values.float()
    if n and values.dtype == torch.float32:
        low, high = int(groups.min()), int(groups.max())
        if high - low < (1 << 31):
            packed = ((groups - low) << 32) | (_LOW32 - _order_key32(values))
            packed, order = torch.sort(packed, stable=True)
            return order, (packed >> 32) + low, packed
    key = _order_key(values)
    by_value = torch.sort(~key, stable=True).indices
    order = by_value[torch.sort(groups[by_value], stable=True).indices]
    return order, groups[order], key[order]


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
      rank: per row, its 0-based rank within its query (order within ties unspecified; see `relevant`).
      ids: per query, the query id; starts / sizes: its first row and row count.
      tie, tie_starts: per row, its tie group; per tie group, its first row.
    """

    def __init__(self, preds: torch.Tensor, target: torch.Tensor, indexes: torch.Tensor):
        n = preds.shape[0]
        self.order, q, tie_key = sort_rows(preds, indexes)
        self._preds = preds
        self.target = target[self.order].to(torch.float64)
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
        new_tie[1:] |= tie_key[1:] != tie_key[:-1]
        self.tie_starts = _starts(new_tie)
        self.tie = torch.cumsum(new_tie, 0) - 1
        self.n = n

    @cached_property
    def score(self) -> torch.Tensor:
        """Per row: the score, float64."""
        return self._preds[self.order].to(torch.float64)

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
