"""Sharded finalize of `spearman_corrcoef`: global average ranks by a distributed sample sort.

Per column of preds and of target: each rank folds its values into distinct keys with counts, `sort.sample_sort`
puts every key on the rank owning its range (ties never straddle ranges), where a key's average rank is
``below + (count + 1) / 2`` with ``below`` the rows of smaller keys (the exclusive prefix over the ranks plus
the local cumulative count); the ranks go back to the ranks holding the rows (`sort.answer`). Each rank then
sums ``(rx - m)(ry - m)``, ``(rx - m)^2``, ``(ry - m)^2`` over its rows (``m = (n + 1) / 2``), one
``all_reduce`` gives Pearson's r of the ranks. Memory per rank: its rows plus its distinct keys.

A state holding a NaN / inf anywhere takes the gather path (``nan_strategy`` decides, as one process).
Warnings (a constant column, fewer than 2 rows) come from the metric on a small stand-in state.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from adapters._shard import comm, sort
from fmetrics.state import cat_chunks


def applies(metric) -> bool:
    r = metric.recipe
    return r is not None and r.module.startswith("fmetrics.regression") and r.qualname == "spearman_corrcoef"


def finalize(ctx: comm.Ctx, metric, state, reduce):
    joined = columns(ctx, metric, state, reduce)
    if not isinstance(joined, tuple):
        return joined  # the gather path's value
    x, y, n, device = joined
    mid = (n + 1) / 2
    sums = []
    for j in range(x.shape[1]):
        cx, cy = average_ranks(ctx, x[:, j]) - mid, average_ranks(ctx, y[:, j]) - mid
        sums.append(torch.stack([(cx * cy).sum(), (cx * cx).sum(), (cy * cy).sum()]))
    sums = torch.stack(sums)
    dist.all_reduce(sums, group=ctx.group)
    cov, m2x, m2y = sums.unbind(1)
    value = metric.finalize(stand_in(metric, m2x == 0, m2y == 0, x.shape[1], device))
    rho = torch.clamp(cov / (torch.sqrt(m2x) * torch.sqrt(m2y)), -1, 1)
    rho = torch.where((m2x == 0) | (m2y == 0), torch.nan, rho)
    rho = rho.to(device=value.device, dtype=value.dtype)
    return rho[0] if x.shape[1] == 1 else rho


def columns(ctx: comm.Ctx, metric, state, reduce):
    """``(x, y, n, device)``: this rank's ``(N, D)`` columns on the comm device in every rank's promoted dtypes
    and the global row count; or the gather path's value, for a state with NaN / inf or fewer than 2 rows."""
    width = metric.recipe.arguments["num_outputs"]
    reduce(metric, state._replace(preds=(), target=()))  # every rank checks the metric and the layout
    device = next((c.device for c in state.preds), torch.device("cpu"))
    x = cat_chunks(state.preds, torch.empty(0, width))
    y = cat_chunks(state.target, torch.empty(0, width))
    dx, dy = comm.promoted(ctx, [x.dtype if state.preds else None, y.dtype if state.target else None])
    flags = torch.tensor([x.shape[0], int((~(torch.isfinite(x) & torch.isfinite(y))).sum())], device=ctx.comm)
    dist.all_reduce(flags, group=ctx.group)
    n, nonfinite = int(flags[0]), int(flags[1])
    if nonfinite or n < 2:  # nan_strategy / at most one row: as one process, on the gathered rows
        return metric.finalize(reduce(metric, state))
    return x.to(ctx.comm, dx), y.to(ctx.comm, dy), n, device


def average_ranks(ctx: comm.Ctx, v: torch.Tensor) -> torch.Tensor:
    """float64 global ranks ``1..n`` of this rank's values ``v`` among every rank's, ties at their average."""
    keys, counts, inverse = sort.distinct(v, torch.ones((v.shape[0], 1), dtype=torch.int64, device=v.device))
    r = sort.sample_sort(ctx, keys, counts)
    c = r.counts[:, 0]
    avg = (r.below[0] + torch.cumsum(c, 0) - c).double() + (c.double() + 1) / 2
    return sort.answer(ctx, r, avg)[inverse]


def stand_in(metric, const_x: torch.Tensor, const_y: torch.Tensor, width: int, device):
    """Two rows, a column constant where the global column is: the metric's finalize of it warns as the global
    data's would."""
    xs = torch.stack([torch.zeros(width), torch.where(const_x.cpu(), 0.0, 1.0)])
    ys = torch.stack([torch.zeros(width), torch.where(const_y.cpu(), 0.0, 1.0)])
    if width == 1:
        xs, ys = xs[:, 0], ys[:, 0]
    return metric.update(metric.init(device), xs.to(device), ys.to(device))
