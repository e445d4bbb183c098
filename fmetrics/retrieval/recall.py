"""`retrieval_recall`: recall@k per query (torchmetrics' ``RetrievalRecall``)."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking


@factory
@_base.document
def retrieval_recall(
    *,
    top_k: Optional[int] = None,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """Fraction of a query's relevant rows found in its top ``k`` (with score > 0), aggregated over queries.

    ``R@k = |{i < k: relevant, score > 0}| / |relevant rows of the query|``.

    Args:
      top_k: the cutoff ``k`` (a positive int); ``None`` (default): all rows.
      <COMMON>

    <INPUTS>

    <RETURNS>

    Example::

        >>> fmetrics.retrieval_recall(top_k=2)(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "retrieval_recall"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        hits = r.per_query((r.relevant & r.retrieved & _base.cutoff(r, top_k)).to(torch.int64))
        return _base.ratio(hits, r.num_relevant)

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation)
