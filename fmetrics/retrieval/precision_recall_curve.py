"""`retrieval_precision_recall_curve` and `retrieval_recall_at_fixed_precision`: precision and recall at k = 1..K."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.retrieval import _base


def _curves(name, ranked: _base.Ranked, max_k, adaptive_k, empty_target_action):
    """Per-query precision@k and recall@k for k = 1..K as two (queries, K) matrices, k, and the skipped queries."""
    r = _base.start(name, ranked, binary=True)
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
@_base.document
def retrieval_precision_recall_curve(
    *,
    max_k: Optional[int] = None,
    adaptive_k: bool = False,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """``(precision, recall, top_k)``: precision@k and recall@k for k = 1..K, aggregated per k over queries.

    ``K = max_k``, or the largest query's row count when None. ``P@k`` divides by
    ``k`` (by ``min(k, rows)`` with ``adaptive_k``); no score threshold applies.
    Memory: queries x K.

    Args:
      max_k: the largest cutoff ``K`` (a positive int); ``None`` (default): the largest query's
        row count.
      adaptive_k: ``True`` divides ``P@k`` by ``min(k, rows of the query)``; ``False`` (default) by ``k``.
      <COMMON>

    <INPUTS>

    Returns:
      ``(precision, recall, top_k)``: float64 precision and recall of shape ``(K,)`` (``(queries, K)``
      with ``aggregation="none"``) and the int64 cutoffs ``1..K``. No rows at all: NaN curves
      (``K = 1`` without ``max_k``) with a warning.

    Example::

        >>> p, r, k = fmetrics.retrieval_precision_recall_curve(max_k=2)(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        >>> p, r, k
        (tensor([1.0000, 0.5000], dtype=torch.float64), tensor([0.5000, 0.5000], dtype=torch.float64), tensor([1, 2]))
    """
    name = "retrieval_precision_recall_curve"
    _check(name, max_k, adaptive_k, empty_target_action, ignore_index, aggregation)

    def finish(ranked):
        precision, recall, k, skipped = _curves(name, ranked, max_k, adaptive_k, empty_target_action)
        return (_base.aggregate(name, precision, skipped, aggregation),
                _base.aggregate(name, recall, skipped, aggregation), k)

    return _base.custom(name, finish, ignore_index, binary=True, higher_is_better=True, bounds=(0.0, 1.0))


@factory
@_base.document
def retrieval_recall_at_fixed_precision(
    *,
    min_precision: float = 0.0,
    max_k: Optional[int] = None,
    adaptive_k: bool = False,
    empty_target_action: _base.EmptyAction = "neg",
    ignore_index: Optional[int] = None,
    aggregation: _base.Aggregation = "mean",
) -> Metric:
    """``(recall, k)``: the largest aggregated recall@k whose aggregated precision@k >= ``min_precision``.

    Among equal recalls the largest ``k`` wins; with no such ``k``, or a best
    recall of 0, the result is ``(0, K)`` (torchmetrics' convention). With
    ``aggregation="none"`` the rule is applied to each query's own curve.

    Args:
      min_precision: the floor on precision, a float in [0, 1] (default 0.0).
      max_k: the largest cutoff ``K`` (a positive int); ``None`` (default): the largest query's
        row count.
      adaptive_k: ``True`` divides ``P@k`` by ``min(k, rows of the query)``; ``False`` (default) by ``k``.
      <COMMON>

    <INPUTS>

    Returns:
      ``(recall, k)``: the float64 recall and the int64 cutoff reaching it (one per query with
      ``aggregation="none"``). No rows at all: ``(nan, K)`` with a warning.

    Example::

        >>> fmetrics.retrieval_recall_at_fixed_precision(min_precision=0.6, max_k=3)(
        ...     torch.tensor([.2, .3, .5]), torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0]))
        (tensor(1., dtype=torch.float64), tensor(3))
    """
    name = "retrieval_recall_at_fixed_precision"
    if isinstance(min_precision, bool) or not isinstance(min_precision, (int, float)) or not 0 <= min_precision <= 1:
        raise validation.fail(name, "min_precision", "a float in [0, 1]", repr(min_precision))
    _check(name, max_k, adaptive_k, empty_target_action, ignore_index, aggregation)

    def finish(ranked):
        precision, recall, k, skipped = _curves(name, ranked, max_k, adaptive_k, empty_target_action)
        precision = _base.aggregate(name, precision, skipped, aggregation)
        recall = _base.aggregate(name, recall, skipped, aggregation)
        # best recall among admissible k; ties -> the largest k (flip, then argmax picks the first)
        admissible = torch.where(precision >= min_precision, recall.nan_to_num(-1.0), -1.0)
        best = admissible.flip(-1).argmax(-1, keepdim=True)
        best_recall = admissible.flip(-1).gather(-1, best).squeeze(-1).clamp_min(0.0)
        best_k = torch.where(best_recall > 0, k.shape[0] - best.squeeze(-1), k.shape[0])
        if ranked.ranking.n == 0:  # empty input: undefined (the warning came from _curves)
            best_recall = torch.full_like(best_recall, float("nan"))
        return best_recall, best_k

    return _base.custom(name, finish, ignore_index, binary=True, higher_is_better=True, bounds=(0.0, 1.0))
