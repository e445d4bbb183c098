"""`retrieval_hit_rate`: whether a relevant row is in the top k."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking
from fmetrics.recipe import factory


@factory
def retrieval_hit_rate(*, 
    top_k: Optional[int] = None,
    empty_target_action: str = "neg",
    ignore_index: Optional[int] = None,
    aggregation="mean",
) -> Metric:
    """``1`` if some row ranked ``i < k`` is relevant, else ``0``, per query; aggregated over queries.

    Example::

        >>> fmetrics.retrieval_hit_rate(top_k=1)(
        ...     torch.tensor([.2, .3, .5, .1]), torch.tensor([1, 0, 1, 1]), torch.tensor([0, 0, 0, 1]))
        tensor(1., dtype=torch.float64)
    """
    name = "retrieval_hit_rate"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        return (r.per_query((r.relevant & _base.cutoff(r, top_k)).to(torch.int64)) > 0).to(torch.float64)

    return _base.build(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                       aggregation=aggregation)
