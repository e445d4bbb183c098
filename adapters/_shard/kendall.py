"""Sharded finalize of `kendall_rank_corrcoef`: discordant pairs counted across two range partitions.

Per column pair ``(x, y)`` (float64, as one process):

1. Rows are routed by x range (splitters from a sample of distinct x, `sort.splitters`; equal x meet on one
   rank, so rank ``b`` holds x range ``b``). Locally, sorted by ``(x, y)``: the x ties, the joint ties and the
   discordant pairs inside the range (inversions of y).
2. Pairs across x ranges ``a < b`` have ``x_a < x_b``: they are discordant when ``y_a > y_b``. Rows travel
   again, as ``(y, b)``, by y range: on each y range, sorted by y descending (ties by ``b`` descending), the
   inversions of ``-b`` count the pairs of the range with ``y_i > y_j`` and ``b_i < b_j``; the pairs with the
   higher y ranges come from their per-``b`` histograms (one ``all_gather`` of ``world x world`` counts).
   The y ties are counted there.
3. One ``all_reduce`` of the counts; tau (a, b, c) and the asymptotic p-value from them (SciPy's formulas,
   as `fmetrics.regression.kendall`).

Rows of one x (or y) value all meet on one rank (exact ties; a value shared by most rows concentrates them).
A state with NaN / inf or fewer than 2 rows takes the gather path; warnings come from a stand-in state.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from adapters._shard import comm, sort
from adapters._shard.spearman import columns, stand_in
from fmetrics.regression._pairs import runs
from fmetrics.regression.kendall import _inversions, _ties


def applies(metric) -> bool:
    r = metric.recipe
    return r is not None and r.module.startswith("fmetrics.regression") and r.qualname == "kendall_rank_corrcoef"


def finalize(ctx: comm.Ctx, metric, state, reduce):
    args = metric.recipe.arguments
    test = args["alternative"] if args["t_test"] else None
    joined = columns(ctx, metric, state, reduce)
    if not isinstance(joined, tuple):
        return joined  # the gather path's value
    x, y, n, device = joined
    out = [_column(ctx, x[:, j].double(), y[:, j].double(), n, args["variant"], test) for j in range(x.shape[1])]
    constant = torch.tensor([c for _, _, c in out])
    value = metric.finalize(stand_in(metric, constant, constant, x.shape[1], device))
    like = value[0] if isinstance(value, tuple) else value
    tau = torch.stack([t for t, _, _ in out]).to(device=like.device, dtype=like.dtype)
    tau = tau[0] if args["num_outputs"] == 1 else tau
    if test is None:
        return tau
    p = torch.stack([q for _, q, _ in out]).to(device=like.device, dtype=like.dtype)
    return tau, (p[0] if args["num_outputs"] == 1 else p)


def _column(ctx: comm.Ctx, x: torch.Tensor, y: torch.Tensor, n: int, variant: str, test):
    counts, moments = _counts(ctx, x, y)
    pairs_x, pairs_y, n_xy, dis, distinct_x, distinct_y = (int(v) for v in counts)
    p1x, p2x, p1y, p2y = (float(v) for v in moments)
    nan = torch.tensor(math.nan, dtype=torch.float64)
    if distinct_x < 2 or distinct_y < 2:
        return nan, nan, True
    total = n * (n - 1) // 2
    con = total - pairs_x - pairs_y + n_xy - dis
    s = torch.tensor(float(con - dis), dtype=torch.float64)  # tensors: 0 / 0 is NaN, as one process
    if variant == "a":
        tau = s / float(con + dis)
    elif variant == "b":
        tau = s / math.sqrt(float(total - pairs_x) * float(total - pairs_y))
    else:
        m = min(distinct_x, distinct_y)
        tau = 2 * s / (n * n * (m - 1) / m)
    tau = torch.clamp(tau, -1, 1)
    if test is None:
        return tau, nan, False
    v0 = n * (n - 1) * (2 * n + 5)
    if variant == "a":
        z = 3 * s / math.sqrt(v0 / 2)
    else:
        mm = n * (n - 1)
        var = (v0 - p2x - p2y) / 18 + 2 * float(pairs_x) * float(pairs_y) / mm
        var = var + p1x * p1y / (9 * mm * (n - 2)) if n > 2 else var
        z = s / torch.sqrt(torch.tensor(var, dtype=torch.float64))
    p = {"two-sided": lambda: 2 * torch.special.ndtr(-z.abs()), "greater": lambda: torch.special.ndtr(-z),
         "less": lambda: torch.special.ndtr(z)}[test]()
    return tau, p, False


def _counts(ctx: comm.Ctx, x: torch.Tensor, y: torch.Tensor):
    """Every rank's int64 ``(x tie pairs, y tie pairs, joint tie pairs, discordant pairs, distinct x, distinct y)``
    and float64 ``(p1x, p2x, p1y, p2y)`` (the tie sums of the variance), summed over the ranks."""
    x, y = comm.route(ctx, [x, y], torch.searchsorted(sort.splitters(ctx, torch.unique(x.to(ctx.comm))), x))
    o = torch.sort(y, stable=True).indices
    o = o[torch.sort(x[o], stable=True).indices]  # lexicographic (x, y)
    xs, ys = x[o], y[o]
    tx = _ties(xs)
    joint = runs(xs[:, None])[:, 0] | runs(ys[:, None])[:, 0]
    t_xy = torch.diff(torch.nonzero(joint)[:, 0], append=torch.tensor([xs.shape[0]], device=xs.device))
    n_xy = (t_xy * (t_xy - 1) // 2).sum()
    within = _inversions(ys)
    label = torch.full(y.shape, ctx.rank, dtype=torch.int64, device=y.device)
    y, label = comm.route(ctx, [y, label], torch.searchsorted(sort.splitters(ctx, torch.unique(y)), y))
    ty = _ties(torch.sort(y).values)
    hist = torch.bincount(label, minlength=ctx.world)
    every = [torch.empty_like(hist) for _ in range(ctx.world)]
    dist.all_gather(every, hist, group=ctx.group)
    above = torch.stack(every)[ctx.rank + 1:].sum(0)  # rows of higher y ranges, per x range
    cross_above = (torch.cumsum(above, 0) - above)[label].sum()  # ... of a lower x range than the row's
    o = torch.sort(label, descending=True, stable=True).indices
    o = o[torch.sort(y[o], descending=True, stable=True).indices]  # y descending, ties by x range descending
    cross_within = _inversions((-label[o]).double())
    counts = torch.stack([tx.pairs, ty.pairs, n_xy, within + cross_above + cross_within,
                          torch.tensor(tx.distinct), torch.tensor(ty.distinct)]).to(ctx.comm, torch.int64)
    moments = torch.tensor([float(tx.p1), float(tx.p2), float(ty.p1), float(ty.p2)], dtype=torch.float64,
                           device=ctx.comm)
    dist.all_reduce(counts, group=ctx.group)
    dist.all_reduce(moments, group=ctx.group)
    return counts, moments
