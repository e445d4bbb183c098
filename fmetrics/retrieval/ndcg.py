"""`retrieval_normalized_dcg`: NDCG@k with graded relevance, averaged over queries."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking, positions, sort_rows


def _discount_table(r: Ranking, top_k: Optional[int]) -> torch.Tensor:
    """``1 / log2(i + 2)`` for the 0-based ranks ``i`` inside the cutoff, then one 0 (for the ranks beyond)."""
    size = top_k if top_k is not None else int(r.sizes.max()) if r.num_queries else 0
    table = torch.zeros(size + 1, dtype=torch.float64, device=r.sizes.device)
    table[:size] = 1.0 / torch.log2(torch.arange(size, dtype=torch.float64, device=r.sizes.device) + 2.0)
    return table


def _tie_averaged_gains(r: Ranking) -> torch.Tensor:
    """Per row: its gain, or, for rows whose score ties with others of its query, the tie's mean gain."""
    if bool(r.new_tie.all()):
        return r.gains
    size = torch.diff(r.tie_starts, append=r.tie_starts.new_tensor([r.n]))
    tied = positions(size > 1)
    start, size = r.tie_starts[tied], size[tied]
    group = torch.repeat_interleave(torch.arange(tied.shape[0], device=size.device), size)
    rows = start[group] + torch.arange(group.shape[0], device=size.device) - (torch.cumsum(size, 0) - size)[group]
    mean = torch.zeros(tied.shape[0], dtype=torch.float64, device=size.device).index_add(0, group, r.gains[rows])
    return r.gains.index_put((rows,), (mean / size)[group])


def _tie_averaged_dcg(r: Ranking, discount: torch.Tensor) -> torch.Tensor:
    """Per query: ``sum_i g_i D(i)`` over all its rows, with tied rows' gains replaced by their tie's mean."""
    at_rank = discount.index_select(0, r.rank.clamp(max=discount.shape[0] - 1))
    return r.per_query(_tie_averaged_gains(r) * at_rank)


def _ideal_dcg(r: Ranking, discount: torch.Tensor) -> torch.Tensor:
    """Per query: the DCG of its targets sorted descending.

    Integer gains ``0..G`` (``G = r.gain_levels``) need no sort: the ideal list starts with the
    ``N_g`` rows of gain >= g for every level g, so
    ``IDCG = sum_{g=1..G} D(N_g)`` with ``D(m) = sum_{i<min(m,k)} 1/log2(i+2)``,
    from a per-query histogram of the gains (``N_1`` = the relevant rows).
    """
    cumulative = torch.cat([discount.new_zeros(1), torch.cumsum(discount[:-1], 0)])
    levels = r.gain_levels
    if r.level_counts is not None:  # the histogram of the packed keys
        at_least = r.level_counts[:, 1:].flip(1).cumsum(1)
        return cumulative[at_least.clamp(max=discount.shape[0] - 1)].sum(1)
    if levels is not None and r.num_queries * levels <= 4 * r.n:
        if levels <= 1:
            return cumulative[r.num_relevant.clamp(max=discount.shape[0] - 1)]
        rows = positions(r.gains > 0)
        slot = r.query.index_select(0, rows) * levels + r.gains.index_select(0, rows).to(torch.int64) - 1
        count = torch.zeros(r.num_queries * levels, dtype=torch.int64, device=rows.device)
        at_least = count.index_add(0, slot, torch.ones_like(slot)).reshape(-1, levels).flip(1).cumsum(1)
        return cumulative[at_least.clamp(max=discount.shape[0] - 1)].sum(1)
    # other gains: sort the positive rows by (query, gain descending); zero gains add nothing
    # (targets are >= 0: the validation rule)
    t = r.gains
    rows = positions(t > 0)
    order = sort_rows(t[rows], r.query[rows])[0]
    query, gain = r.query[rows][order], t[rows][order]
    new = torch.ones_like(query, dtype=torch.bool)
    new[1:] = query[1:] != query[:-1]
    starts = positions(new)
    rank = torch.arange(query.shape[0], device=t.device) - starts[torch.cumsum(new, 0) - 1]
    return torch.zeros(r.num_queries, dtype=torch.float64, device=t.device).index_add(
        0, query, gain * discount[rank.clamp(max=discount.shape[0] - 1)])


@factory
@_base.document
def retrieval_normalized_dcg(
    *,
    top_k: Optional[int] = None,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """Normalized discounted cumulative gain per query, aggregated over queries.

    ``DCG@k = sum_{i<k} g_i / log2(i + 2)`` over the rows ranked by score (0-based
    rank ``i``, gain ``g_i`` = the target, graded relevance allowed);
    ``NDCG@k = DCG@k / IDCG@k``, IDCG being the DCG of the targets sorted
    descending (0 when IDCG is 0). Tied scores share the mean gain of their tie
    group (torchmetrics' rule).

    Args:
      top_k: only the ``k`` highest-scored rows of each query count, in DCG and IDCG (a
        positive int); ``None`` (default): all rows.
      <COMMON>

    <INPUTS-GRADED>

    <RETURNS>

    Example::

        >>> m = fmetrics.retrieval_normalized_dcg(top_k=2)
        >>> m(torch.tensor([.9, .2, .8, .1]), torch.tensor([0, 1, 2, 1]), torch.tensor([0, 0, 0, 1]))
        tensor(0.7398, dtype=torch.float64)
    """
    name = "retrieval_normalized_dcg"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        discount = _discount_table(r, top_k)
        if top_k is None:
            dcg = _tie_averaged_dcg(r, discount)
        else:  # the top rows' gains; queries where a top row ties are redone with their tie groups' means
            dcg, tied = r.top_gains(discount, top_k)
            if tied.numel() and r.packed:
                dcg[tied] = _tie_averaged_dcg(r.restricted(tied), discount)
            elif tied.numel():
                dcg = _tie_averaged_dcg(r, discount)
        idcg = _ideal_dcg(r, discount)
        return torch.where(idcg != 0, dcg / torch.where(idcg != 0, idcg, 1.0), torch.zeros_like(dcg))

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation, binary=False)
