"""`retrieval_precision`: precision@k per query (torchmetrics' ``RetrievalPrecision``)."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking


@factory
@_base.document
def retrieval_precision(
    *,
    top_k: Optional[int] = None,
    adaptive_k: bool = False,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """Fraction of the top ``k`` rows that are relevant (and scored > 0), aggregated over queries.

    ``P@k = |{i < k: relevant, score > 0}| / k``; ``k`` is the query's row count
    when ``top_k`` is None, and with ``adaptive_k`` a query with fewer than
    ``top_k`` rows uses its row count.

    Args:
      top_k: the cutoff ``k`` (a positive int); ``None`` (default): each query's row count.
      adaptive_k: ``True`` divides by ``min(k, rows of the query)``; ``False`` (default) by ``k``.
      <COMMON>

    <INPUTS>

    <RETURNS>

    Example::

        >>> fmetrics.retrieval_precision(top_k=2)(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "retrieval_precision"
    _base.check_top_k(name, top_k)
    _base.check_flag(name, "adaptive_k", adaptive_k)

    def per_query(r: Ranking) -> torch.Tensor:
        hits = r.per_query((r.relevant & r.retrieved & _base.cutoff(r, top_k)).to(torch.int64))
        if top_k is None:
            k = r.sizes
        elif adaptive_k:
            k = r.sizes.clamp(max=top_k)
        else:
            k = torch.full_like(r.sizes, top_k)
        return _base.ratio(hits, k)

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation)
