"""`Ranking`: a retrieval state's rows grouped by query and ranked by score, computed once.

Rows are ordered by (query id ascending, score descending, relevant last).
Usually each row becomes one int64 key (query id, an order-preserving image
of the float32 score, the non-negative integer target) and only the keys are
sorted: rows with equal keys are interchangeable, and every per-row quantity
is decoded from the sorted keys. Otherwise one stable sort per key
(`sort_rows`) gives the row order. Per-query quantities are segment sums over
that order (differences of a cumulative sum), so nothing loops over queries.
`rank(state, ignore_index)` builds it; the retrieval family's shared step
(`fmetrics.Family`) calls it once per state, so the retrieval metrics of one
`fmetrics.collection` finalize over one grouping.

Ties (equal scores within a query) are broken pessimistically: the sort puts
a tie's non-relevant rows first, so a constant score never earns credit. The
rows of a tie also form a *tie group* (`tie_starts`): NDCG averages
gains over it (torchmetrics' rule) and AUROC gives tied pairs half credit.
"""
from __future__ import annotations

from functools import cached_property
from typing import Optional

import numpy as np
import torch

from fmetrics import _keys
from fmetrics.retrieval._state import RetrievalState
from fmetrics.state import cat_chunks

def sort_rows(values: torch.Tensor, groups: torch.Tensor, last: Optional[torch.Tensor] = None):
    """Rows ordered by (group ascending, value descending), rows flagged ``last`` after the others of a tie.

    Returns ``(order, sorted group keys, sorted tie keys, sorted values > 0, sorted last)``;
    group keys are equal for equal groups, and equal tie keys within a group
    mean equal values. Float32-exact values and a group range under 2^30 take
    one stable int64 sort of a packed key
    ``group << 33 | descending value bits << 1 | last`` (a radix sort on CPU);
    anything else a stable sort per key. The order within a tie is otherwise
    unspecified.
    """
    n = values.shape[0]
    flag = torch.zeros_like(groups) if last is None else last.to(torch.int64)
    if n and _keys.float32_exact(values):
        low, high = int(groups.min()), int(groups.max())
        if high - low < (1 << 30):
            packed = _keys.pack([(groups - low, None), (_keys.descending32(values), 32), (flag, 1)])
            packed, order = torch.sort(packed, stable=True)
            tie_key = _keys.field(packed, 1)
            retrieved = _keys.field(tie_key, 0, 32) < _keys.DESCENDING_ZERO
            return order, _keys.field(packed, 33), tie_key, retrieved, _keys.field(packed, 0, 1) == 1
    key = _keys.ascending64(values)
    order = torch.sort(flag, stable=True).indices
    order = order[torch.sort(~key[order], stable=True).indices]
    order = order[torch.sort(groups[order], stable=True).indices]
    tie_key = key[order]
    return order, groups[order], tie_key, tie_key > 0, flag[order] == 1


_BLOCK = 1 << 16  # rows per block of a blockwise pass (cache-sized temporaries)


def _on_host(x: torch.Tensor) -> bool:
    """Whether ``x`` is on the CPU, where numpy's kernels replace some torch ones (measured faster there)."""
    return x.device.type == "cpu"


def positions(mask: torch.Tensor) -> torch.Tensor:
    """The positions where ``mask`` holds (numpy's ``flatnonzero`` on CPU: ~5x torch's ``nonzero`` there)."""
    if _on_host(mask):
        return torch.from_numpy(np.flatnonzero(mask.numpy()))
    return torch.nonzero(mask).reshape(-1)


def segment_sum(x: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """Sums of ``x`` over the contiguous segments beginning at ``starts``."""
    c = torch.cumsum(x, 0)
    ends = torch.cat([starts[1:], starts.new_tensor([x.shape[0]])])[: starts.shape[0]]
    before = torch.where(starts > 0, c[(starts - 1).clamp_min(0)], torch.zeros_like(c[:1]))
    return c[ends - 1] - before


def _target_bits(target: tuple, binary: bool) -> Optional[int]:
    """Bits holding every target as an integer (1 when known binary), or None if some is fractional.

    Targets are non-negative here: the shared step raised for any other before ranking.
    """
    if binary:
        return 1
    high = 0
    for t in target:
        if t.numel() == 0:
            continue
        if t.dtype == torch.bool:
            high = max(high, 1)
            continue
        top = float(t.max())
        if t.is_floating_point() and not bool((t == t.trunc()).all()):
            return None
        high = max(high, int(top))
    return max(high.bit_length(), 1)


def _sorted_keys(preds: tuple, target: tuple, indexes: tuple, low: int, high: int, bits: int) -> torch.Tensor:
    """The `_packed_keys` sorted: on the host, with at least `fmetrics._keys.BUCKET_ROWS` rows and query ids
    spanning 16 bits or more, by sample sort over query ranges (`_bucket_sorted`), else packed then sorted."""
    n = sum(p.shape[0] for p in preds)
    spare = (high - low).bit_length() - 16  # query bits below the 16-bit prefix
    if n >= _keys.BUCKET_ROWS and spare >= 0 and _on_host(indexes[0]):
        return _bucket_sorted(preds, target, indexes, low, bits, spare)
    return _sort_values(_packed_keys(preds, target, indexes, low, bits))


def _bucket_sorted(preds: tuple, target: tuple, indexes: tuple, low: int, bits: int, spare: int) -> torch.Tensor:
    """`_sorted_keys` by `fmetrics._keys.SampleSort`: a key's prefix is the top 16 bits of its query offset
    (counted from the query ids alone), each chunk's keys are packed into a scratch buffer and placed."""
    n = sum(p.shape[0] for p in preds)
    step = max(n // _keys.SAMPLE, 1)
    buckets = _keys.SampleSort(np.concatenate([(q.numpy()[::step] - low) >> spare for q in indexes]))
    for q in indexes:
        for s in range(0, q.shape[0], _SAMPLE_BLOCK):
            buckets.count((q.numpy()[s: s + _SAMPLE_BLOCK] - low) >> spare)
    out, scratch = np.empty(n, dtype=np.int64), np.empty(_SAMPLE_BLOCK, dtype=np.int64)
    for p, t, q in zip(preds, target, indexes):
        p, t, q = p.float().numpy(), t.numpy(), q.numpy()
        for s in range(0, p.shape[0], _SAMPLE_BLOCK):  # cache-sized blocks
            part = scratch[:p[s: s + _SAMPLE_BLOCK].shape[0]]
            _pack_rows(part, p[s: s + _SAMPLE_BLOCK], t[s: s + _SAMPLE_BLOCK], q[s: s + _SAMPLE_BLOCK], low, bits)
            buckets.place(out, part, part >> (32 + bits + spare))
    return torch.from_numpy(buckets.sort(out))


_SAMPLE_BLOCK = 1 << 15  # rows per block of the sample sort's passes


def _packed_keys(preds: tuple, target: tuple, indexes: tuple, low: int, bits: int) -> torch.Tensor:
    """``(query - low) << (32 + bits) | descending32(score) << bits | target``, one int64 per row (`fmetrics._keys`).

    Written chunk by chunk into one buffer: the concatenation and the packing
    are one pass over cache-sized pieces (in numpy on CPU, whose per-call
    overhead is a fraction of torch's: ~2x faster for 100 chunks of 10^4 rows).
    """
    n = sum(p.shape[0] for p in preds)
    out = torch.empty(n, dtype=torch.int64, device=indexes[0].device)
    at = 0
    for p, t, q in zip(preds, target, indexes):
        part = out[at: at + p.shape[0]]
        if _on_host(part):
            part, p, t, q = part.numpy(), p.float().numpy(), t.numpy(), q.numpy()
        _pack_rows(part, p, t, q, low, bits)
        at += p.shape[0]
    return out


def _pack_rows(out, p, t, q, low: int, bits: int):
    """Writes the keys ``(q - low) << (32 + bits) | descending32(p) << bits | t`` of some rows into ``out``."""
    return _keys.pack_into(out, [(q - low, None), (_keys.descending32(p), 32), (_as_int64(t), bits)])


def _as_int64(t):
    return t.astype(np.int64, copy=False) if isinstance(t, np.ndarray) else t.to(torch.int64)


def _sort_values(key: torch.Tensor) -> torch.Tensor:
    """``key`` sorted ascending (values only; equal keys are interchangeable rows).

    On CPU numpy's sort, in place: no extra memory. ``torch.sort`` is faster
    there (torch 2.13, 1 thread: 2e7 int64 keys in 0.99 s against 1.37 s) but
    its index array and radix buffers add about 4x the keys' bytes, which would
    lift NDCG's finalize peak from 0.8x to 2x its state (docs/benchmarks.md).
    """
    if _on_host(key):
        key.numpy().sort()
        return key
    return torch.sort(key).values


def _new_rows(q: torch.Tensor) -> torch.Tensor:
    """bool per row of sorted ``q``: it differs from the previous row (row 0: True)."""
    new = torch.ones(q.shape[0], dtype=torch.bool, device=q.device)
    torch.ne(q[1:], q[:-1], out=new[1:])
    return new


def _scan(key: np.ndarray, bits: int):
    """One blockwise pass over sorted packed keys: ``(new_query, counts)``.

    ``new_query``: bool per row, its query field (above ``32 + bits``) differs
    from the previous row's (row 0: True). ``counts``: int64 rows per
    ``(query field, target)`` slot ``field << bits | target``, for fields
    ``0..last`` (None when that is over 4 slots per row). A block's queries are
    contiguous, so its histogram covers a short run of slots, added in place:
    cache-sized temporaries, no n-row copy of a field.
    """
    n, shift, levels = key.shape[0], 32 + bits, (1 << bits) - 1
    new_query = np.ones(n, dtype=bool)
    size = ((int(key[-1]) >> shift) + 1) << bits if n else 0
    counts = np.zeros(size, dtype=np.int64) if size <= 4 * max(n, 1) else None
    for at in range(0, n, _BLOCK):
        k = key[at: at + _BLOCK]
        field = k >> shift
        np.not_equal(field[1:], field[:-1], out=new_query[at + 1: at + k.shape[0]])
        if at:
            new_query[at] = field[0] != int(key[at - 1]) >> shift
        if counts is not None:
            field <<= bits
            base = int(field[0])
            field |= k & levels
            field -= base
            part = np.bincount(field)
            counts[base: base + part.shape[0]] += part
    return torch.from_numpy(new_query), counts


class Ranking:
    """Rows sorted by (query, score descending), ties broken pessimistically, with per-row and per-query indices.

    Built from a state's chunks (``preds``, ``target``, ``indexes``: tuples);
    ``binary``: every target is known to be 0 or 1. When the scores are
    float32-exact, the targets non-negative integers and the query ids narrow
    enough, each row is one int64 key (query, descending score, target) and
    only the keys are sorted: every per-row quantity is decoded from them.
    Otherwise one stable sort per key (`sort_rows`) gives the row order.

    Attributes (rows are in ranked order; per-row ones are computed on first use):
      relevant: per row, target > 0; retrieved: score > 0; gains: the target, float64.
      gain_levels: every gain is an integer in [0, gain_levels] (the packed keys hold them), or None.
      query: per row, the position of its query (0..num_queries-1).
      rank: per row, its 0-based rank within its query.
      starts / sizes: per query (ascending query id), its first row and row count.
      new_tie / tie_starts: per row, it starts a tie group (rows of a query with equal scores);
        the first row of each tie group.
    """

    def __init__(self, preds: tuple, target: tuple, indexes: tuple, binary: bool):
        self.n = n = sum(p.shape[0] for p in preds)
        bits = _target_bits(target, binary) if n and all(_keys.float32_exact(p) for p in preds) else None
        if bits is not None:
            bounds = torch.stack([torch.stack(torch.aminmax(q)) for q in indexes if q.numel()])
            low, high = int(bounds[:, 0].min()), int(bounds[:, 1].max())
            if (high - low).bit_length() + 32 + bits > 63:
                bits = None
        if bits is not None:
            self._keyed(_sorted_keys(preds, target, indexes, low, high, bits), bits)
            return
        t = torch.cat(target)
        order, q, self._tie_key, self.retrieved, self.relevant = sort_rows(
            torch.cat(preds), torch.cat(indexes), last=t > 0)
        self.gains = t[order].to(torch.float64)
        self.gain_levels, self.packed = None, False
        self._grouped(_new_rows(q), -1)

    def _keyed(self, key: torch.Tensor, bits: int) -> None:
        """The ranking of sorted packed keys ``query << (32 + bits) | descending score << bits | target``."""
        self.n, self._key, self._bits = key.shape[0], key, bits
        self.gain_levels, self.packed = (1 << bits) - 1, True
        self._field_counts = None
        if _on_host(key):  # query starts and the (query, target) histogram in one blockwise pass
            new_query, self._field_counts = _scan(key.numpy(), bits)
        else:
            new_query = _new_rows(key >> (32 + bits))
        self._grouped(new_query, int(key[-1]) >> (32 + bits) if self.n else -1)

    def _grouped(self, new_query: torch.Tensor, last: int) -> None:
        """Query starts and sizes from the per-row flag ``new_query``; ``last``: the last row's query field."""
        self._new_query = new_query
        self.starts = positions(new_query)
        self.num_queries = self.starts.shape[0]
        self.sizes = torch.diff(self.starts, append=self.starts.new_tensor([self.n]))
        # dense query ids: the key's query field is the query's position (no cumsum; computed when used)
        self._dense = self.packed and self.n > 0 and last + 1 == self.num_queries

    def restricted(self, queries: torch.Tensor) -> "Ranking":
        """The ranking of the rows of ``queries`` (ascending query positions) alone; packed keys only."""
        size = self.sizes.index_select(0, queries)
        offset = self.starts.index_select(0, queries) - (torch.cumsum(size, 0) - size)
        rows = torch.arange(int(size.sum()), device=size.device) + torch.repeat_interleave(offset, size)
        sub = Ranking.__new__(Ranking)
        sub._keyed(self._key.index_select(0, rows), self._bits)
        return sub

    @cached_property
    def _tie_key(self) -> torch.Tensor:
        return self._key >> self._bits

    @cached_property
    def relevant(self) -> torch.Tensor:
        return (self._key & ((1 << self._bits) - 1)) != 0

    @cached_property
    def retrieved(self) -> torch.Tensor:  # the descending score bits < those of +0.0
        return (self._key & ((1 << (32 + self._bits)) - 1)) < _keys.DESCENDING_ZERO << self._bits

    @cached_property
    def gains(self) -> torch.Tensor:
        """Per row: the target as a float64 gain."""
        return (self._key & ((1 << self._bits) - 1)).to(torch.float64)

    @cached_property
    def query(self) -> torch.Tensor:
        if self._dense:
            return self._key >> (32 + self._bits)
        return torch.cumsum(self._new_query, 0).sub_(1)

    @cached_property
    def rank(self) -> torch.Tensor:
        # index_select: a 1-D gather ~4x faster than advanced indexing on CPU
        return torch.arange(self.n, device=self.starts.device).sub_(self.starts.index_select(0, self.query))

    @cached_property
    def new_tie(self) -> torch.Tensor:
        """Per row: it starts a tie group (rows of a query with equal scores); all True when nothing ties."""
        new_tie = self._new_query.clone()
        new_tie[1:] |= self._tie_key[1:] != self._tie_key[:-1]
        return new_tie

    @cached_property
    def tie_starts(self) -> torch.Tensor:
        """Per tie group: its first row."""
        return positions(self.new_tie)

    def per_query(self, x: torch.Tensor) -> torch.Tensor:
        """Per-query sums of a per-row quantity."""
        return segment_sum(x, self.starts)

    def hits(self, mask: torch.Tensor):
        """The rows where ``mask`` holds, as ``(query, rank, n)``: ``n`` counts them within their query from 1."""
        rows = positions(mask)
        query = self.query.index_select(0, rows)
        new = torch.ones_like(query, dtype=torch.bool)
        new[1:] = query[1:] != query[:-1]
        first = positions(new)
        n = torch.arange(1, rows.shape[0] + 1, device=rows.device) - first[torch.cumsum(new, 0) - 1]
        return query, rows - self.starts.index_select(0, query), n

    def scatter(self, query: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Per-query sums of values given for some rows (``query``: their queries)."""
        out = torch.zeros(self.num_queries, dtype=values.dtype, device=values.device)
        return out.index_add(0, query, values)

    @cached_property
    def level_counts(self) -> Optional[torch.Tensor]:
        """Per query and gain level ``0..gain_levels``: the row counts (int64, ``(num_queries, gain_levels + 1)``).

        One histogram over the packed keys' ``(query, target)`` fields; None without packed keys
        or when the histogram would be larger than 4 slots per row.
        """
        levels = self.gain_levels
        if not self.packed or self.num_queries * (levels + 1) > 4 * max(self.n, 1):
            return None
        bits, size = self._bits, self.num_queries * (levels + 1)
        if self._field_counts is not None:  # the host scan's histogram, by query field
            counts = torch.from_numpy(self._field_counts).reshape(-1, levels + 1)
            return counts if self._dense else counts.index_select(0, self._key.index_select(0, self.starts) >> (32 + bits))
        slot = (self.query << bits) | (self._key & levels)
        return torch.bincount(slot, minlength=size).reshape(-1, levels + 1)

    @cached_property
    def num_relevant(self) -> torch.Tensor:
        """Per query: rows with target > 0 (int64)."""
        counts = self.level_counts
        if counts is not None:
            return self.sizes - counts[:, 0]
        return self.per_query(self.relevant)  # cumsum of bool counts in int64

    def top(self, k: int):
        """The rows ranked ``< k`` within their query, query by query: ``(rows, query, rank)`` (O(queries * k))."""
        size = self.sizes.clamp(max=k)
        query = torch.repeat_interleave(torch.arange(self.num_queries, device=size.device), size)
        first = torch.cumsum(size, 0).sub_(size)
        rank = torch.arange(query.shape[0], device=size.device).sub_(first.index_select(0, query))
        return self.starts.index_select(0, query).add_(rank), query, rank

    def top_gains(self, weights: torch.Tensor, k: int):
        """``(total, tied)``: per query ``total = sum_{rank < k} gain * weights[rank]`` (float64 ``weights`` of
        length ``k + 1``, the last one 0), and the positions of the queries where one of those rows ties
        with the next row (there the order within the tie is arbitrary: the caller redoes them).

        On CPU with packed dense keys one blockwise pass over the queries' first ``k + 1`` sorted keys
        (cache-sized temporaries); elsewhere gathers over the ``O(queries * k)`` top rows.
        """
        if not (self.packed and self._dense and _on_host(self._key)):
            rows, query, rank = self.top(k)
            gain = self.gains_at(rows).mul_(weights.index_select(0, rank))
            total = torch.zeros(self.num_queries, dtype=torch.float64, device=gain.device)
            return total.index_add_(0, query, gain), torch.unique(query[self._ties_next(rows)])
        key, starts, sizes = self._key.numpy(), self.starts.numpy(), self.sizes.numpy()
        w, total, col = weights.numpy()[:k], np.empty(self.num_queries), np.arange(k + 1)
        step, tied = max(_BLOCK // (k + 1), 1), []  # queries per block: (step, k + 1) temporaries
        for at in range(0, self.num_queries, step):
            size = sizes[at: at + step, None]
            rows = starts[at: at + step, None] + col  # each query's first k + 1 rows (the last one: the row after)
            np.minimum(rows, self.n - 1, out=rows)
            part = key[rows]
            same = (part[:, :-1] ^ part[:, 1:]) >> self._bits == 0  # equal (query, score) with the next row
            same &= col[1:] < size
            tied.append(np.flatnonzero(same.any(1)) + at)
            gain = (part[:, :-1] & self.gain_levels).astype(np.float64)
            gain *= w
            gain[col[:-1] >= size] = 0.0
            np.sum(gain, axis=1, out=total[at: at + step])
        return torch.from_numpy(total), torch.from_numpy(np.concatenate(tied) if tied else np.empty(0, np.int64))

    def _ties_next(self, rows: torch.Tensor) -> torch.Tensor:
        """bool per row of ``rows``: it ties with the next row (same query, equal score)."""
        after = (rows + 1).clamp_(max=max(self.n - 1, 0))
        if self.packed:
            same = ((self._key.index_select(0, rows) ^ self._key.index_select(0, after)) >> self._bits) == 0
        else:
            same = self._tie_key.index_select(0, rows) == self._tie_key.index_select(0, after)
        return same & (rows + 1 < self.n)

    def gains_at(self, rows: torch.Tensor) -> torch.Tensor:
        """The float64 gains of ``rows``."""
        if self.packed:
            return (self._key.index_select(0, rows) & ((1 << self._bits) - 1)).to(torch.float64)
        return self.gains.index_select(0, rows)


def rank(state: RetrievalState, ignore_index: Optional[int]) -> Ranking:
    """The `Ranking` of a state's rows (rows whose target equals ``ignore_index`` dropped).

    Computed afresh on each call (no cache): the family's shared step calls it
    once per state, and a `fmetrics.collection` runs that step once for all
    its retrieval members.
    """
    device = state.bad_index.count.device
    preds, target, indexes = state.preds, state.target, state.indexes
    if ignore_index is not None or not preds:
        preds = cat_chunks(preds, torch.empty(0, device=device))
        target = cat_chunks(target, torch.empty(0, device=device))
        indexes = cat_chunks(indexes, torch.empty(0, dtype=torch.int64, device=device))
        if ignore_index is not None:
            keep = target != ignore_index
            preds, target, indexes = preds[keep], target[keep], indexes[keep]
        preds, target, indexes = (preds,), (target,), (indexes,)
    return Ranking(preds, target, indexes, binary=int(state.non_binary.count) == 0)
