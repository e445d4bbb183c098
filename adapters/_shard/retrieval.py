"""Sharded finalize of the retrieval members: rows routed to the rank owning their query.

Every row goes to the rank owning its query (`owner`, a hash of the id; `comm.deliver`: the counts, then the
payload in rounds), so each query is whole on one rank, its rows in the one-process order (rank order, then update
order). Each rank runs the metric with ``aggregation="none"`` on its queries; then

* ``mean``: one ``all_reduce`` of (sum of kept per-query values, kept queries, queries);
* ``min`` / ``max``: one ``all_reduce`` of the local extreme (plus the counts);
* ``median``, ``none``, a callable: the per-query values and ids (O(queries), not O(rows)) are
  gathered and put in query-id order, then aggregated as one process does.

The value records (invalid query ids, NaN scores, ...) are reduced with `adapters.distributed.reduce` on the
state without its rows, so every rank reports a deferred error alike.
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple, Optional

import torch
import torch.distributed as dist

from adapters._shard import comm
from fmetrics.retrieval import _base
from fmetrics.state import cat_chunks

# the factories built with `_base.member` (per-query values + aggregation)
MEMBERS = frozenset({"retrieval_auroc", "retrieval_map", "retrieval_average_precision", "retrieval_fall_out",
                     "retrieval_hit_rate", "retrieval_normalized_dcg", "retrieval_precision",
                     "retrieval_r_precision", "retrieval_recall", "retrieval_mrr", "retrieval_reciprocal_rank"})
_MIX = -7046029254386353131  # 0x9E3779B97F4A7C15 as int64 (Fibonacci hashing)


def applies(metric) -> bool:
    r = metric.recipe
    return r is not None and r.module.startswith("fmetrics.retrieval") and r.qualname in MEMBERS


def owner(query: torch.Tensor, world: int, groups: int = 1) -> torch.Tensor:
    """The rank that owns each query id, or with ``groups`` ``rank * groups + group``: the top 31 bits ``h`` of a
    multiplicative hash (consecutive ids spread over the ranks) scaled to ``h * world * groups >> 31`` (no
    division)."""
    return (((query * _MIX) >> 33) & 0x7FFFFFFF) * (world * groups) >> 31


class Shard(NamedTuple):
    """This rank's queries, whole, in groups: a state of each group's rows (with every rank's value records), or
    ``None`` when no rank has rows (then ``base``, the rowless state, gives the one-process empty value)."""

    base: object
    states: Optional[tuple]


GROUP_ROWS = 1 << 19  # about this many rows per rank and finalize group: the metric's own finalize needs
# ~70 bytes a row (NDCG), so a rank finalizes its queries group by group (`value`) to stay near its state's size


def prepare(ctx: comm.Ctx, metric, state, reduce) -> Shard:
    """Routes the rows to the ranks owning their queries (once for every retrieval member sharing ``state``):
    from the state's chunks, in rounds (`comm.deliver`); relevance and query ids are received in the narrowest
    integer dtypes holding every rank's values (int8 / int32: the ranking packs them into int64 keys)."""
    base = reduce(metric, state._replace(preds=(), target=(), indexes=()))
    device = base.bad_index.count.device
    dtypes = comm.promoted(ctx, [state.preds[0].dtype if state.preds else None,
                                 state.target[0].dtype if state.target else None])
    if dtypes[0] is None:
        return Shard(base, None)
    fields = (state.preds, state.target, state.indexes)
    chunks = list(zip(*fields))
    if len({len(f) for f in fields}) > 1 or any(len({c.shape[0] for c in rows}) > 1 for rows in chunks):
        chunks = [tuple(cat_chunks(f, None) for f in fields)]  # (not one chunk per update)
    like = [torch.empty(0, dtype=d, device=ctx.comm) for d in (*dtypes, torch.int64)]
    rows = torch.tensor([sum(c.shape[0] for c in state.preds)], device=ctx.comm)
    dist.all_reduce(rows, op=dist.ReduceOp.MAX, group=ctx.group)
    groups = min(-(-int(rows) // GROUP_ROWS), 64)

    def blocks(sending):
        for p, t, q in chunks:
            q = q.to(ctx.comm)
            yield [p.to(ctx.comm, dtypes[0]), t.to(ctx.comm, dtypes[1]), q], owner(q, ctx.world, groups)

    received = comm.deliver(ctx, blocks, like, channels=groups, narrow=True)
    return Shard(base, tuple(base._replace(**{f: (x.to(device),) for f, x in zip(("preds", "target", "indexes"), g)})
                             for g in received))


def finalize(ctx: comm.Ctx, metric, state, reduce):
    return value(ctx, metric, prepare(ctx, metric, state, reduce))


def value(ctx: comm.Ctx, metric, shard: Shard):
    """The member's value over every rank's queries from this rank's `Shard`."""
    args = metric.recipe.arguments
    ignore_index, action, aggregation = args["ignore_index"], args["empty_target_action"], args["aggregation"]
    if shard.states is None:  # no rank has rows: the one-process value of an empty state (NaN, a warning)
        return metric.finalize(shard.base)
    base, first = shard.base, shard.states[0]
    device = first.preds[0].device
    per_query = metric.recipe.call(aggregation="none")

    reduced = aggregation in ("mean", "min", "max")  # (no query ids needed: one all_reduce)

    def local_values():
        values, ids, caught = [], [], {}
        for st in [s for s in shard.states if s.preds[0].shape[0]] or [first]:
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                values.append(per_query.finalize(st))
            (query,), (target,) = st.indexes, st.target
            if not reduced:
                ids.append(torch.unique(query if ignore_index is None else query[target != ignore_index]))
                if ids[-1].shape[0] != values[-1].shape[0]:
                    raise RuntimeError(f"adapters.distributed.finalize({metric.name}): {values[-1].shape[0]} "
                                       f"per-query values for {ids[-1].shape[0]} queries (internal error)")
            caught.update({str(w.message): w for w in got if "no samples were seen" not in str(w.message)})
        return torch.cat(values), torch.cat(ids) if ids else None, list(caught.values())

    values, ids, caught = comm.agree(ctx, local_values)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    flat = values.reshape(values.shape[0], math.prod(values.shape[1:]))  # (a rank may own no query)
    skip = action == "skip" and flat.shape[1]
    skipped = flat.isnan().all(1) if skip else torch.zeros(flat.shape[:1], dtype=torch.bool, device=flat.device)
    if reduced:
        out = _reduced(ctx, flat, skipped, aggregation)
        return _empty(metric, base, first) if out is None else out.reshape(values.shape[1:]).to(device)
    every = comm.gather_rows(ctx, values)
    order = torch.argsort(comm.gather_rows(ctx, ids))
    every, every_skipped = every[order], comm.gather_rows(ctx, skipped)[order]
    if every.shape[0] == 0:
        return _empty(metric, base, first)
    return _base.aggregate(metric.name, every.to(device), every_skipped.to(device), aggregation)


def _empty(metric, base, first):
    """The one-process value of a state without rows (no rank has a query)."""
    fields = ("preds", "target", "indexes")
    return metric.finalize(base._replace(**{f: (getattr(first, f)[0][:0],) for f in fields}))


def _reduced(ctx: comm.Ctx, flat: torch.Tensor, skipped: torch.Tensor, aggregation: str):
    """Mean / min / max over every rank's kept per-query values by ``all_reduce``; ``None`` when no rank has a
    query (the caller then gives the one-process empty value)."""
    kept = flat[~skipped].to(ctx.comm, torch.float64)
    counts = torch.tensor([kept.shape[0], flat.shape[0]], dtype=torch.float64, device=ctx.comm)
    if aggregation == "mean":
        buf = torch.cat([kept.sum(0), counts])
        dist.all_reduce(buf, group=ctx.group)
        total, n_kept, n = buf[:-2], buf[-2], buf[-1]
        if int(n) == 0:
            return None
        return total / n_kept if int(n_kept) else torch.zeros_like(total)
    fill = torch.inf if aggregation == "min" else -torch.inf
    ext = getattr(torch, aggregation)(kept, 0).values if kept.shape[0] else torch.full(flat.shape[1:], fill,
                                                                                      dtype=torch.float64,
                                                                                      device=ctx.comm)
    dist.all_reduce(counts, group=ctx.group)
    dist.all_reduce(ext, op=dist.ReduceOp.MIN if aggregation == "min" else dist.ReduceOp.MAX, group=ctx.group)
    if int(counts[1]) == 0:
        return None
    return ext if int(counts[0]) else torch.zeros_like(ext)
