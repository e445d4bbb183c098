"""Collectives of the sharded finalize: routing rows between ranks, variable-size gathers, agreement on errors.

All of them run on `Ctx.comm` (the current CUDA device under NCCL, else the CPU) and return tensors there.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, NamedTuple, Optional

import numpy as np
import torch
import torch.distributed as dist

ROUND_BYTES = 8 * 2**20  # transient bytes per rank and round of `deliver` (O(this), not O(rows))
_ROW_OVERHEAD = 16  # transient bytes per row of a round besides its payload: destination, order, masks


class Ctx(NamedTuple):
    group: Optional[object]
    rank: int
    world: int
    comm: torch.device  # where collectives run


def context(group) -> Ctx:
    nccl = dist.get_backend(group) == "nccl"
    comm = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
    return Ctx(group, dist.get_rank(group), dist.get_world_size(group), comm)


def route(ctx: Ctx, columns: list[torch.Tensor], dest: torch.Tensor, sources: bool = False):
    """Sends row ``i`` of every column to rank ``dest[i]``; returns the rows this rank received, in source
    rank order and, within a source, in their original order (so a one-process concatenation order is kept).

    `deliver` of the columns in rounds of about `ROUND_BYTES` per rank (integer columns travel narrowed):
    besides the received rows, a rank holds O(one round). ``sources``: also return each received row's source
    rank (to send answers back: `route` to them keeps the order)."""
    columns = [c.to(ctx.comm) for c in columns]
    dest = dest.to(ctx.comm)
    outs, recv = deliver(ctx, lambda sending: [(columns, dest)], [c[:0] for c in columns], counts=True)
    outs = outs[0]
    if not sources:
        return outs
    return outs, torch.repeat_interleave(torch.arange(ctx.world, device=ctx.comm), recv[:, 0])


def deliver(ctx: Ctx, blocks: Callable[[bool], Iterable], like: list[torch.Tensor], channels: int = 1,
            alloc: Optional[Callable] = None, counts: bool = False, narrow: bool = False):
    """Streams rows to ranks: ``blocks(sending)`` yields ``(columns, dest)`` pairs (the same rows on both calls:
    ``sending`` is False on the counting pass, True on the sending one, when a block is sent once), ``dest``
    an int64 per row, ``rank * channels + channel`` (negative: the row is not sent). Returns, per channel, the
    columns received (dtype and trailing shape of ``like``, the same on every rank), in source-rank order and
    within a source in the order sent; with ``counts``, also the ``(world, channels)`` rows received per source;
    with ``narrow``, integer columns are received in the narrowest dtype holding every rank's values.

    Two passes over the blocks: the first counts the rows per destination (one ``all_to_all_single``; the
    receivers allocate their rows once, with ``alloc(rows, like_column)`` if given) and the integer columns'
    bounds (one ``all_reduce``: they travel in the narrowest of int8 / int32 holding every rank's values); the
    second sends rounds of about `ROUND_BYTES` (payload and per-row bookkeeping) per rank (one
    ``all_to_all_single`` of the round's counts, one per column). The transient buffers are O(one round),
    whatever the number of rows."""
    world, width = ctx.world, ctx.world * channels
    row_bytes = max(sum(math.prod(c.shape[1:]) * c.element_size() for c in like), 1)
    limit = max(ROUND_BYTES // (row_bytes + _ROW_OVERHEAD), 1)
    ints = [i for i, c in enumerate(like) if c.dtype in (torch.int16, torch.int32, torch.int64)]
    send = torch.zeros(width, dtype=torch.int64, device=ctx.comm)
    flags = torch.zeros(1 + 2 * len(ints), dtype=torch.int64, device=ctx.comm)  # rounds, then -low / high
    for cols, dest in _rounds(blocks(False), limit):
        flags[0] += 1
        send += torch.bincount(dest[dest >= 0], minlength=width)
        for k, i in enumerate(ints):
            if cols[i].numel():
                low, high = torch.aminmax(cols[i])
                flags[1 + 2 * k] = torch.maximum(flags[1 + 2 * k], -low.long())
                flags[2 + 2 * k] = torch.maximum(flags[2 + 2 * k], high.long())
    dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=ctx.group)
    wire = [c.dtype for c in like]
    for k, i in enumerate(ints):
        low, high = -int(flags[1 + 2 * k]), int(flags[2 + 2 * k])
        fit = next((d for d in _NARROWER if torch.iinfo(d).min <= low and high <= torch.iinfo(d).max), None)
        if fit is not None and fit.itemsize < like[i].dtype.itemsize:
            wire[i] = fit
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=ctx.group)
    recv = recv.view(world, channels)
    at = (torch.cumsum(recv, 0) - recv).tolist()  # per source and channel: where its rows go next
    alloc = alloc or (lambda n, c: c.new_empty((n,) + tuple(c.shape[1:])))
    if narrow:
        like = [c.to(d) for c, d in zip(like, wire)]
    outs = [[alloc(int(recv[:, ch].sum()), c) for c in like] for ch in range(channels)]
    steps = iter(_rounds(blocks(True), limit))
    for _ in range(int(flags[0])):
        cols, dest = next(steps, (None, None))
        if cols is None:
            cols, dest = [c[:0] for c in like], torch.empty(0, dtype=torch.int64, device=ctx.comm)
        keep = dest >= 0
        if not bool(keep.all()):
            cols, dest = [c[keep] for c in cols], dest[keep]
        order = _grouped(dest, width)
        s = torch.bincount(dest, minlength=width)
        rc = torch.empty_like(s)
        dist.all_to_all_single(rc, s, group=ctx.group)
        s_rank, rc = s.view(world, channels).sum(1).tolist(), rc.view(world, channels).tolist()
        rc_rank = [sum(r) for r in rc]
        for i, col in enumerate(cols):
            got = col.new_empty((sum(rc_rank),) + tuple(col.shape[1:]), dtype=wire[i])
            dist.all_to_all_single(got, col.index_select(0, order).to(wire[i]), rc_rank, s_rank, group=ctx.group)
            pos = 0
            for src in range(world):
                for ch in range(channels):
                    n = rc[src][ch]
                    if n:
                        outs[ch][i][at[src][ch]: at[src][ch] + n] = got[pos: pos + n]
                    pos += n
        for src in range(world):
            for ch in range(channels):
                at[src][ch] += rc[src][ch]
    return (outs, recv) if counts else outs


def _grouped(dest: torch.Tensor, width: int) -> torch.Tensor:
    """The rows' positions ordered by destination, each destination's in their order (a stable argsort; for a
    few destinations, one mask per destination)."""
    if width > FEW_DESTINATIONS:
        return torch.argsort(dest, stable=True)
    if dest.device.type == "cpu":  # numpy's flatnonzero: several times torch's nonzero there
        d = dest.numpy()
        return torch.from_numpy(np.concatenate([np.flatnonzero(d == k) for k in range(width)]))
    return torch.cat([torch.nonzero(dest == k)[:, 0] for k in range(width)])


FEW_DESTINATIONS = 8  # up to this many destinations per round, `_grouped` masks instead of sorting


def _rounds(blocks: Iterable, limit: int):
    """``(columns, dest)`` of at most ``limit`` rows each: large blocks sliced, small consecutive ones joined."""
    pending, held = [], 0
    for cols, dest in blocks:
        for lo in range(0, dest.shape[0], limit):
            part = ([c[lo: lo + limit] for c in cols], dest[lo: lo + limit])
            if held + part[1].shape[0] > limit and pending:
                yield _joined(pending)
                pending, held = [], 0
            pending.append(part)
            held += part[1].shape[0]
    if pending:
        yield _joined(pending)


def _joined(parts: list):
    if len(parts) == 1:
        return parts[0]
    return [torch.cat(c) for c in zip(*(p[0] for p in parts))], torch.cat([p[1] for p in parts])


_NARROWER = (torch.int8, torch.int32)  # the integer dtypes gloo and NCCL both send


def narrowed(ctx: Ctx, columns: list[torch.Tensor]) -> list[torch.Tensor]:
    """Integer columns cast to the narrowest signed dtype holding every rank's values (one ``all_reduce``
    of their bounds), so relevance labels travel as int8 and query ids as int32."""
    ints = [i for i, c in enumerate(columns) if c.dtype in (torch.int16, torch.int32, torch.int64)]
    if not ints:
        return columns
    bounds = torch.tensor([[0, 0]] * len(ints), dtype=torch.int64, device=ctx.comm)
    for k, i in enumerate(ints):
        if columns[i].numel():
            low, high = torch.aminmax(columns[i])
            bounds[k] = torch.stack([-low.long(), high.long()])
    dist.all_reduce(bounds, op=dist.ReduceOp.MAX, group=ctx.group)
    out = list(columns)
    for k, i in enumerate(ints):
        low, high = -int(bounds[k, 0]), int(bounds[k, 1])
        fit = next((d for d in _NARROWER if torch.iinfo(d).min <= low and high <= torch.iinfo(d).max), None)
        if fit is not None and fit.itemsize < columns[i].dtype.itemsize:
            out[i] = columns[i].to(fit)
    return out


def _cumsum(xs):
    total = 0
    for x in xs:
        total += x
        yield total


def gather_rows(ctx: Ctx, x: torch.Tensor) -> torch.Tensor:
    """Every rank's rows of ``x`` (same trailing shape and dtype on every rank), concatenated in rank order."""
    x = x.to(ctx.comm)
    n = torch.tensor([x.shape[0]], device=ctx.comm)
    sizes = [torch.empty_like(n) for _ in range(ctx.world)]
    dist.all_gather(sizes, n, group=ctx.group)
    sizes = [int(s) for s in sizes]
    padded = x.new_zeros((max(sizes),) + tuple(x.shape[1:]))
    padded[: x.shape[0]] = x
    out = [torch.empty_like(padded) for _ in range(ctx.world)]
    dist.all_gather(out, padded, group=ctx.group)
    return torch.cat([o[:s] for o, s in zip(out, sizes)])


def agree(ctx: Ctx, fn: Callable[[], object]):
    """``fn()`` on every rank; if it raises on any rank, every rank raises the first failing rank's error
    (so no rank is left waiting in a collective that another rank never reaches)."""
    try:
        value, error = fn(), None
    except Exception as err:  # noqa: BLE001 - shared with the other ranks below
        value, error = None, err
    errors: list = [None] * ctx.world
    dist.all_gather_object(errors, None if error is None else (type(error), str(error)), group=ctx.group)
    first = next(((r, e) for r, e in enumerate(errors) if e is not None), None)
    if first is None:
        return value
    if error is not None and first[0] == ctx.rank:
        raise error
    cls, msg = first[1]
    try:
        raised = cls(msg)
    except Exception:  # noqa: BLE001 - an exception type that takes other arguments
        raised = RuntimeError(msg)
    raise raised


def promoted(ctx: Ctx, dtypes: list[Optional[torch.dtype]]) -> list[Optional[torch.dtype]]:
    """Per position, the promotion of every rank's dtype there (``None``: the rank has no rows)."""
    every: list = [None] * ctx.world
    dist.all_gather_object(every, [str(d) if d is not None else None for d in dtypes], group=ctx.group)
    out = []
    for i in range(len(dtypes)):
        found = [getattr(torch, d.split(".")[-1]) for d in (e[i] for e in every) if d is not None]
        dt = found[0] if found else None
        for other in found[1:]:
            dt = torch.promote_types(dt, other)
        out.append(dt)
    return out
