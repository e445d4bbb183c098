"""`retrieval_map`: mean average precision (torchmetrics' ``RetrievalMAP``)."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking


@factory
@_base.document
def retrieval_map(
    *,
    top_k: Optional[int] = None,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """Average precision per query, aggregated over queries (MAP).

    ``AP@k = (1/|H|) sum_{i in H} P@(i+1)``, where ``H`` are the 0-based ranks
    ``i < k`` of relevant rows with score > 0 (rows scored <= 0 count as not
    retrieved, as in torchmetrics) and ``P@(i+1)`` the precision at that rank;
    0 when ``H`` is empty. Note the divisor is ``|H|``, not the number of
    relevant rows (trec_eval's ``map_cut_k`` differs; see docs/retrieval.md).
    Tied scores rank the non-relevant rows first (pessimistic).

    Args:
      top_k: only the ``k`` highest-scored rows of each query count (a positive int);
        ``None`` (default): all rows.
      <COMMON>

    <INPUTS>

    <RETURNS>

    Example::

        >>> m = fmetrics.retrieval_map()
        >>> m(torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        tensor(0.8333, dtype=torch.float64)
    """
    name = "retrieval_map"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        query, rank, n = r.hits(r.relevant & r.retrieved & _base.cutoff(r, top_k))
        precision = n.to(torch.float64) / (rank + 1)  # at the n-th hit of its query
        return _base.ratio(r.scatter(query, precision), r.scatter(query, torch.ones_like(n)))

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation)


retrieval_average_precision = retrieval_map  # torchmetrics' functional name
