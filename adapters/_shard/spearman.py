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

import mmap
from typing import Optional

import numpy as np
import torch
import torch.distributed as dist

from adapters._shard import comm, sort
from fmetrics.state import cat_chunks


def applies(metric) -> bool:
    r = metric.recipe
    return r is not None and r.module.startswith("fmetrics.regression") and r.qualname == "spearman_corrcoef"


def finalize(ctx: comm.Ctx, metric, state, reduce):
    joined = chunked(ctx, metric, state, reduce)
    if not isinstance(joined, tuple):
        return joined  # the gather path's value
    xs, ys, n, device, dtypes = joined
    width = metric.recipe.arguments["num_outputs"]
    packed = dtypes == (torch.float32, torch.float32) and ctx.comm.type == "cpu" and n < 2**31 - 1
    if packed:
        sums = [_packed_sums(ctx, [c[:, j] for c in xs], [c[:, j] for c in ys], n) for j in range(width)]
    else:
        x, y = _joined(xs, width), _joined(ys, width)
        sums = [_sums(ctx, x[:, j], y[:, j], n) for j in range(width)]
    sums = torch.stack(sums)
    dist.all_reduce(sums, group=ctx.group)
    cov, m2x, m2y = sums.unbind(1)
    value = metric.finalize(stand_in(metric, m2x == 0, m2y == 0, width, device))
    rho = torch.clamp(cov / (torch.sqrt(m2x) * torch.sqrt(m2y)), -1, 1)
    rho = torch.where((m2x == 0) | (m2y == 0), torch.nan, rho)
    rho = rho.to(device=value.device, dtype=value.dtype)
    return rho[0] if width == 1 else rho


def _sums(ctx: comm.Ctx, x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
    """This rank's ``(sum (rx - m)(ry - m), sum (rx - m)^2, sum (ry - m)^2)``, ranks sent back to their rows."""
    mid = (n + 1) / 2
    cx, cy = average_ranks(ctx, x) - mid, average_ranks(ctx, y) - mid
    return torch.stack([(cx * cy).sum(), (cx * cx).sum(), (cy * cy).sum()])


def chunked(ctx: comm.Ctx, metric, state, reduce):
    """``(xs, ys, n, device, dtypes)``: this rank's ``(rows, D)`` chunks of preds and target on the comm device in
    every rank's promoted ``dtypes`` and the global row count; or the gather path's value, for a state with NaN / inf or
    fewer than 2 rows."""
    reduce(metric, state._replace(preds=(), target=()))  # every rank checks the metric and the layout
    device = next((c.device for c in state.preds), torch.device("cpu"))
    xs, ys = list(state.preds), list(state.target)
    if [c.shape[0] for c in xs] != [c.shape[0] for c in ys]:  # (not one chunk per update)
        xs, ys = [torch.cat(xs)], [torch.cat(ys)]
    dx, dy = comm.promoted(ctx, [xs[0].dtype if xs else None, ys[0].dtype if ys else None])
    bad = sum(int((~(torch.isfinite(x) & torch.isfinite(y))).sum()) for x, y in zip(xs, ys))
    flags = torch.tensor([sum(c.shape[0] for c in xs), bad], device=ctx.comm)
    dist.all_reduce(flags, group=ctx.group)
    n, nonfinite = int(flags[0]), int(flags[1])
    if nonfinite or n < 2:  # nan_strategy / at most one row: as one process, on the gathered rows
        return metric.finalize(reduce(metric, state))
    return [c.to(ctx.comm, dx) for c in xs], [c.to(ctx.comm, dy) for c in ys], n, device, (dx, dy)


def columns(ctx: comm.Ctx, metric, state, reduce):
    """`chunked`, each side joined into one ``(N, D)`` tensor."""
    joined = chunked(ctx, metric, state, reduce)
    if not isinstance(joined, tuple):
        return joined
    width = metric.recipe.arguments["num_outputs"]
    xs, ys, n, device, _ = joined
    return _joined(xs, width), _joined(ys, width), n, device


def _joined(chunks: list[torch.Tensor], width: int) -> torch.Tensor:
    return cat_chunks(chunks, torch.empty(0, width))


STEP = 1 << 14  # rows per step of the packed stages: their ~10 int64 temporaries (128 KiB each) stay in cache
_LOW = 0xFFFFFFFF
SHARE = 64  # routing rounds of 1/64 of the rows, at least (`comm.deliver`): a rank already holds two row buffers


def _packed_sums(ctx: comm.Ctx, xs: list[torch.Tensor], ys: list[torch.Tensor], n: int) -> torch.Tensor:
    """`_sums` of float32 columns in two routes of packed int64 rows, each rank holding about its own rows:

    1. cuts of x and of y (`sort.cuts`) and one ``all_reduce`` of the rows per range and per cut value give
       the rows below every range and cut; a row tied at a cut has its rank at once (``below + (count + 1) / 2``).
    2. rows ``(x bits << 32) | y bits`` go to their x range and are sorted in place there: a row's doubled rank
       ``2 rx = 2 below + first + last + 1`` comes from its run of equal x (two ``searchsorted``).
    3. rows ``(y bits << 32) | 2 rx`` go to their y range (rows at an x cut from their rank, the others from
       the x range, whose buffer gives its pages back as it is sent), sorted there: ``2 ry`` likewise.

    Sums are of the doubled centred ranks ``2r - (n + 1)`` (the coefficient's ratio is unchanged)."""
    like, n1 = torch.empty(0, dtype=torch.float32), n + 1
    cut_x, cut_y = sort.cuts(ctx, xs, like), sort.cuts(ctx, ys, like)
    hist = torch.cat([_histogram(xs, cut_x, ctx.world), _histogram(ys, cut_y, ctx.world)])
    dist.all_reduce(hist, group=ctx.group)
    w, kx = ctx.world, cut_x.shape[0]
    (bx, bx_cut), (by, by_cut) = (sort.below(h[:w, None], h[w:, None])
                                  for h in (hist[: 2 * w - 1][: w + kx], hist[2 * w - 1:][: w + cut_y.shape[0]]))
    at_x = (2 * bx_cut[:, 0] + hist[w: w + kx] + 1).numpy()  # doubled ranks of the rows at each cut
    at_y = (2 * by_cut[:, 0] + hist[2 * w - 1 + w: 2 * w - 1 + w + cut_y.shape[0]] + 1).numpy()
    sums = np.zeros(3)  # (cov, m2x, m2y) of doubled centred ranks

    def stage1(sending):  # the counting pass reads only the destinations
        for x, y in zip(xs, ys):
            a, at = sort.place(x, cut_x)
            keep = ~at
            yield [torch.from_numpy((sort._sortable(x[keep]) << 32) | _bits(y[keep]))] if sending else None, a[keep]

    p1, release = _received(ctx, stage1)
    p1.sort()

    def onward(y: torch.Tensor, r2: Optional[np.ndarray]):
        """``(y bits << 32) | 2 rx`` of rows to their y range; the y-cut rows' terms summed here (``r2`` None:
        the counting pass, the destinations only)."""
        b, at = sort.place(y, cut_y)
        keep = ~at
        if r2 is None:
            return None, b[keep]
        dx = (r2 - n1).astype(np.float64)
        sums[1] += _dot(dx, dx)
        ry = (at_y[b[at].numpy()] - n1).astype(np.float64)
        sums[0] += _dot(dx[at.numpy()], ry)
        sums[2] += _dot(ry, ry)
        return [torch.from_numpy((sort._sortable(y[keep]) << 32) | r2[keep.numpy()])], b[keep]

    def stage2(sending):
        for x, y in zip(xs, ys):
            a, at = sort.place(x, cut_x)
            if bool(at.any()):
                yield onward(y[at], at_x[a[at].numpy()] if sending else None)
        end, tail, r2 = p1.shape[0], None, None
        while end > 0:
            lo = max(end - STEP, 0)
            step = p1[lo:end]
            if sending:
                r2, tail = _doubled_ranks(p1[:end], lo, step, int(bx[ctx.rank, 0]), tail)
            y = torch.from_numpy((step & _LOW).astype(np.uint32).view(np.float32))
            if sending:
                release(lo)  # the sent rows' pages back to the system
            end = lo
            yield onward(y, r2)

    p2, _ = _received(ctx, stage2)
    p2.sort()
    base = int(by[ctx.rank, 0])
    for lo in range(0, p2.shape[0], STEP):
        step = p2[lo: lo + STEP]
        dy = (_doubled_ranks(p2, lo, step, base)[0] - n1).astype(np.float64)
        sums[0] += _dot((step & _LOW) - n1, dy)
        sums[2] += _dot(dy, dy)
    return torch.from_numpy(sums)


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """float64 ``sum a * b`` by numpy's own loop, not BLAS (whose idle threads spin on the cores the ranks share)."""
    return np.einsum("i,i->", a, b, dtype=np.float64, casting="unsafe")


def _histogram(parts: list[torch.Tensor], cut: torch.Tensor, world: int) -> torch.Tensor:
    """Rows per range (``world``) then per cut value (``world - 1``; unused cuts 0) of this rank's values."""
    out = torch.zeros(2 * world - 1, dtype=torch.int64)
    for v in parts:
        a, at = sort.place(v, cut)
        out[:world] += torch.bincount(a[~at], minlength=world)
        out[world:world + cut.shape[0]] += torch.bincount(a[at], minlength=cut.shape[0])
    return out


def _bits(y: torch.Tensor) -> np.ndarray:
    """The float32 bits of ``y`` as non-negative int64 below 2^32."""
    return y.contiguous().numpy().view(np.uint32).astype(np.int64)


def _doubled_ranks(p: np.ndarray, lo: int, step: np.ndarray, below: int, tail=None):
    """``(2 * rank, (key, run end) of the first row)`` of the sorted packed rows ``step = p[lo: lo + len]`` (ties
    averaged over the run of equal high bits): runs inside the step by a scan, the two runs at its edges by
    ``searchsorted`` on ``p``. ``tail``: the first row's pair of the step above, when ``p`` has been cut short at
    this step's end (the run it starts may continue there)."""
    key, n = step >> 32, step.shape[0]
    at = np.arange(n)
    new = np.empty(n, dtype=bool)
    new[:1] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    first = np.maximum.accumulate(np.where(new, at, 0)) + lo
    ends = np.append(new[1:], True)
    last = np.minimum.accumulate(np.where(ends, at + 1, n)[::-1])[::-1] + lo
    first[first == lo] = np.searchsorted(p, key[0] << 32, "left")
    if tail is not None and key[-1] == tail[0]:
        last[last == lo + n] = tail[1]
    else:
        last[last == lo + n] = np.searchsorted(p, (key[-1] << 32) | _LOW, "right")
    return 2 * below + first + last + 1, (key[0], last[0])


def _received(ctx: comm.Ctx, blocks):
    """``(rows, release)``: the int64 rows `comm.deliver` brings this rank, in an anonymous mapping of their own,
    and ``release(lo)``, which gives the pages of rows ``lo:`` back to the system whatever the allocator would keep
    (those rows then read as 0)."""
    held = []

    def alloc(rows, like):
        held.append(mmap.mmap(-1, max(rows, 1) * 8))
        return torch.from_numpy(np.frombuffer(held[-1], dtype=np.int64, count=rows))

    [[rows]] = comm.deliver(ctx, blocks, [torch.empty(0, dtype=torch.int64)], alloc=alloc, share=SHARE)
    pages = held.pop()

    def release(lo: int) -> None:
        start = -(-lo * 8 // mmap.PAGESIZE) * mmap.PAGESIZE
        if start < len(pages):
            pages.madvise(mmap.MADV_DONTNEED, start, len(pages) - start)

    return rows.numpy(), release


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
