"""`retrieval_precision_recall_curve` and `retrieval_recall_at_fixed_precision`: precision and recall at k = 1..K."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.retrieval import _base, _state
from fmetrics.retrieval._ranking import ranking
from fmetrics.recipe import factory


def _curves(name, state, max_k, adaptive_k, empty_target_action, ignore_index):
    """Per-query precision@k and recall@k for k = 1..K as two (queries, K) matrices, and K."""
    _state.report(name, state, binary=True)
    r = ranking(state, ignore_index)
    k_max = max_k if max_k is not None else int(r.sizes.max()) if r.num_queries else 1
    inside = r.rank < k_max
    hits = torch.zeros(r.num_queries * k_max, dtype=torch.int64, device=r.rank.device)
    slot = torch.where(inside, r.query * k_max + r.rank, 0)
    hits = hits.index_add(0, slot, (r.relevant & inside).to(torch.int64)).reshape(r.num_queries, k_max)
    found = torch.cumsum(hits, 1).to(torch.float64)
    k = torch.arange(1, k_max + 1, device=found.device)
    denom = torch.minimum(k, r.sizes[:, None]) if adaptive_k else k.expand_as(found)
    precision = found / denom
    recall = _base.ratio(found, r.num_relevant[:, None].expand_as(found))
    empty = r.num_relevant == 0
    precision = _base.handle_empty(name, precision, empty, empty_target_action, "relevant document")
    recall = _base.handle_empty(name, recall, empty, empty_target_action, "relevant document")
    return precision, recall, k, empty & (empty_target_action == "skip")


def _check(name, max_k, adaptive_k, empty_target_action, ignore_index, aggregation):
    _base.check_top_k(name, max_k, "max_k")
    _base.check_flag(name, "adaptive_k", adaptive_k)
    _base.check_common(name, empty_target_action, ignore_index, aggregation)


@factory
def retrieval_precision_recall_curve(*, 
    max_k: Optional[int] = None,
    adaptive_k: bool = False,
    empty_target_action: str = "neg",
    ignore_index: Optional[int] = None,
    aggregation="mean",
) -> Metric:
    """``(precision, recall, top_k)``: precision@k and recall@k for k = 1..K, aggregated per k over queries.

    ``K = max_k``, or the largest query's row count when None. ``P@k`` divides by
    ``k`` (by ``min(k, rows)`` with ``adaptive_k``); no score threshold applies.
    ``aggregation="none"`` gives (queries, K) matrices. Memory: queries x K.

    Example::

        >>> p, r, k = fmetrics.retrieval_precision_recall_curve(max_k=2)(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        >>> p, r
        (tensor([1.0000, 0.5000], dtype=torch.float64), tensor([0.5000, 0.5000], dtype=torch.float64))
    """
    name = "retrieval_precision_recall_curve"
    _check(name, max_k, adaptive_k, empty_target_action, ignore_index, aggregation)

    def finalize(state):
        precision, recall, k, skipped = _curves(name, state, max_k, adaptive_k, empty_target_action, ignore_index)
        return (_base.aggregate(precision, skipped, aggregation), _base.aggregate(recall, skipped, aggregation), k)

    return _base.make(name, finalize, ignore_index)


@factory
def retrieval_recall_at_fixed_precision(*, 
    min_precision: float = 0.0,
    max_k: Optional[int] = None,
    adaptive_k: bool = False,
    empty_target_action: str = "neg",
    ignore_index: Optional[int] = None,
    aggregation="mean",
) -> Metric:
    """``(recall, k)``: the largest aggregated recall@k whose aggregated precision@k >= ``min_precision``.

    Among equal recalls the largest ``k`` wins; with no such ``k``, or a best
    recall of 0, the result is ``(0, K)`` (torchmetrics' convention). With
    ``aggregation="none"`` the rule is applied to each query's own curve.

    Example::

        >>> fmetrics.retrieval_recall_at_fixed_precision(min_precision=0.6, max_k=3)(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        (tensor(1., dtype=torch.float64), tensor(3))
    """
    name = "retrieval_recall_at_fixed_precision"
    if isinstance(min_precision, bool) or not isinstance(min_precision, (int, float)) or not 0 <= min_precision <= 1:
        raise validation.fail(name, "min_precision", "a float in [0, 1]", repr(min_precision))
    _check(name, max_k, adaptive_k, empty_target_action, ignore_index, aggregation)

    def finalize(state):
        precision, recall, k, skipped = _curves(name, state, max_k, adaptive_k, empty_target_action, ignore_index)
        precision = _base.aggregate(precision, skipped, aggregation)
        recall = _base.aggregate(recall, skipped, aggregation)
        # best recall among admissible k; ties -> the largest k (flip, then argmax picks the first)
        admissible = torch.where(precision >= min_precision, recall.nan_to_num(-1.0), -1.0)
        best = admissible.flip(-1).argmax(-1, keepdim=True)
        best_recall = admissible.flip(-1).gather(-1, best).squeeze(-1).clamp_min(0.0)
        best_k = torch.where(best_recall > 0, k.shape[0] - best.squeeze(-1), k.shape[0])
        return best_recall, best_k

    return _base.make(name, finalize, ignore_index)
