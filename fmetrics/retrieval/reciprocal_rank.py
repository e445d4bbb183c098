"""`retrieval_mrr`: mean reciprocal rank (torchmetrics' ``RetrievalMRR``)."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking


@factory
@_base.document
def retrieval_mrr(
    *,
    top_k: Optional[int] = None,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """Reciprocal rank of the first relevant row per query, aggregated over queries (MRR).

    ``RR@k = 1 / (i + 1)`` for the first 0-based rank ``i < k`` holding a relevant
    row with score > 0; 0 if there is none. Tied scores rank the non-relevant
    rows first (pessimistic).

    Args:
      top_k: only the ``k`` highest-scored rows of each query count (a positive int);
        ``None`` (default): all rows.
      <COMMON>

    <INPUTS>

    <RETURNS>

    Example::

        >>> fmetrics.retrieval_mrr()(torch.tensor([.2, .3, .5]), torch.tensor([0, 1, 0]), torch.tensor([0, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "retrieval_mrr"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        query, rank, n = r.hits(r.relevant & r.retrieved & _base.cutoff(r, top_k))
        return r.scatter(query, torch.where(n == 1, 1.0 / (rank + 1).to(torch.float64), 0.0))

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation)


retrieval_reciprocal_rank = retrieval_mrr  # torchmetrics' functional name
