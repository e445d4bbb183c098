"""`retrieval_normalized_dcg`: NDCG@k with graded relevance, averaged over queries."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking, sort_rows


def _discount(rank: torch.Tensor, top_k: Optional[int]) -> torch.Tensor:
    """``1 / log2(rank + 2)`` for 0-based ranks inside the cutoff, else 0 (a lookup in a small table)."""
    size = top_k if top_k is not None else int(rank.max()) + 1 if rank.numel() else 0
    table = torch.zeros(size + 1, dtype=torch.float64, device=rank.device)
    table[:size] = 1.0 / torch.log2(torch.arange(size, dtype=torch.float64, device=rank.device) + 2.0)
    return table[rank.clamp(max=size)]


def _tie_averaged_gains(r: Ranking) -> torch.Tensor:
    """Per row: its gain, or, for rows whose score ties with others of its query, the tie's mean gain."""
    size = torch.diff(r.tie_starts, append=r.tie_starts.new_tensor([r.n]))
    tied = torch.nonzero(size > 1).reshape(-1)
    if tied.shape[0] == 0:
        return r.gains
    start, size = r.tie_starts[tied], size[tied]
    group = torch.repeat_interleave(torch.arange(tied.shape[0], device=size.device), size)
    rows = start[group] + torch.arange(group.shape[0], device=size.device) - (torch.cumsum(size, 0) - size)[group]
    mean = torch.zeros(tied.shape[0], dtype=torch.float64, device=size.device).index_add(0, group, r.gains[rows])
    return r.gains.index_put((rows,), (mean / size)[group])


def _ideal_dcg(r: Ranking, top_k: Optional[int]) -> torch.Tensor:
    """Per query: the DCG of its targets sorted descending."""
    t = r.gains
    if bool(((t == 0) | (t == 1)).all()):  # binary: the ideal ranking puts the R relevant rows first
        return r.per_query(torch.where(r.rank < r.num_relevant[r.query], _discount(r.rank, top_k), 0.0))
    # zero gains add nothing; without negative gains only the positive rows need sorting
    rows = torch.nonzero(t > 0).reshape(-1) if bool((t >= 0).all()) else torch.arange(r.n, device=t.device)
    order = sort_rows(t[rows], r.query[rows])[0]
    query, gain = r.query[rows][order], t[rows][order]
    new = torch.ones_like(query, dtype=torch.bool)
    new[1:] = query[1:] != query[:-1]
    starts = torch.nonzero(new).reshape(-1)
    rank = torch.arange(query.shape[0], device=t.device) - starts[torch.cumsum(new, 0) - 1]
    return torch.zeros(r.num_queries, dtype=torch.float64, device=t.device).index_add(
        0, query, gain * _discount(rank, top_k))


def retrieval_normalized_dcg(
    top_k: Optional[int] = None,
    empty_target_action: str = "neg",
    ignore_index: Optional[int] = None,
    aggregation="mean",
) -> Metric:
    """Normalized discounted cumulative gain per query, aggregated over queries.

    ``DCG@k = sum_{i<k} g_i / log2(i + 2)`` over the rows ranked by score (0-based
    rank ``i``, gain ``g_i`` = the target, graded relevance allowed);
    ``NDCG@k = DCG@k / IDCG@k``, IDCG being the DCG of the targets sorted
    descending (0 when IDCG is 0). Tied scores share the mean gain of their tie
    group (torchmetrics' rule). ``update(state, preds, target, indexes)``.

    Example::

        >>> m = fmetrics.retrieval_normalized_dcg(top_k=2)
        >>> m(torch.tensor([.9, .2, .8, .1]), torch.tensor([0, 1, 2, 1]), torch.tensor([0, 0, 0, 1]))
        tensor(0.7398, dtype=torch.float64)
    """
    name = "retrieval_normalized_dcg"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        dcg = r.per_query(_tie_averaged_gains(r) * _discount(r.rank, top_k))
        idcg = _ideal_dcg(r, top_k)
        return torch.where(idcg != 0, dcg / torch.where(idcg != 0, idcg, 1.0), torch.zeros_like(dcg))

    return _base.build(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                       aggregation=aggregation, binary=False)
