"""Collectives of the sharded finalize: routing rows between ranks, variable-size gathers, agreement on errors.

All of them run on `Ctx.comm` (the current CUDA device under NCCL, else the CPU) and return tensors there.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, NamedTuple, Optional

import numpy as np
import torch
import torch.distributed as dist

ROUND_BYTES = 4 * 2**20  # transient bytes per rank and round of `deliver`, at least (O(this), not O(rows))
ROUND_SHARE = 16  # ... or 1 / this of the most rows a rank sends, if larger: at most this many rounds
_ROW_OVERHEAD = 16  # transient bytes per row of a round besides its payload: destination, placement


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
            alloc: Optional[Callable] = None, counts: bool = False, narrow: bool = False, share: int = 0):
    """Streams rows to ranks: ``blocks(sending)`` yields ``(columns, dest)`` pairs (the same rows on both calls:
    ``sending`` is False on the counting pass, True on the sending one, when a block is sent once), ``dest``
    an integer per row, ``rank * channels + channel`` (negative: the row is not sent). Returns, per channel, the
    columns received (dtype and trailing shape of ``like``, the same on every rank), in source-rank order and
    within a source in the order sent; with ``counts``, also the ``(world, channels)`` rows received per source;
    with ``narrow``, integer columns are received in the narrowest dtype holding every rank's values; ``share``
    (default `ROUND_SHARE`): at most about this many rounds (a caller already holding more than its rows asks for
    more, smaller ones).

    Two passes over the blocks, cut into pieces of up to `PIECE` rows. The first counts each piece's rows per
    destination and the integer columns' bounds (one ``all_reduce``: they travel in the narrowest of int8 / int32
    holding every rank's values; a counting pass that yields ``None`` for a block's columns reads only ``dest``,
    and integer columns then travel as they are). Rounds are runs of whole pieces of about `ROUND_BYTES` per rank
    (at wire width), or ``1 / share`` of the most rows a rank sends if that is more (at most about ``share``
    rounds: each is a wait for the slowest rank); one ``all_reduce`` of the number of rounds and one
    ``all_to_all_single`` of every round's counts let the receivers allocate their rows once (with
    ``alloc(rows, like_column)`` if given) and know each round's. The second pass places a round's rows by
    destination into one send buffer per column as its pieces are consumed, then one ``all_to_all_single`` per
    column, issued together and waited once. The transient buffers are O(one round): its rows held, sent and
    received."""
    world, width = ctx.world, ctx.world * channels
    ints = [i for i, c in enumerate(like) if c.dtype in (torch.int16, torch.int32, torch.int64)]
    like_bytes = max(sum(math.prod(c.shape[1:]) * c.element_size() for c in like), 1)
    piece = max(min(PIECE, ROUND_BYTES // (2 * like_bytes + _ROW_OVERHEAD)), 1)  # block rows a piece
    pieces = []  # per piece of every block: its rows per destination
    flags = torch.zeros(2 + 2 * len(ints), dtype=torch.int64, device=ctx.comm)  # rows, unread, then -low / high
    for cols, dest in blocks(False):
        for lo in range(0, dest.shape[0], piece):
            d = dest[lo: lo + piece]
            pieces.append(torch.bincount(d[d >= 0], minlength=width))
        if cols is None:
            flags[1] = 1
            continue
        for k, i in enumerate(ints):
            if cols[i].numel():
                low, high = torch.aminmax(cols[i])
                flags[2 + 2 * k] = torch.maximum(flags[2 + 2 * k], -low.long())
                flags[3 + 2 * k] = torch.maximum(flags[3 + 2 * k], high.long())
    pieces = torch.stack(pieces) if pieces else torch.zeros((0, width), dtype=torch.int64, device=ctx.comm)
    flags[0] = pieces.sum()
    dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=ctx.group)
    wire = [c.dtype for c in like]
    for k, i in enumerate(ints if not flags[1] else ()):
        low, high = -int(flags[2 + 2 * k]), int(flags[3 + 2 * k])
        fit = next((d for d in _NARROWER if torch.iinfo(d).min <= low and high <= torch.iinfo(d).max), None)
        if fit is not None and fit.itemsize < like[i].dtype.itemsize:
            wire[i] = fit
    row_bytes = max(sum(math.prod(c.shape[1:]) * d.itemsize for c, d in zip(like, wire)), 1)
    limit = max(ROUND_BYTES // (2 * row_bytes + _ROW_OVERHEAD), -(-int(flags[0]) // (share or ROUND_SHARE)), 1)
    sizes, send = _plan(pieces, limit)
    n_rounds = torch.tensor([send.shape[0]], device=ctx.comm)
    dist.all_reduce(n_rounds, op=dist.ReduceOp.MAX, group=ctx.group)
    send = torch.cat([send, send.new_zeros((int(n_rounds) - send.shape[0], width))])
    recv = torch.empty_like(send).view(world, -1)  # per source: its rows to this rank, per round and channel
    dist.all_to_all_single(recv, send.view(-1, world, channels).transpose(0, 1).contiguous(), group=ctx.group)
    recv = recv.view(world, -1, channels)
    at = (torch.cumsum(recv.sum(1), 0) - recv.sum(1)).tolist()  # per source and channel: where its rows go next
    alloc = alloc or (lambda n, c: c.new_empty((n,) + tuple(c.shape[1:])))
    if narrow:
        like = [c.to(d) for c, d in zip(like, wire)]
    outs = [[alloc(int(recv[:, :, ch].sum()), c) for c in like] for ch in range(channels)]
    rounds = _rounds(blocks(True), piece, sizes)
    for r in range(send.shape[0]):
        parts, s = next(rounds, []), send[r]
        sent = _grouped(parts, s, [c.to(d) for c, d in zip(like, wire)])
        s_rank, rc = s.view(world, channels).sum(1).tolist(), recv[:, r].tolist()
        rc_rank = [sum(x) for x in rc]
        got = [c.new_empty((sum(rc_rank),) + tuple(c.shape[1:])) for c in sent]
        works = [dist.all_to_all_single(g, c, rc_rank, s_rank, group=ctx.group, async_op=True)
                 for g, c in zip(got, sent)]  # issued together: one wait a round, not one a column
        for work in works:
            work.wait()
        del sent, works
        for i, g in enumerate(got):
            pos = 0
            for src in range(world):
                for ch in range(channels):
                    n = rc[src][ch]
                    if n:
                        outs[ch][i][at[src][ch]: at[src][ch] + n] = g[pos: pos + n]
                    pos += n
            got[i] = None
        for src in range(world):
            for ch in range(channels):
                at[src][ch] += rc[src][ch]
    for _ in rounds:  # the blocks after the last piece (their side effects: the caller's sums at cuts)
        pass
    recv = recv.sum(1)
    return (outs, recv) if counts else outs


def _grouped(parts: list, counts: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    """The rows of ``parts`` (``(columns, dest)``, ``counts`` rows per destination in all) in one tensor per
    column (dtype of ``like``), grouped by destination, each destination's in their order; ``parts`` is emptied
    as its rows are placed (the round's rows are held about once)."""
    cursor = torch.cumsum(counts, 0) - counts
    total = int(counts.sum())
    out = [c.new_empty((total,) + tuple(c.shape[1:])) for c in like]
    parts.reverse()
    while parts:
        cols, dest = parts.pop()
        pos = _positions(dest, cursor)
        for o, c in zip(out, cols):
            o.index_copy_(0, pos, c.to(o.dtype))
        cursor += torch.bincount(dest, minlength=cursor.shape[0])
    return out


def _positions(dest: torch.Tensor, cursor: torch.Tensor) -> torch.Tensor:
    """int64 place of each row in the send buffer: ``cursor[dest]`` plus its index among the rows with its
    destination (on the CPU: a few destinations by numpy masks, more by numpy's stable argsort of the narrowed
    destinations, a radix sort; elsewhere one stable ``torch.argsort``)."""
    width = cursor.shape[0]
    if dest.device.type == "cpu":  # numpy's flatnonzero and radix argsort: several times torch's
        d, pos = dest.numpy(), np.empty(dest.shape[0], dtype=np.int64)
        if width <= FEW_DESTINATIONS:
            first = cursor.tolist()
            for k in range(width):
                rows = np.flatnonzero(d == k)
                pos[rows] = np.arange(first[k], first[k] + rows.shape[0])
            return torch.from_numpy(pos)
        d = d.astype(np.int8 if width <= 127 else np.int16 if width <= 2**15 else np.int32, copy=False)
        n = np.bincount(d, minlength=width)
        pos[np.argsort(d, kind="stable")] = np.arange(d.shape[0])
        pos += (cursor.numpy() - (np.cumsum(n) - n))[d]
        return torch.from_numpy(pos)
    return _torch_positions(dest, cursor)


def _torch_positions(dest: torch.Tensor, cursor: torch.Tensor) -> torch.Tensor:
    """`_positions` by one stable ``torch.argsort`` (any device)."""
    width = cursor.shape[0]
    order = torch.argsort(dest, stable=True)
    ordered = dest[order].long()
    n = torch.bincount(ordered, minlength=width)
    ranked = cursor[ordered] + torch.arange(ordered.shape[0], device=dest.device) - (torch.cumsum(n, 0) - n)[ordered]
    return torch.empty_like(ranked).scatter_(0, order, ranked)


FEW_DESTINATIONS = 8  # up to this many destinations, `_positions` masks instead of sorting
PIECE = 1 << 16  # block rows per piece, at most: rounds are whole pieces; bounds `_positions`' temporaries


def _plan(pieces: torch.Tensor, limit: int):
    """Rounds of consecutive pieces (``pieces``: rows per destination of each), as many as fit in ``limit`` rows
    (at least one): the pieces in each round and its rows per destination, ``(rounds, destinations)``."""
    sizes, counts, held, n = [], [], 0, 0
    for k, rows in enumerate(pieces.sum(1).tolist()):
        if n and held + rows > limit:
            sizes.append(n)
            counts.append(pieces[k - n: k].sum(0))
            held, n = 0, 0
        held, n = held + rows, n + 1
    if n:
        sizes.append(n)
        counts.append(pieces[pieces.shape[0] - n:].sum(0))
    return sizes, torch.stack(counts) if counts else pieces[:0]


def _rounds(blocks: Iterable, piece: int, sizes: list[int]):
    """Per round, the ``(columns, dest)`` parts (rows with ``dest >= 0``) of its ``sizes[r]`` pieces of ``piece``
    block rows, as `_plan` counted them."""
    parts, r, n = [], 0, 0
    for cols, dest in blocks:
        for lo in range(0, dest.shape[0], piece):
            part_cols, part_dest = [c[lo: lo + piece] for c in cols], dest[lo: lo + piece]
            keep = part_dest >= 0
            if not bool(keep.all()):
                part_cols, part_dest = [c[keep] for c in part_cols], part_dest[keep]
            if part_dest.shape[0]:
                parts.append((part_cols, part_dest))
            n += 1
            if n == sizes[r]:
                yield parts
                parts, r, n = [], r + 1, 0


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
