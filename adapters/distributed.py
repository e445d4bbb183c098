"""Cross-rank reduction of fmetrics states with `torch.distributed`, and an exact evaluation sampler.

`reduce(metric, state)` returns, on every rank, the state of all ranks' data:
the single-process state up to float rounding (exactly, for integer fields).
It needs one small fixed-size exchange plus one collective per bucket:

1. **Header** (one ``all_gather`` of 256 int64 per rank): a hash of the
   call (its sequence number in the group and its purpose, e.g. ``compute``
   or ``step``), the metric name, its ``state_key``, the state layout and the
   dtype/shape of every fixed field, plus the sizes of the variable fields.
   Ranks that disagree -- or that pair different calls, as a rank's
   ``compute()`` sync meeting another rank's per-step sync does -- all raise
   `LayoutMismatchError` naming what differs: never a hang and never
   silently mixed states. ``"cat"`` chunks whose trailing shapes differ
   (across batches or ranks) raise too. (Variable metadata longer than the
   header costs one more ``all_gather``.)
2. **Fast path**: leaves tagged ``"sum"`` / ``"min"`` / ``"max"`` are packed into
   one flat buffer per (op, dtype) and ``all_reduce``-d: a whole collection of
   metrics costs a handful of collectives, however many metrics it holds.
   Float min/max leaves carry a NaN flag per element in the same buffer, so
   NaN wins as it does in ``torch.minimum`` / ``torch.maximum``. Dtypes the
   backends do not all-reduce (bool, int16, complex, ...) take the gather
   path and are folded with the tag's operation in rank order.
3. **Gather path**: ``"cat"`` fields (tuples of chunks) and untagged subtrees
   are packed, as bytes, into one padded buffer and ``all_gather``-ed once;
   each rank's pieces are cut back out (padding removed). An integer piece of
   at least `NARROW_MIN` entries travels in the narrowest signed integer
   dtype that holds its values (its header names both dtypes) and is widened
   back on arrival: relevance targets and query ids stored as int64 cross
   the wire as int8 and int32.
4. Untagged subtrees are folded with ``metric.merge`` in rank order.

Reduction units: a tag applies to the subtree below it; a NamedTuple state
holding any ``None`` tag is gathered and merged as a whole (its merge may
read its tagged fields, as Chan's mean/variance merge reads the counts);
plain tuples and dicts (a `fmetrics.collection`'s state) are containers of
independent units.

Backends: gloo (CPU tensors) and NCCL (tensors are moved to the current CUDA
device for the collectives and back to their own device afterwards).
"""
from __future__ import annotations

import hashlib
import math
from typing import Any, Callable, Iterator, Mapping, Optional

import torch
import torch.distributed as dist
import torch.utils._pytree as pytree

from adapters import _shard
from fmetrics import state as state_lib
from fmetrics.metric import Metric

__all__ = ["reduce", "finalize", "shardable", "EvalSampler", "LayoutMismatchError"]

HEADER_LEN = 256  # int64 entries per rank in the first exchange: [hash, meta length, meta...]
_ALIGN = 16  # byte alignment of each piece in the gather buffer (any dtype can be viewed back)

# dtypes that every backend all-reduces natively (others are gathered and folded locally)
_ALLREDUCE_DTYPES = frozenset({torch.uint8, torch.int8, torch.int32, torch.int64,
                               torch.float16, torch.bfloat16, torch.float32, torch.float64})
_OPS = {"sum": dist.ReduceOp.SUM, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}
_FOLD = {"sum": lambda a, b: a + b, "min": torch.minimum, "max": torch.maximum}
_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
           torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128,
           torch.uint16, torch.uint32, torch.uint64)
_CODE = {dt: i for i, dt in enumerate(_DTYPES)}
NARROW_MIN = 4096  # integer pieces with at least this many entries travel narrowed (`_wire_dtype`)
_NARROWER = (torch.int8, torch.int16, torch.int32)


def _wire_dtype(p: torch.Tensor) -> torch.dtype:
    """The dtype a gathered piece travels in: the narrowest signed integer dtype holding an integer
    piece's values (one ``aminmax``, read on the host), else its own."""
    if p.dtype not in (torch.int16, torch.int32, torch.int64) or p.numel() < NARROW_MIN:
        return p.dtype
    low, high = (int(v) for v in torch.aminmax(p))
    for dtype in _NARROWER:
        if dtype.itemsize < p.dtype.itemsize and torch.iinfo(dtype).min <= low and high <= torch.iinfo(dtype).max:
            return dtype
    return p.dtype


class LayoutMismatchError(RuntimeError):
    """Ranks called `reduce` with different metrics, configurations or state layouts."""


# ---------------------------------------------------------------- walking a state


def _has_none(tags) -> bool:
    if tags is None:
        return True
    if isinstance(tags, str):
        return False
    values = tags.values() if isinstance(tags, Mapping) else tags
    return any(_has_none(t) for t in values)


def _map_units(tags, node, visit: Callable[[str, Optional[str], Any, str], Any], path: str = "state"):
    """Rebuilds ``node`` with every reduction unit replaced by ``visit(kind, tag, unit, path)``.

    ``kind`` is ``"reduce"`` (tag sum/min/max), ``"cat"`` or ``"merge"`` (untagged).
    """
    if tags is None or (hasattr(node, "_fields") and not isinstance(tags, str) and _has_none(tags)):
        return visit("merge", tags, node, path)  # the unit's tags (its "cat" fields travel as joined chunks)
    if isinstance(tags, str):
        if tags in _OPS:
            return visit("reduce", tags, node, path)
        if tags == "cat":
            return visit("cat", tags, node, path)
        raise TypeError(f"adapters.distributed.reduce: {path} has the unknown reduction tag {tags!r}; "
                        f"expected one of {state_lib.TAGS} or None")
    if isinstance(tags, Mapping):
        if not isinstance(node, Mapping) or set(node) != set(tags):
            raise TypeError(f"adapters.distributed.reduce: the reduction tags at {path} ({tags!r}) "
                            f"do not mirror the state ({type(node).__name__})")
        return {k: _map_units(tags[k], node[k], visit, f"{path}[{k!r}]") for k in node}
    if isinstance(tags, (tuple, list)):
        if not isinstance(node, (tuple, list)) or len(node) != len(tags):
            raise TypeError(f"adapters.distributed.reduce: the reduction tags at {path} ({tags!r}) "
                            f"do not mirror the state ({type(node).__name__})")
        names = getattr(node, "_fields", None)
        parts = [_map_units(t, x, visit, f"{path}.{names[i]}" if names else f"{path}[{i}]")
                 for i, (t, x) in enumerate(zip(tags, node))]
        return type(node)(*parts) if names else type(node)(parts)
    raise TypeError(f"adapters.distributed.reduce: the reduction tags at {path} ({tags!r}) are not "
                    "a tag, None, a tuple or a dict")


def _tensor_leaves(node, path: str) -> tuple[list[torch.Tensor], Any]:
    """Leaves and tree spec of ``node``; a leaf that is not a tensor raises TypeError naming it."""
    with_path, spec = pytree.tree_flatten_with_path(node)
    for key, leaf in with_path:
        if not isinstance(leaf, torch.Tensor):
            raise TypeError(f"adapters.distributed.reduce: state leaf {path}{pytree.keystr(key)} is a "
                            f"{type(leaf).__name__}, not a tensor (states must be pytrees of tensors)")
    return [leaf for _, leaf in with_path], spec


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little", signed=True)


def _code(t: torch.Tensor, path: str) -> int:
    if t.dtype not in _CODE:
        raise TypeError(f"adapters.distributed.reduce: {path} has dtype {t.dtype}, which cannot be sent")
    return _CODE[t.dtype]


class _Unit:
    """One reduction unit of the local state, with what it contributes to the exchanges."""

    def __init__(self, kind: str, tag: Optional[str], node, path: str):
        self.kind, self.tag, self.node, self.path = kind, tag, node, path
        self.pieces: list[torch.Tensor] = []  # what travels through the gather buffer
        self.spec = None
        if kind == "reduce":
            self.leaves, self.spec = _tensor_leaves(node, path)
            self.folded = [leaf.dtype not in _ALLREDUCE_DTYPES for leaf in self.leaves]
            self.pieces = [leaf for leaf, f in zip(self.leaves, self.folded) if f]
        elif kind == "cat":
            if not isinstance(node, (tuple, list)):
                raise TypeError(f"adapters.distributed.reduce: {path} is tagged 'cat' but holds a "
                                f"{type(node).__name__}, not a tuple of tensor chunks")
            chunks, _ = _tensor_leaves(tuple(node), path)
            self.pieces = _join_chunks(chunks, path)
        else:
            self.leaves, self.spec = _tensor_leaves(node, path)
            self.lengths: list[int] = []  # pieces per "cat" field inside the unit
            self.segments: list = []  # in piece order: ("leaves", count) or ("cat", path)
            self.skeleton = _skeleton(tag, node, self.pieces, self.lengths, path, self.segments)

    def describe(self) -> list[str]:
        """Lines of the layout fingerprint (what every rank must agree on)."""
        if self.kind == "reduce":
            return [f"{self.path}: {self.tag} leaf {i} {leaf.dtype} {tuple(leaf.shape)}"
                    for i, leaf in enumerate(self.leaves)] + [f"{self.path}: {self.spec}"]
        return [f"{self.path}: {self.kind}"]

    def meta(self, narrow: bool = False) -> list[int]:
        """Per-rank sizes of the variable pieces: ``[n, (dtype, wire dtype, ndim, *shape) * n]``; a merge unit
        first gives the hash of its structure without its chunk tuples and the piece count of each chunk field.
        ``narrow``: integer pieces name the narrower dtype they travel in (`_wire_dtype`)."""
        out = [] if self.kind != "merge" else [_hash64(self.skeleton), len(self.lengths), *self.lengths]
        out.append(len(self.pieces))
        for p in self.pieces:
            code = _code(p, self.path)
            out += [code, _CODE[_wire_dtype(p)] if narrow else code, p.dim(), *p.shape]
        return out


def _join_chunks(chunks: list[torch.Tensor], path: str) -> list[torch.Tensor]:
    """One piece when the chunks can be concatenated along dim 0 without changing anything, else the chunks
    (whether they can be joined at all is checked on every rank's pieces, see `_check_chunk_shapes`)."""
    if len(chunks) <= 1:
        return chunks
    c0 = chunks[0]
    if c0.dim() and all(c.dtype == c0.dtype and c.dim() == c0.dim() and c.shape[1:] == c0.shape[1:]
                        and c.device == c0.device for c in chunks):
        return [torch.cat(chunks, dim=0)]
    return chunks


def _skeleton(tags, node, pieces: list, lengths: list, path: str, segments: list) -> str:
    """The structure of a merge unit with its chunk tuples left out; appends its pieces (chunk fields
    joined, see `_join_chunks`), the piece count of each chunk field and the segments of the pieces."""
    if isinstance(tags, str) and tags == "cat" and isinstance(node, (tuple, list)):
        joined = _join_chunks(_tensor_leaves(tuple(node), path)[0], path)
        pieces.extend(joined)
        lengths.append(len(joined))
        segments.append(("cat", path))
        return "cat"
    if tags is None or isinstance(tags, str):
        leaves, spec = _tensor_leaves(node, path)
        pieces.extend(leaves)
        segments.append(("leaves", len(leaves)))
        return str(spec)
    if isinstance(tags, Mapping) and isinstance(node, Mapping):
        inner = ", ".join(f"{k!r}: {_skeleton(tags[k], node[k], pieces, lengths, f'{path}[{k!r}]', segments)}"
                          for k in node)
        return f"{{{inner}}}"
    names = getattr(node, "_fields", None)
    inner = ", ".join(_skeleton(t, x, pieces, lengths, f"{path}.{names[i]}" if names else f"{path}[{i}]", segments)
                      for i, (t, x) in enumerate(zip(tags, node)))
    return f"{type(node).__qualname__}({inner})"


def _rebuild(tags, like, pieces, lengths):
    """Inverse of `_skeleton` for another rank: ``like`` (this rank's unit) gives the structure."""
    if isinstance(tags, str) and tags == "cat" and isinstance(like, (tuple, list)):
        return tuple(next(pieces) for _ in range(next(lengths)))
    if tags is None or isinstance(tags, str):
        spec = pytree.tree_structure(like)
        return pytree.tree_unflatten([next(pieces) for _ in range(spec.num_leaves)], spec)
    if isinstance(tags, Mapping):
        return {k: _rebuild(tags[k], like[k], pieces, lengths) for k in like}
    parts = [_rebuild(t, x, pieces, lengths) for t, x in zip(tags, like)]
    return type(like)(*parts) if hasattr(like, "_fields") else type(like)(parts)


def _parse_meta(units: list[_Unit], meta: list[int]) -> list[tuple]:
    """Inverse of `_Unit.meta` for one rank: per unit ``(skeleton hash, [(dtype, shape, wire dtype), ...],
    chunk counts)``."""
    out, i = [], 0
    for u in units:
        spec_hash, lengths = None, []
        if u.kind == "merge":
            spec_hash, k = meta[i], meta[i + 1]
            lengths, i = meta[i + 2:i + 2 + k], i + 2 + k
        n, i = meta[i], i + 1
        pieces = []
        for _ in range(n):
            dtype, wire, ndim = _DTYPES[meta[i]], _DTYPES[meta[i + 1]], meta[i + 2]
            pieces.append((dtype, tuple(meta[i + 3:i + 3 + ndim]), wire))
            i += 3 + ndim
        out.append((spec_hash, pieces, lengths))
    return out


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


# ---------------------------------------------------------------- the reduction


def reduce(metric: Metric, state, group=None, *, purpose: str = "reduce"):
    """The state of every rank's data, identical on every rank.

    Equivalent to gathering every rank's state and folding ``metric.merge``
    over them in rank order (see the module docstring for how it is sent).
    Without an initialized process group (a single process) the state is
    returned unchanged. Every rank of ``group`` must call it.

    Args:
      metric: the `fmetrics.Metric` whose state this is.
      state: this rank's state.
      group: the process group (default: the whole world).
      purpose: what the call is for (``"compute"``, ``"step"``, ...). It rides
        in the header with the call's sequence number in ``group``, so a rank
        whose ``compute`` sync meets another rank's per-step sync raises
        instead of mixing the two.

    Raises:
      TypeError: a state leaf is not a tensor (the message names its path), or
        the reduction tags do not mirror the state.
      LayoutMismatchError: on every rank, when ranks hold different metrics,
        configurations or state layouts, or pair different calls (sequence
        number or purpose), or their chunks differ in trailing shape.

    Example::

        >>> m = fmetrics.mean()
        >>> s = m.update(m.init(), local_values)
        >>> value = m.finalize(adapters.distributed.reduce(m, s))
    """
    units: list[_Unit] = []
    _map_units(metric.reductions, state, lambda *a: units.append(_Unit(*a)))
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        _check_chunk_shapes(units, [_parse_meta(units, [v for u in units for v in u.meta()])])
        return state
    world = dist.get_world_size(group)
    ctx = _Context(group, world, dist.get_rank(group), state_lib.device_of(state))
    call = f"call: #{_next_sequence(group)} ({purpose})"
    layouts = _exchange_headers(ctx, metric, state, units, call)                      # 1. header
    _check_chunk_shapes(units, layouts)
    fast = _FastPath(ctx, units)                                                      # 2. all_reduce (async)
    gathered = _Gathered(ctx, units, layouts)                                         # 3. all_gather
    reduced = fast.wait()
    results = _unit_results(ctx, units, layouts, reduced, gathered)                   # 4. fold / merge
    return _assemble(metric, state, results, world)


class _Context:
    """Where one `reduce` call runs: group, world size, this rank, devices."""

    def __init__(self, group, world: int, rank: int, state_device: Optional[torch.device]):
        self.group, self.world, self.rank = group, world, rank
        self.comm = _comm_device(group, state_device)
        self.default_device = state_device or torch.device("cpu")


_SEQUENCE: dict = {}  # (group id, ranks) -> number of reduce calls made in it by this process


def _next_sequence(group) -> int:
    pg = group if group is not None else dist.group.WORLD
    try:
        ranks = tuple(dist.get_process_group_ranks(pg))
    except Exception:  # noqa: BLE001 - older torch / fake groups: the world size identifies it
        ranks = (dist.get_world_size(group),)
    key = (id(pg), ranks)
    _SEQUENCE[key] = _SEQUENCE.get(key, 0) + 1
    return _SEQUENCE[key]


def _comm_device(group, state_device: Optional[torch.device]) -> torch.device:
    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend and (backend == "nccl" or (state_device is not None and state_device.type == "cuda")):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


# ---- 1. header: fingerprint + variable sizes, one fixed-size all_gather


def _exchange_headers(ctx: _Context, metric: Metric, state, units: list[_Unit], call: str) -> list:
    """Every rank's layout (`_parse_meta`); raises `LayoutMismatchError` on every rank when fingerprints differ."""
    description = [call, f"metric: {metric.name}", f"state_key: {_portable(metric.state_key)!r}",
                   f"state type: {type(state).__module__}.{type(state).__qualname__}"]
    for u in units:
        description += u.describe()
    meta = [v for u in units for v in u.meta(narrow=True)]
    header = torch.zeros(HEADER_LEN, dtype=torch.int64)
    header[0], header[1] = _hash64("\n".join(description)), len(meta)
    if len(meta) <= HEADER_LEN - 2:
        header[2:2 + len(meta)] = torch.tensor(meta, dtype=torch.int64)
    headers = torch.stack(_all_gather(header.to(ctx.comm), ctx.world, ctx.group)).cpu()
    _check_fingerprints(headers, description, ctx.group, ctx.world)
    lengths = headers[:, 1].tolist()
    if max(lengths) <= HEADER_LEN - 2:
        metas = [headers[r, 2:2 + lengths[r]].tolist() for r in range(ctx.world)]
    else:  # variable metadata longer than the header: one more all_gather
        padded = torch.zeros(max(lengths), dtype=torch.int64)
        padded[:len(meta)] = torch.tensor(meta, dtype=torch.int64)
        all_meta = torch.stack(_all_gather(padded.to(ctx.comm), ctx.world, ctx.group)).cpu()
        metas = [all_meta[r, :lengths[r]].tolist() for r in range(ctx.world)]
    return [_parse_meta(units, m) for m in metas]


def _portable(key):
    """``key`` without process-local object ids (a recipe key names a network or an unhashable argument by
    ``id``, which no two processes share): ``("module", "Conv2d", 1407...)`` becomes ``("module", "Conv2d")``."""
    if isinstance(key, tuple):
        if len(key) == 3 and key[0] == "module" and isinstance(key[2], int):
            return key[:2]
        if len(key) == 2 and key[0] in ("object", "metric") and isinstance(key[1], int):
            return key[:1]
        return tuple(_portable(k) for k in key)
    return key


def _check_fingerprints(header: torch.Tensor, description: list[str], group, world: int) -> None:
    hashes = header[:, 0].tolist()
    if len(set(hashes)) == 1:
        return
    # every rank sees the same hashes, so every rank takes this path together
    described: list = [None] * world
    dist.all_gather_object(described, description, group=group)
    lines = []
    base = described[0]
    for r in range(1, world):
        if hashes[r] == hashes[0]:
            continue
        other = described[r]
        i = next((k for k, (a, b) in enumerate(zip(base, other)) if a != b), min(len(base), len(other)))
        a = base[i] if i < len(base) else "<nothing>"
        b = other[i] if i < len(other) else "<nothing>"
        lines.append(f"  rank 0 has {a!r}\n  rank {r} has {b!r}")
    hint = ""
    if any(d[:1] != base[:1] for d in described[1:]):
        hint = ("\n(the ranks are in different reduce calls: e.g. one rank's compute() sync met another rank's "
                "per-step sync because the ranks saw different numbers of batches with dist_sync_on_step=True)")
    raise LayoutMismatchError("adapters.distributed.reduce: ranks disagree on the metric, its configuration "
                              "or its state layout, so nothing was reduced:\n" + "\n".join(lines) + hint)


def _check_chunk_shapes(units: list[_Unit], layouts: list) -> None:
    """The chunks of a ``"cat"`` field, on every rank, can be joined along one axis: one number of
    dimensions, and sizes that differ in one dimension at most (dim 0, or the row axis of a stacked
    state). Every rank sees every layout, so every rank raises together. Chunk fields inside a merge
    unit are checked when every rank's unit has one structure (else `merge` meets them)."""
    for i, u in enumerate(units):
        if u.kind == "cat":
            _check_field(u.path, [(r, shape) for r, layout in enumerate(layouts) for _, shape, _ in layout[i][1]])
        elif u.kind == "merge" and any(kind == "cat" for kind, _ in u.segments) and \
                all(layout[i][0] == layouts[0][i][0] for layout in layouts):
            fields: dict = {}
            for r, layout in enumerate(layouts):
                shapes, counts = iter(layout[i][1]), iter(layout[i][2])
                for kind, what in u.segments:
                    if kind == "leaves":
                        for _ in range(what):
                            next(shapes)
                    else:
                        fields.setdefault(what, []).extend((r, next(shapes)[1]) for _ in range(next(counts)))
            for path, shapes in fields.items():
                _check_field(path, shapes)


def _check_field(path: str, shapes: list) -> None:
    if len({len(shape) for _, shape in shapes}) > 1:
        raise LayoutMismatchError(
            f"adapters.distributed.reduce: the chunks of {path} differ in their number of dimensions "
            f"({_chunk_list(shapes)}), so they cannot be concatenated; every update must append chunks "
            "of one trailing shape")
    if not shapes:
        return
    varying = [d for d in range(len(shapes[0][1])) if len({shape[d] for _, shape in shapes}) > 1]
    if len(varying) > 1:
        raise LayoutMismatchError(
            f"adapters.distributed.reduce: the chunks of {path} differ in trailing shape "
            f"({_chunk_list(shapes)}: sizes differ in dims {varying}), so they cannot be concatenated; "
            "every update must append chunks of one trailing shape")


def _chunk_list(shapes: list) -> str:
    seen: dict = {}
    for r, shape in shapes:
        seen.setdefault(tuple(shape[1:]), (r, shape))
    return ", ".join(f"rank {r} has a chunk of shape {tuple(shape)}" for r, shape in list(seen.values())[:4])


# ---- 2. fast path: one async all_reduce per (op, dtype) bucket


class _FastPath:
    """Packs the sum/min/max leaves into one flat buffer per (op, dtype) and all-reduces them asynchronously."""

    def __init__(self, ctx: _Context, units: list[_Unit]):
        self.buckets: dict[tuple[str, torch.dtype], list] = {}  # -> [(slot, tensor)]
        self.nan_slots = []
        for i, u in enumerate(units):
            if u.kind != "reduce":
                continue
            for j, (leaf, folded) in enumerate(zip(u.leaves, u.folded)):
                if folded:
                    continue
                bucket = self.buckets.setdefault((u.tag, leaf.dtype), [])
                bucket.append(((i, j), leaf))
                if u.tag != "sum" and leaf.is_floating_point():
                    # backends' min/max need not propagate NaN as torch.minimum does: a flag per element
                    # rides in the same bucket (-1 under min, +1 under max where a rank holds a NaN)
                    self.nan_slots.append((i, j))
                    flag = leaf.isnan().to(leaf.dtype)
                    bucket.append((("nan", i, j), -flag if u.tag == "min" else flag))
        self.order = sorted(self.buckets, key=lambda k: (k[0], str(k[1])))
        self.flat = {k: torch.cat([x.detach().reshape(-1).to(ctx.comm) for _, x in self.buckets[k]])
                     for k in self.order}
        self.works = [dist.all_reduce(self.flat[k], op=_OPS[k[0]], group=ctx.group, async_op=True)
                      for k in self.order]

    def wait(self) -> dict:
        """``{(unit, leaf): all-reduced value}`` on each leaf's device."""
        for w in self.works:
            w.wait()
        reduced = {}
        for k in self.order:
            pos = 0
            for slot, x in self.buckets[k]:
                reduced[slot] = self.flat[k][pos:pos + x.numel()].reshape(x.shape).to(x.device)
                pos += x.numel()
        for i, j in self.nan_slots:
            reduced[(i, j)] = torch.where(reduced[("nan", i, j)] != 0, math.nan, reduced[(i, j)])
        return reduced


# ---- 3. gather path: every variable piece of every rank, as bytes, in one all_gather


class _Gathered:
    """Each rank's variable pieces (``"cat"`` chunks, untagged leaves, folded dtypes), cut out of one buffer."""

    def __init__(self, ctx: _Context, units: list[_Unit], layouts: list):
        self.ctx, self.units, self.layouts = ctx, units, layouts
        self.offsets, sizes = [], []
        for layout in layouts:
            off, offs = 0, []
            for _, pieces, _ in layout:
                for _, shape, wire in pieces:
                    offs.append(off)
                    off = _aligned(off + math.prod(shape) * wire.itemsize)
            self.offsets.append(offs)
            sizes.append(off)
        self.buffers = None
        if max(sizes) > 0:
            buf = torch.zeros(max(sizes), dtype=torch.uint8, device=ctx.comm)
            local = [p for u in units for p in u.pieces]
            wires = [wire for _, pieces, _ in layouts[ctx.rank] for _, _, wire in pieces]
            for off, p, wire in zip(self.offsets[ctx.rank], local, wires):
                flat = p.detach().reshape(-1)
                buf[off:off + flat.numel() * wire.itemsize].view(wire).copy_(flat)  # narrowed on the way
            self.buffers = _all_gather(buf, ctx.world, ctx.group)

    def pieces(self, r: int, i: int) -> list[torch.Tensor]:
        """Rank ``r``'s pieces of unit ``i`` (this rank's own, untouched)."""
        if r == self.ctx.rank:
            return self.units[i].pieces
        start = sum(len(p) for _, p, _ in self.layouts[r][:i])
        out = []
        for j, (dtype, shape, wire) in enumerate(self.layouts[r][i][1]):
            off = self.offsets[r][start + j]
            raw = self.buffers[r][off:off + math.prod(shape) * wire.itemsize]
            out.append(raw.view(wire).reshape(shape).to(dtype))  # widened back (a view when not narrowed)
        return out


# ---- 4. per unit: the reduced value (fast path, local fold, joined chunks) or every rank's subtree


def _unit_results(ctx: _Context, units: list[_Unit], layouts: list, reduced: dict, gathered: _Gathered) -> list:
    specs = _merge_specs(units, layouts, ctx.group, ctx.world)
    results: list[list] = []  # per unit: [the reduced value] or [every rank's subtree]
    for i, u in enumerate(units):
        if u.kind == "reduce":
            results.append([_reduced_unit(ctx, u, i, reduced, gathered)])
        elif u.kind == "cat":
            device = u.pieces[0].device if u.pieces else ctx.default_device
            results.append([tuple(p.to(device) for r in range(ctx.world) for p in gathered.pieces(r, i))])
        else:
            results.append([_rank_subtree(ctx, u, i, r, gathered, specs) for r in range(ctx.world)])
    return results


def _reduced_unit(ctx: _Context, u: _Unit, i: int, reduced: dict, gathered: _Gathered):
    leaves, folded_pos = [], 0
    for j, (leaf, folded) in enumerate(zip(u.leaves, u.folded)):
        if not folded:
            leaves.append(reduced[(i, j)])
            continue
        vals = [gathered.pieces(r, i)[folded_pos].to(leaf.device) for r in range(ctx.world)]
        folded_pos += 1
        acc = vals[0]
        for v in vals[1:]:
            acc = _FOLD[u.tag](acc, v)
        leaves.append(acc)
    return pytree.tree_unflatten(leaves, u.spec)


def _rank_subtree(ctx: _Context, u: _Unit, i: int, r: int, gathered: _Gathered, specs: Optional[list]):
    if r == ctx.rank:
        return u.node
    vals = gathered.pieces(r, i)
    if specs is None:  # one structure on every rank, up to the lengths of its chunk tuples
        devices = [p.device for p in u.pieces]
        if len(devices) != len(vals):
            devices = [ctx.default_device] * len(vals)
        return _rebuild(u.tag, u.node, iter([v.to(d) for v, d in zip(vals, devices)]), iter(gathered.layouts[r][i][2]))
    devices = [leaf.device for leaf in u.leaves]
    if len(devices) != len(vals):
        devices = [ctx.default_device] * len(vals)
    return pytree.tree_unflatten([v.to(d) for v, d in zip(vals, devices)], specs[r][i])


def _assemble(metric: Metric, state, results: list, world: int):
    """The reduced state: reduced units in rank 0's slot, identities elsewhere, folded by ``merge``."""
    kinds: list[str] = []
    _map_units(metric.reductions, state, lambda kind, *_: kinds.append(kind))

    def build(r: int):
        it = iter(range(len(results)))

        def visit(kind, tag, node, path):
            i = next(it)
            if kind == "merge":
                return results[i][r]
            if r == 0:
                return results[i][0]
            if kind == "cat":
                return ()
            return pytree.tree_map(lambda x: _identity(tag, x), results[i][0])

        return _map_units(metric.reductions, state, visit)

    if "merge" not in kinds:
        return build(0)
    return state_lib.fold(metric.merge, [build(r) for r in range(world)])


def _identity(tag: str, like: torch.Tensor) -> torch.Tensor:
    if tag == "sum":
        return torch.zeros_like(like)
    if like.dtype == torch.bool:
        return torch.full_like(like, tag == "min")
    if like.is_floating_point():
        return torch.full_like(like, math.inf if tag == "min" else -math.inf)
    info = torch.iinfo(like.dtype)
    return torch.full_like(like, info.max if tag == "min" else info.min)


def _merge_specs(units: list[_Unit], layouts, group, world: int) -> Optional[list]:
    """``None`` when every merge unit has one structure on every rank (up to its chunk counts, which the
    header carries); else every rank's tree specs, exchanged with ``all_gather_object``."""
    same = all(layouts[r][i][0] == layouts[0][i][0] for r in range(world) for i, u in enumerate(units)
               if u.kind == "merge")
    if same:
        return None
    specs: list = [None] * world
    dist.all_gather_object(specs, [u.spec for u in units], group=group)
    return specs


GATHER_PIECE_BYTES = 32 * 2**20


def _all_gather(t: torch.Tensor, world: int, group) -> list[torch.Tensor]:
    """Every rank's ``t``; a large buffer goes in pieces of `GATHER_PIECE_BYTES` (gloo's all-gather of one
    tensor of hundreds of MB slows down superlinearly: 381 MB took 3.5 s, in 32 MB pieces well under 1 s)."""
    out = [torch.empty_like(t) for _ in range(world)]
    step = max(GATHER_PIECE_BYTES // max(t.element_size(), 1), 1)
    if t.dim() != 1 or t.numel() <= step:
        dist.all_gather(out, t, group=group)
        return out
    for a in range(0, t.numel(), step):
        dist.all_gather([o[a:a + step] for o in out], t[a:a + step], group=group)
    return out


def finalize(metric: Metric, state, group=None):
    """The metric's value over every rank's data, on every rank, without gathering the rows on one rank.

    Retrieval members (any aggregation) route their rows to the rank owning each query; exact binary
    AUROC (``max_fpr=None``), binary average precision, Spearman and Kendall run distributed sample sorts
    (docs/scaling.md); a collection finalizes each member by its path. Each rank then holds about its own
    share of the rows. Other metrics take
    ``metric.finalize(reduce(metric, state, group))``: the gather path, O(1) for sum / min / max states
    (`shardable` tells which). The value equals the one-process value (floats up to summation order).
    Without a process group (or one rank) it is ``metric.finalize(state)``. Every rank must call it.

    Example::

        >>> value = adapters.distributed.finalize(fmetrics.retrieval_normalized_dcg(top_k=10), local_state)
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size(group) == 1:
        return metric.finalize(reduce(metric, state, group))
    return _shard.finalize(metric, state, group, reduce)


def shardable(metric: Metric) -> bool:
    """Whether `finalize` shards ``metric`` (``False``: it reduces with the gather path, then finalizes)."""
    return _shard.shardable(metric)


# ---------------------------------------------------------------- the sampler


class EvalSampler(torch.utils.data.Sampler):
    """Shards a map-style dataset across ranks with no padding and no duplicates.

    `torch.utils.data.DistributedSampler` makes every shard the same length by
    repeating samples, so the repeated samples count twice in every metric.
    Evaluation reduces the metric state once at the end, so uneven shards
    cost nothing: this sampler gives rank ``r`` either the contiguous block
    ``[r * n // R, (r + 1) * n // R)`` or (``strided=True``) the indices
    ``r, r + R, r + 2R, ...``. Shard sizes differ by at most one.

    ``num_replicas`` / ``rank`` default to the initialized process group's,
    resolved when the sampler is iterated (one process without a group: the
    whole dataset). ``set_epoch`` exists for trainer compatibility and does
    nothing (the order is fixed).

    Example::

        >>> loader = DataLoader(dataset, batch_size=64, sampler=EvalSampler(dataset))
    """

    def __init__(self, dataset, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 strided: bool = False):
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.strided = strided
        self.epoch = 0
        if num_replicas is not None and (not isinstance(num_replicas, int) or num_replicas < 1):
            raise ValueError(f"EvalSampler: argument `num_replicas` expected a positive int, got {num_replicas!r}")
        if rank is not None and (not isinstance(rank, int) or rank < 0):
            raise ValueError(f"EvalSampler: argument `rank` expected a non-negative int, got {rank!r}")

    def _resolve(self) -> tuple[int, int]:
        grouped = dist.is_available() and dist.is_initialized()
        replicas = self.num_replicas if self.num_replicas is not None else (
            dist.get_world_size() if grouped else 1)
        rank = self.rank if self.rank is not None else (dist.get_rank() if grouped else 0)
        if rank >= replicas:
            raise ValueError(f"EvalSampler: argument `rank` expected a value in [0, {replicas}), got {rank}")
        return replicas, rank

    def _indices(self) -> range:
        replicas, rank = self._resolve()
        n = len(self.dataset)
        if self.strided:
            return range(rank, n, replicas)
        return range(rank * n // replicas, (rank + 1) * n // replicas)

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices())

    def __len__(self) -> int:
        return len(self._indices())

    def set_epoch(self, epoch: int) -> None:
        """Kept for trainers that call it; the shards do not depend on the epoch."""
        self.epoch = epoch
