"""`retrieval_normalized_dcg`: NDCG@k with graded relevance, averaged over queries."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking, segment_sum, sort_rows


def _ideal_gains(r: Ranking) -> torch.Tensor:
    """Per row: the gain at that rank of the ideal ranking (targets sorted descending per query)."""
    t = r.gains
    if bool(((t == 0) | (t == 1)).all()):
        return (r.rank < r.num_relevant[r.query]).to(torch.float64)
    return t[sort_rows(t, r.query)[0]]


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
        discount = torch.where(_base.cutoff(r, top_k), 1.0 / torch.log2(r.rank.to(torch.float64) + 2.0), 0.0)
        tie_size = torch.diff(r.tie_starts, append=r.tie_starts.new_tensor([r.n]))
        tie_gain = segment_sum(r.gains, r.tie_starts) / tie_size
        dcg = r.per_query(tie_gain[r.tie] * discount)
        idcg = r.per_query(_ideal_gains(r) * discount)
        return torch.where(idcg != 0, dcg / torch.where(idcg != 0, idcg, 1.0), torch.zeros_like(dcg))

    return _base.build(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                       aggregation=aggregation, binary=False)
