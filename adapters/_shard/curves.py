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

import numpy as np
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
    (dtype,) = comm.promoted(ctx, [state.scores[0].dtype if state.scores else None])
    if dtype is None:
        return metric.finalize(base)
    chunks = list(zip(state.scores, state.labels))
    if [s.shape[0] for s, _ in chunks] != [c.shape[0] for _, c in chunks]:  # (not one chunk per update)
        chunks = [(cat_chunks(state.scores, None), cat_chunks(state.labels, None))]

    def kept():  # per chunk, as one process decodes the joined chunks
        for scores, codes in chunks:
            scores, labels = spec._binary_kept(scores.to(dtype), codes)
            yield scores.to(ctx.comm), labels.to(ctx.comm)

    like = torch.empty(0, dtype=dtype, device=ctx.comm)
    picked = [_weighed(*spec._binary_kept(s.to(dtype), c), ctx.comm) for s, c in sort.sample(chunks, ctx.rank)]
    cut = sort.cuts(ctx, picked, like, sampled=True)
    points = torch.zeros((cut.shape[0], 2), dtype=torch.int64, device=ctx.comm)  # (negatives, positives) at cuts

    def blocks(sending):  # channel 0: negatives, 1: positives; rows at a cut are counted on the counting pass
        for scores, labels in kept():
            a, at = sort.place(scores, cut)
            if not sending:
                points.view(-1).index_add_(0, a[at] * 2 + labels[at], torch.ones_like(a[at], dtype=torch.int64))
            yield [scores], torch.where(at, -1, a * 2 + labels)

    (neg,), (pos,) = comm.deliver(ctx, blocks, [like], channels=2)
    neg, pos = sort.sorted_in_place(neg), sort.sorted_in_place(pos)
    mine = torch.tensor([neg.shape[0], pos.shape[0]], dtype=torch.int64, device=ctx.comm)
    every = [torch.empty_like(mine) for _ in range(ctx.world)]
    dist.all_gather(every, mine, group=ctx.group)
    flags = torch.cat([points.view(-1), (_soft(neg) + _soft(pos)).view(1)])
    dist.all_reduce(flags, group=ctx.group)
    points = flags[:-1].view(-1, 2)
    hard = not (bool(flags[-1] > 0) or bool(((points.sum(1) > 0) & (cut != 0) & (cut != 1)).any()))
    ranges = torch.stack(every)
    under, under_cut = sort.below(ranges, points)
    n_neg, n_pos = (int(v) for v in ranges.sum(0) + points.sum(0))
    auroc = metric.name == "binary_auroc"
    sums = _range_sums(neg, pos, under[ctx.rank], n_neg, n_pos, auroc)
    dist.all_reduce(sums, group=ctx.group)
    if n_pos + n_neg == 0:  # every row dropped (ignore_index, invalid labels): as one process
        return metric.finalize(base)
    value = metric.finalize(_stand_in(metric, base, n_pos > 0, n_neg > 0, hard, device))
    if n_pos == 0 or n_neg == 0:
        return value
    p_cut, n_cut = points[:, 1].double(), points[:, 0].double()  # rows tied at a cut: the same on every rank
    nb, pb = under_cut[:, 0].double(), under_cut[:, 1].double()
    area = sums[0] + (p_cut * (nb + n_cut / 2)).sum()
    tp, fp = n_pos - pb, n_neg - nb
    ap = sums[1] + (p_cut * tp / (tp + fp).clamp_min(1)).sum()
    out = area / (n_pos * n_neg) if auroc else ap / n_pos
    return out.to(device=value.device, dtype=value.dtype)


POSITIVE_WEIGHT = 2  # a positive's share of a range's work (sorted, then searched), in negatives


def _weighed(scores: torch.Tensor, labels: torch.Tensor, device) -> torch.Tensor:
    """The sampled kept ``scores`` with each positive `POSITIVE_WEIGHT` times: the cuts split the work, not the
    rows (positives crowd the upper ranges, and each costs a search there)."""
    return torch.cat([scores] + [scores[labels.bool()]] * (POSITIVE_WEIGHT - 1)).to(device)


STEP = 1 << 16  # positives per step of the per-range sums


def _range_sums(neg: torch.Tensor, pos: torch.Tensor, under: torch.Tensor, n_neg: int, n_pos: int, auroc: bool):
    """float64 ``(area, AP sum)`` of this rank's range (``auroc``: the area alone, the AP sum 0; else the AP sum
    alone, the area 0) from its sorted negative and positive scores, in steps of
    `STEP` positives: a positive's negatives below are ``under + #neg < p + #neg == p / 2``,
    ``TP_>=p = P - (positives below p)``, ``FP_>=p = N - (negatives below p)``. One search a positive
    (``#neg < p``); ``#neg == p`` is searched only where ``neg`` holds ``p``, and the positives below ``p`` are the
    start of its run of equal positives (a scan; one search a step for the run it opens with)."""
    nb0, pb0 = int(under[0]), int(under[1])
    if _bits_ascend(neg) and _bits_ascend(pos):  # searched as int32: about a third faster than float32
        neg, pos = neg.view(torch.int32), pos.view(torch.int32)
    search = _numpy_search if pos.device.type == "cpu" and pos.dtype != torch.bfloat16 else torch.searchsorted
    half = torch.zeros((), dtype=torch.int64, device=pos.device)
    ap = torch.zeros((), dtype=torch.float64, device=pos.device)
    for lo in range(0, pos.shape[0], STEP):
        p = pos[lo: lo + STEP]
        left = search(neg, p)
        if auroc:
            ties = torch.zeros_like(left)
            if neg.shape[0]:
                tied = (neg[left.clamp(max=neg.shape[0] - 1)] == p) & (left < neg.shape[0])
                ties[tied] = search(neg, p[tied], right=True) - left[tied]
            half += 2 * left.sum() + ties.sum()
            continue
        new = torch.ones(p.shape, dtype=torch.bool, device=p.device)
        torch.ne(p[1:], p[:-1], out=new[1:])
        start = torch.cummax(torch.where(new, torch.arange(p.shape[0], device=p.device), 0), 0).values
        below = torch.where(start == 0, search(pos, p[:1]), start + lo)
        tp = (n_pos - pb0 - below).double()
        ap += (tp / (tp + (n_neg - nb0 - left).double())).sum()
    area = pos.shape[0] * float(nb0) + half.double() / 2 if auroc else torch.zeros_like(ap)
    return torch.stack([area, ap])


def _bits_ascend(x: torch.Tensor) -> bool:
    """Whether the sorted float32 CPU scores ``x`` order and tie as their int32 bits do: no NaN, none below 0, and
    -0.0 made 0.0 (in place)."""
    if x.dtype != torch.float32 or x.device.type != "cpu" or not x.is_contiguous():
        return False
    if x.shape[0] and not (bool(x[0] >= 0) and bool(x[-1] == x[-1])):
        return False
    x.add_(0.0)
    return True


def _soft(x: torch.Tensor) -> torch.Tensor:
    """The number of sorted scores ``x`` other than 0 and 1 (two searches)."""
    edges = torch.tensor([0, 1], dtype=x.dtype, device=x.device)
    return x.shape[0] - (torch.searchsorted(x, edges, right=True) - torch.searchsorted(x, edges)).sum()


def _numpy_search(sorted_: torch.Tensor, v: torch.Tensor, right: bool = False) -> torch.Tensor:
    """``torch.searchsorted`` by numpy (its binary search reuses the last position for sorted needles)."""
    return torch.from_numpy(np.searchsorted(sorted_.numpy(), v.numpy(), "right" if right else "left"))


def _stand_in(metric, base, has_pos: bool, has_neg: bool, hard: bool, device):
    """A state of one positive and / or one negative row with the reduced value records: the metric's own
    finalize of it raises, warns and degenerates as it does on the global data."""
    preds = ([1.0 if hard else 0.75] if has_pos else []) + ([0.0 if hard else 0.25] if has_neg else [])
    target = ([1] if has_pos else []) + ([0] if has_neg else [])
    rows = metric.update(metric.init(device), torch.tensor(preds, device=device), torch.tensor(target, device=device))
    return rows._replace(invalid=base.invalid)
