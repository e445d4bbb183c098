"""Collectives of the sharded finalize: routing rows between ranks, variable-size gathers, agreement on errors.

All of them run on `Ctx.comm` (the current CUDA device under NCCL, else the CPU) and return tensors there.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

import torch
import torch.distributed as dist

ROUTE_CHUNK_BYTES = 64 * 2**20  # per rank and round of `route`: rows travel in rounds of at most this many bytes


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

    One ``all_to_all_single`` of the per-destination counts, then the payload per column in rounds of at most
    `ROUTE_CHUNK_BYTES` per rank (a round takes the next slice of every destination's block). ``sources``: also
    return each received row's source rank (to send answers back: `route` to them keeps the order)."""
    columns = [c.to(ctx.comm) for c in columns]
    wide = [c.dtype for c in columns]
    columns = narrowed(ctx, columns)
    dest = dest.to(ctx.comm)
    order = torch.argsort(dest, stable=True)
    send = torch.bincount(dest, minlength=ctx.world)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=ctx.group)
    send_l, recv_l = send.tolist(), recv.tolist()
    send_off = [0] + list(_cumsum(send_l))[:-1]
    recv_off = [0] + list(_cumsum(recv_l))[:-1]
    row_bytes = max(sum(c[:1].numel() * c.element_size() for c in columns), 1) if columns else 1
    chunk = max(ROUTE_CHUNK_BYTES // row_bytes, 1)
    rounds = torch.tensor([math.ceil(max(send_l + recv_l + [0]) / chunk)], device=ctx.comm)
    dist.all_reduce(rounds, op=dist.ReduceOp.MAX, group=ctx.group)
    outs = [c.new_empty((sum(recv_l),) + tuple(c.shape[1:])) for c in columns]
    for r in range(int(rounds)):
        lo = r * chunk
        s = [min(max(n - lo, 0), chunk) for n in send_l]
        rc = [min(max(n - lo, 0), chunk) for n in recv_l]
        rows = torch.cat([order[send_off[d] + lo: send_off[d] + lo + s[d]] for d in range(ctx.world)])
        for col, out in zip(columns, outs):
            got = col.new_empty((sum(rc),) + tuple(col.shape[1:]))
            dist.all_to_all_single(got, col.index_select(0, rows).contiguous(), rc, s, group=ctx.group)
            pos = 0
            for src in range(ctx.world):
                out[recv_off[src] + lo: recv_off[src] + lo + rc[src]] = got[pos: pos + rc[src]]
                pos += rc[src]
    outs = [out.to(dtype) for out, dtype in zip(outs, wide)]
    if not sources:
        return outs
    return outs, torch.repeat_interleave(torch.arange(ctx.world, device=ctx.comm), recv)


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
