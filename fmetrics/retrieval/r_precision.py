"""`retrieval_r_precision`: precision at R, R = the query's number of relevant rows."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking


@factory
@_base.document
def retrieval_r_precision(
    *,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """R-precision: ``|{i < R: relevant}| / R`` per query, ``R`` its number of relevant rows; aggregated over queries.

    Args:
      <COMMON>

    <INPUTS>

    <RETURNS>

    Example::

        >>> fmetrics.retrieval_r_precision()(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "retrieval_r_precision"

    def per_query(r: Ranking) -> torch.Tensor:
        hits = r.per_query((r.relevant & (r.rank < r.num_relevant.index_select(0, r.query))).to(torch.int64))
        return _base.ratio(hits, r.num_relevant)

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation)
