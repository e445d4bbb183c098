"""Distributed sample sort of distinct keys with counts (the exact curves and the rank correlations).

Each rank brings its distinct keys (ascending) with integer counts per key (``(K, C)``). Splitters: up to
`SAMPLE` evenly spaced keys per rank, ``all_gather``-ed; the ``world - 1`` quantiles of the pooled sample cut
the key axis into ranges, and a key goes to the range holding it (``searchsorted``), so equal keys from every
rank meet on one rank: a tie never straddles a range boundary. One `comm.route` of (key, counts); the
receiver merges equal keys. The per-rank totals (one ``all_gather``) give the counts below each range.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
import torch.distributed as dist

from adapters._shard import comm

SAMPLE = 4096  # keys per rank sent to choose the splitters


class Range(NamedTuple):
    keys: torch.Tensor  # this rank's distinct keys, ascending (every rank's ranges ascend with the rank)
    counts: torch.Tensor  # (K, C) int64, summed over every rank's rows
    below: torch.Tensor  # (C,) int64: the counts of every key in lower ranges
    total: torch.Tensor  # (C,) int64: the counts of every key
    inverse: torch.Tensor  # per received entry: its key's index in ``keys``
    sources: torch.Tensor  # per received entry: the rank that sent it (`answer` sends results back)


def distinct(values: torch.Tensor, counts: torch.Tensor):
    """Sorted distinct ``values`` with their per-value sums of ``counts`` (``(N, C)`` int64) and the inverse.

    On the CPU: float32 values as packed int64 keys ``(order-preserving bits << 32) | row`` sorted in place by
    numpy (no argsort; -0.0 counts as 0.0); other dtypes by a stable numpy argsort."""
    if values.device.type != "cpu" or values.dtype == torch.bfloat16:  # (numpy has no bfloat16)
        keys, inverse = torch.unique(values, sorted=True, return_inverse=True)
    else:
        if values.dtype == torch.float32 and values.shape[0] < 2**31:
            packed = _sortable(values) << 32
            packed |= np.arange(values.shape[0], dtype=np.int64)
            packed.sort()
            order, ordered = packed & 0xFFFFFFFF, packed >> 32
            del packed
        else:
            a = values.numpy()
            order = np.argsort(a, kind="stable")
            ordered = a[order]
        new = np.empty(ordered.shape, dtype=bool)
        new[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
        group = np.cumsum(new) - 1
        inverse_np = np.empty_like(group)
        inverse_np[order] = group
        ordered = ordered[new]
        keys = torch.from_numpy(_unsortable(ordered) if values.dtype == torch.float32 and
                                ordered.dtype == np.int64 else ordered)
        inverse = torch.from_numpy(inverse_np)
    summed = torch.zeros((keys.shape[0], counts.shape[1]), dtype=torch.int64, device=keys.device)
    return keys, summed.index_add_(0, inverse, counts.to(torch.int64)), inverse


def distinct_labels(scores: torch.Tensor, labels: torch.Tensor):
    """`distinct` of scores with ``(positives, negatives)`` counts, without an inverse: float32 CPU scores as
    packed int64 keys ``(order-preserving score bits << 1) | label`` sorted in place by numpy (-0.0 as 0.0)."""
    if scores.dtype != torch.float32 or scores.device.type != "cpu":
        labels = labels.to(torch.int64)
        keys, counts, _ = distinct(scores, torch.stack([labels, 1 - labels], 1))
        return keys, counts
    bits = _sortable(scores)
    packed = (bits << 1) | labels.numpy().astype(np.int64)
    del bits
    packed.sort()
    key = packed >> 1
    new = np.empty(key.shape, dtype=bool)
    new[:1] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    rows = np.diff(np.append(starts, key.shape[0]))
    pos = np.add.reduceat(packed & 1, starts) if starts.shape[0] else np.zeros(0, dtype=np.int64)
    keys = torch.from_numpy(_unsortable(key[starts]))
    return keys, torch.from_numpy(np.stack([pos, rows - pos], 1))


def _sortable(x: torch.Tensor) -> np.ndarray:
    """int64 whose order is the float32 order of ``x`` (negatives' magnitude bits flipped; -0.0 as 0.0)."""
    bits = (x + 0.0).numpy().view(np.int32).astype(np.int64)
    bits ^= (bits >> 31) & 0x7FFFFFFF
    return bits


def _unsortable(bits: np.ndarray) -> np.ndarray:
    """The float32 values of `_sortable` keys."""
    bits = bits ^ ((bits >> 31) & 0x7FFFFFFF)
    return bits.astype(np.int32).view(np.float32)


def splitters(ctx: comm.Ctx, keys: torch.Tensor) -> torch.Tensor:
    """``world - 1`` ascending cut points from up to `SAMPLE` evenly spaced keys of every rank."""
    take = torch.linspace(0, keys.shape[0] - 1, min(SAMPLE, keys.shape[0]), device=keys.device).round().long()
    pooled = torch.sort(comm.gather_rows(ctx, keys[take])).values
    if pooled.shape[0] == 0:
        return pooled
    return pooled[torch.arange(1, ctx.world, device=pooled.device) * pooled.shape[0] // ctx.world]


def sample_sort(ctx: comm.Ctx, keys: torch.Tensor, counts: torch.Tensor) -> Range:
    """This rank's range of every rank's distinct ``keys`` (ascending, each rank's own distinct) and counts."""
    keys, counts = keys.to(ctx.comm), counts.to(ctx.comm)
    dest = torch.searchsorted(splitters(ctx, keys), keys)  # a key equal to a cut goes below it, on every rank
    (got, got_counts), sources = comm.route(ctx, [keys, counts], dest, sources=True)
    merged, summed, inverse = distinct(got, got_counts)
    mine = summed.sum(0)
    every = [torch.empty_like(mine) for _ in range(ctx.world)]
    dist.all_gather(every, mine, group=ctx.group)
    every = torch.stack(every)
    return Range(merged, summed, every[: ctx.rank].sum(0), every.sum(0), inverse, sources)


def answer(ctx: comm.Ctx, r: Range, per_key: torch.Tensor) -> torch.Tensor:
    """``per_key`` (one value per key of ``r``) sent back to the ranks that brought each key: every rank gets
    one value per key it passed to `sample_sort`, in its order (its keys ascend, so do their ranges)."""
    return comm.route(ctx, [per_key[r.inverse]], r.sources)[0]


def sample(parts: list, seed: int) -> list:
    """Up to `SAMPLE` rows of ``parts`` (this rank's values in any order: tensors, or tuples of row-aligned
    tensors) at seeded random positions; the picked rows, as the parts are."""
    n = sum(_rows(p) for p in parts)
    take = torch.randint(0, max(n, 1), (min(SAMPLE, n),), generator=torch.Generator().manual_seed(seed))
    take, picked, lo = take.sort().values, [], 0
    for p in parts:
        at = take[(take >= lo) & (take < lo + _rows(p))] - lo
        picked.append(tuple(c[at.to(c.device)] for c in p) if isinstance(p, tuple) else p[at.to(p.device)])
        lo += _rows(p)
    return picked


def _rows(part) -> int:
    return (part[0] if isinstance(part, tuple) else part).shape[0]


def cuts(ctx: comm.Ctx, parts: list[torch.Tensor], like: torch.Tensor, sampled: bool = False) -> torch.Tensor:
    """Up to ``world - 1`` distinct ascending cut values: the quantiles of every rank's `sample` of ``parts``
    (this rank's values, or with ``sampled`` its sample, in ``like``'s dtype on every rank). With `place`,
    values strictly between cuts ``a - 1`` and ``a`` belong to rank ``a``; a value equal to a cut is counted, not
    routed (so a heavily tied value never piles its rows onto one rank)."""
    mine = parts if sampled else sample(parts, ctx.rank)
    pooled = torch.sort(comm.gather_rows(ctx, torch.cat(mine) if mine else like)).values
    if pooled.shape[0] == 0:
        return pooled
    return torch.unique(pooled[torch.arange(1, ctx.world, device=pooled.device) * pooled.shape[0] // ctx.world])


def place(values: torch.Tensor, cut: torch.Tensor):
    """``(range, at_cut)`` of each value: the index of the first cut ``>= value`` (int32) and whether it equals
    it. A few cuts by comparisons (one pass each), more by ``searchsorted``."""
    values = values.contiguous()
    if cut.shape[0] == 0:
        none = torch.zeros(values.shape, dtype=torch.int32, device=values.device)
        return none, none.bool()
    if cut.shape[0] <= FEW_CUTS:
        a, at = (values > cut[0]).to(torch.int32), values == cut[0]
        for c in cut[1:]:
            a += values > c
            at |= values == c
        return a, at
    a = torch.searchsorted(cut, values, out_int32=True)
    return a, cut[a.clamp(max=cut.shape[0] - 1)] == values


FEW_CUTS = 4  # up to this many cuts, `place` compares instead of searching


def below(ranges: torch.Tensor, points: torch.Tensor):
    """Rows below each range and below each cut: ranges ``(world, C)`` and cut points ``(k, C)`` interleave as
    range 0, cut 0, range 1, ..., cut k - 1, range k (ranges past k are empty)."""
    k = points.shape[0]
    seq = torch.zeros((2 * ranges.shape[0] - 1, ranges.shape[1]), dtype=torch.int64, device=ranges.device)
    seq[0::2], seq[1: 2 * k: 2] = ranges, points
    prefix = torch.cumsum(seq, 0) - seq
    return prefix[0::2], prefix[1: 2 * k: 2]


def sorted_in_place(x: torch.Tensor) -> torch.Tensor:
    """``x`` sorted ascending: in place by numpy on the CPU (no index array), else ``torch.sort``."""
    if x.device.type == "cpu" and x.dtype != torch.bfloat16 and x.is_contiguous():
        x.numpy().sort()
        return x
    return torch.sort(x).values
