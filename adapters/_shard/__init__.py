"""Sharded finalize: the value over every rank's data without gathering the rows on any rank.

`finalize(metric, state, group, reduce)` dispatches on the metric's recipe:

* retrieval members (MAP, NDCG, MRR, precision, recall, ... with any aggregation): `retrieval`;
* exact binary AUROC (``max_fpr=None``) and binary average precision: `curves`;
* the other exact score-curve metrics (multiclass / multilabel AUROC and AP, ROC and PR curves, the
  fixed-point metrics, EER, log-AUC, AUROC with ``max_fpr``): `columns`;
* the clustering scores over a kept label table (``num_clusters=None``): `contingency`;
* COCO mean average precision (``iou_type`` ``"bbox"``, ``"segm"`` or both; any ``average``, ``extended_summary``):
  `detection`;
* `spearman_corrcoef` and `kendall_rank_corrcoef` (states without NaN / inf): `spearman`, `kendall`;
* a `fmetrics.collection`: each member by its path (retrieval members sharing a state route it once);
* anything else: ``metric.finalize(reduce(metric, state))`` (today's gather path; for sum / min / max
  states that is already O(1) per rank). `shardable` tells which path a metric takes.
"""
from __future__ import annotations

from typing import Mapping

from adapters._shard import columns, comm, contingency, curves, detection, kendall, retrieval, spearman

__all__ = ["finalize", "shardable"]

_PATHS = (retrieval, curves, spearman, kendall, columns, contingency, detection)


def _members(metric):
    """``(members by name, prefix, postfix)`` of a `fmetrics.collection`, else ``None``."""
    r = metric.recipe
    if r is None or r.module != "fmetrics.collection" or r.qualname != "collection":
        return None
    args = r.arguments
    return args["metrics"], args.get("prefix", ""), args.get("postfix", "")


def shardable(metric) -> bool:
    """Whether `finalize` has a sharded path for ``metric`` (a collection: for any member); else it reduces
    with the gather path."""
    members = _members(metric)
    if members is not None:
        return any(shardable(m) for m in members[0].values())
    return any(p.applies(metric) for p in _PATHS)


def finalize(metric, state, group, reduce):
    ctx = comm.context(group)
    member_reduce = lambda m, s: reduce(m, s, group=group, purpose="finalize")  # noqa: E731
    members = _members(metric)
    if members is not None:
        return _collection(ctx, *members, state, member_reduce)
    for path in _PATHS:
        if path.applies(metric):
            return path.finalize(ctx, metric, state, member_reduce)
    return metric.finalize(member_reduce(metric, state))


def _collection(ctx, metrics: Mapping, prefix: str, postfix: str, state, reduce) -> dict:
    """As `fmetrics.collection`'s finalize, each member sharded where it can be: members with equal state keys
    share the state slot (the collection's grouping), and a retrieval slot is routed once."""
    slots: dict = {}
    out, shards, reduced = {}, {}, {}
    for name, m in metrics.items():
        key = m.state_key
        i = slots.setdefault(key, len(slots)) if key is not None else slots.setdefault(("unshared", name), len(slots))
        if retrieval.applies(m):
            if i not in shards:
                shards[i] = retrieval.prepare(ctx, m, state[i], reduce)
            value = retrieval.value(ctx, m, shards[i])
        else:
            path = next((p for p in _PATHS if p.applies(m)), None)
            if path is not None:
                value = path.finalize(ctx, m, state[i], reduce)
            else:
                if i not in reduced:
                    reduced[i] = reduce(m, state[i])
                value = m.finalize(reduced[i])
        if isinstance(value, Mapping):
            out.update({f"{prefix}{name}_{k}{postfix}": v for k, v in value.items()})
        else:
            out[f"{prefix}{name}{postfix}"] = value
    return out
