"""Sharded finalize: the value over every rank's data without gathering the rows on any rank.

`finalize(metric, state, group, reduce)` dispatches on the metric's recipe:

* retrieval members (MAP, NDCG, MRR, precision, recall, ... with any aggregation): `retrieval`;
* exact binary AUROC (``max_fpr=None``) and binary average precision: `curves`;
* `spearman_corrcoef` and `kendall_rank_corrcoef` (states without NaN / inf): `spearman`, `kendall`;
* anything else: ``metric.finalize(reduce(metric, state))`` (today's gather path; for sum / min / max
  states that is already O(1) per rank). `shardable` tells which path a metric takes.
"""
from __future__ import annotations

from adapters._shard import comm, curves, kendall, retrieval, spearman

__all__ = ["finalize", "shardable"]

_PATHS = (retrieval, curves, spearman, kendall)


def shardable(metric) -> bool:
    """Whether `finalize` has a sharded path for ``metric`` (else it reduces with the gather path)."""
    return any(p.applies(metric) for p in _PATHS)


def finalize(metric, state, group, reduce):
    ctx = comm.context(group)
    for path in _PATHS:
        if path.applies(metric):
            return path.finalize(ctx, metric, state, lambda m, s: reduce(m, s, group=group, purpose="finalize"))
    return metric.finalize(reduce(metric, state, group=group, purpose="finalize"))
