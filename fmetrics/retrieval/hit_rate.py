"""`retrieval_hit_rate`: whether a relevant row is in the top k."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking


@factory
@_base.document
def retrieval_hit_rate(
    *,
    top_k: Optional[int] = None,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """Hit rate: ``1`` if some row ranked ``i < k`` is relevant, else ``0``, per query; aggregated over queries.

    Args:
      top_k: the cutoff ``k`` (a positive int); ``None`` (default): all rows.
      <COMMON>

    <INPUTS>

    <RETURNS>

    Example::

        >>> fmetrics.retrieval_hit_rate(top_k=1)(
        ...     torch.tensor([.2, .3, .5, .1]), torch.tensor([1, 0, 1, 1]), torch.tensor([0, 0, 0, 1]))
        tensor(1., dtype=torch.float64)
    """
    name = "retrieval_hit_rate"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        return (r.per_query((r.relevant & _base.cutoff(r, top_k)).to(torch.int64)) > 0).to(torch.float64)

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation)
