"""`retrieval_fall_out`: fraction of non-relevant rows ranked in the top k."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking


@factory
@_base.document
def retrieval_fall_out(
    *,
    top_k: Optional[int] = None,
    empty_target_action: _base.EmptyAction = "pos",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """Fall-out: ``|{i < k: not relevant}| / |non-relevant rows|`` per query, aggregated (lower is better).

    ``empty_target_action`` applies to queries with no *non-relevant* row
    (default ``"pos"``: they count as 1, as in torchmetrics).

    Args:
      top_k: the cutoff ``k`` (a positive int); ``None`` (default): all rows.
      <COMMON-FALLOUT>

    <INPUTS>

    <RETURNS>

    Example::

        >>> fmetrics.retrieval_fall_out(top_k=2)(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        tensor(1., dtype=torch.float64)
    """
    name = "retrieval_fall_out"
    _base.check_top_k(name, top_k)

    def per_query(r: Ranking) -> torch.Tensor:
        false_hits = r.per_query((~r.relevant & _base.cutoff(r, top_k)).to(torch.int64))
        return _base.ratio(false_hits, r.sizes - r.num_relevant)

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation, empty_when="non-relevant", higher_is_better=False)
