"""Sharded finalize of exact binary AUROC and average precision: a distributed sample sort of the scores.

1. Each rank sorts its kept (score, label) pairs and folds equal scores into distinct keys with their
   positive and negative counts ``(u, P, N)``: a tie never spans two rows, so however many rows share a
   score, it costs one key.
2. `sort.sample_sort`: splitters from a sample, one route of the keys into score ranges (equal scores of
   every rank meet on one rank, so ties never straddle a boundary), equal keys merged.
3. The exclusive prefix of the ranks' ``(P, N)`` totals gives every key the counts below its range, hence
   its global position on the ROC / PR curve:

   * AUROC (Mann-Whitney, ties counted 1/2): ``sum_u P_u (N_{<u} + N_u / 2) / (P N)``;
   * AP (scikit-learn's step sum): ``sum_u (P_u / P) * TP_{>=u} / (TP_{>=u} + FP_{>=u})``.

   The per-range sums are ``all_reduce``-d.

Configurations, warnings and errors come from the metric itself: the value records (NaN scores, invalid
labels) are reduced by `adapters.distributed.reduce` on the state without its rows, and the metric
finalizes a two-row state with the global classes present (and the global "every score is 0 or 1" fact),
so it raises, warns and gives the degenerate values (no positives / no negatives / no rows) as one process.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from adapters._shard import comm, sort
from fmetrics.classification.curves._scores import family
from fmetrics.state import cat_chunks

NAMES = frozenset({"binary_auroc", "binary_average_precision"})


def applies(metric) -> bool:
    r = metric.recipe
    if r is None or not r.module.startswith("fmetrics.classification") or r.qualname not in NAMES:
        return False
    args = r.arguments
    return args.get("thresholds") is None and args.get("max_fpr") is None


def finalize(ctx: comm.Ctx, metric, state, reduce):
    args = metric.recipe.arguments
    spec = family(metric.name, "binary", 1, None, args["ignore_index"], args["validate_args"])
    base = reduce(metric, state._replace(scores=(), labels=()))
    device = base.invalid.count.device
    scores = cat_chunks(state.scores, torch.empty(0, device=device))
    codes = cat_chunks(state.labels, torch.empty(0, dtype=torch.int8, device=device))
    (dtype,) = comm.promoted(ctx, [scores.dtype if state.scores else None])
    if dtype is None:
        return metric.finalize(base)
    scores, labels = spec._binary_kept(scores.to(dtype), codes)  # as one process decodes the joined chunks
    keys, counts = sort.distinct_labels(scores.to(ctx.comm), labels.to(ctx.comm))
    r = sort.sample_sort(ctx, keys, counts)  # keys travel in the scores' dtype
    keys, pos, neg = r.keys.double(), r.counts[:, 0], r.counts[:, 1]
    n_pos, n_neg = (int(v) for v in r.total)
    pos_below = r.below[0] + torch.cumsum(pos, 0) - pos
    neg_below = r.below[1] + torch.cumsum(neg, 0) - neg
    pos_f, neg_f = pos.double(), neg.double()
    area = (pos_f * (neg_below.double() + neg_f / 2)).sum()
    tp, fp = (n_pos - pos_below).double(), (n_neg - neg_below).double()
    ap = (pos_f * tp / (tp + fp).clamp_min(1)).sum()
    soft = ((keys != 0) & (keys != 1)).any().double()
    sums = torch.stack([area, ap, soft])
    dist.all_reduce(sums, group=ctx.group)
    hard = not bool(sums[2] > 0)
    if n_pos + n_neg == 0:  # every row dropped (ignore_index, invalid labels): as one process
        return metric.finalize(base)
    value = metric.finalize(_stand_in(metric, base, n_pos > 0, n_neg > 0, hard, device))
    if n_pos == 0 or n_neg == 0:
        return value
    out = sums[0] / (n_pos * n_neg) if metric.name == "binary_auroc" else sums[1] / n_pos
    return out.to(device=value.device, dtype=value.dtype)


def _stand_in(metric, base, has_pos: bool, has_neg: bool, hard: bool, device):
    """A state of one positive and / or one negative row with the reduced value records: the metric's own
    finalize of it raises, warns and degenerates as it does on the global data."""
    preds = ([1.0 if hard else 0.75] if has_pos else []) + ([0.0 if hard else 0.25] if has_neg else [])
    target = ([1] if has_pos else []) + ([0] if has_neg else [])
    rows = metric.update(metric.init(device), torch.tensor(preds, device=device), torch.tensor(target, device=device))
    return rows._replace(invalid=base.invalid)
