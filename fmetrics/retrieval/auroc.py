"""`retrieval_auroc`: area under the ROC curve of each query's top-k rows."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base
from fmetrics.retrieval._ranking import Ranking, segment_sum


@factory
@_base.document
def retrieval_auroc(
    *,
    top_k: Optional[int] = None,
    max_fpr: Optional[float] = None,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """ROC AUC per query over its top ``k`` rows, aggregated over queries.

    ``AUC = P(s_pos > s_neg) + P(s_pos = s_neg) / 2`` over the relevant / non-relevant
    pairs among the top ``k`` rows (0 if those lack either class). With
    ``max_fpr``, the McClish-standardized partial AUC up to that false positive
    rate (as scikit-learn and torchmetrics). Tied scores give half credit.

    Args:
      top_k: only the ``k`` highest-scored rows of each query count (a positive int);
        ``None`` (default): all rows.
      max_fpr: ``None`` (default): the full area; a float in (0, 1]: the standardized partial
        area up to that false positive rate.
      <COMMON>

    <INPUTS>

    <RETURNS>

    Example::

        >>> fmetrics.retrieval_auroc()(
        ...     torch.tensor([.2, .3, .5, .1]), torch.tensor([1, 0, 1, 0]), torch.tensor([0, 0, 0, 0]))
        tensor(0.7500, dtype=torch.float64)
    """
    name = "retrieval_auroc"
    _base.check_top_k(name, top_k)
    if max_fpr is not None and (isinstance(max_fpr, bool) or not isinstance(max_fpr, (int, float))
                                or not 0 < max_fpr <= 1):
        raise validation.fail(name, "max_fpr", "a float in (0, 1] or None", repr(max_fpr))

    def per_query(r: Ranking) -> torch.Tensor:
        inside = _base.cutoff(r, top_k)
        pos = (r.relevant & inside).to(torch.int64)
        neg = (~r.relevant & inside).to(torch.int64)
        num_pos, num_neg = r.per_query(pos), r.per_query(neg)
        # the ROC curve has one point per tie group, in rank order
        tie_pos, tie_neg = segment_sum(pos, r.tie_starts), segment_sum(neg, r.tie_starts)
        tie_query = r.query[r.tie_starts]
        first_tie = torch.cumsum(r.new_tie, 0)[r.starts] - 1  # each query's first tie group

        def running(x):
            c = torch.cumsum(x, 0)
            return c - (c[first_tie] - x[first_tie]).index_select(0, tie_query)

        p_total = num_pos.index_select(0, tie_query).clamp_min(1).to(torch.float64)
        n_total = num_neg.index_select(0, tie_query).clamp_min(1).to(torch.float64)
        tpr1, fpr1 = running(tie_pos) / p_total, running(tie_neg) / n_total
        tpr0, fpr0 = tpr1 - tie_pos / p_total, fpr1 - tie_neg / n_total
        limit = 1.0 if max_fpr is None else float(max_fpr)
        fpr_end = fpr1.clamp(max=limit)
        width = (fpr_end - fpr0).clamp_min(0.0)
        slope = (tpr1 - tpr0) / torch.where(fpr1 > fpr0, fpr1 - fpr0, 1.0)
        tpr_end = torch.where(fpr1 > fpr0, tpr0 + slope * (fpr_end - fpr0), tpr1)
        area = segment_sum(width * (tpr0 + tpr_end) / 2, first_tie)
        if max_fpr is not None and max_fpr < 1:
            min_area, max_area = 0.5 * limit**2, limit
            area = 0.5 * (1 + (area - min_area) / (max_area - min_area))
        return torch.where((num_pos > 0) & (num_neg > 0), area, torch.zeros_like(area))

    return _base.member(name, per_query, empty_target_action=empty_target_action, ignore_index=ignore_index,
                        aggregation=aggregation)
