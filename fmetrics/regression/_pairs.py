"""Ranking helpers of the rank correlations (`spearman_corrcoef`, `kendall_rank_corrcoef`).

Their state (the chunks of the data) is the family in `fmetrics.regression._paired`.
"""
from __future__ import annotations

import numpy as np
import torch

from fmetrics import _keys


def runs(sorted_x: torch.Tensor) -> torch.Tensor:
    """Bool ``(N, D)``: True where a run of equal values starts in each sorted column."""
    start = torch.ones_like(sorted_x, dtype=torch.bool)
    start[1:] = sorted_x[1:] != sorted_x[:-1]
    return start


def average_ranks(x: torch.Tensor) -> torch.Tensor:
    """Column-wise float64 ranks 1..N of ``(N, D)`` ``x``, ties sharing their average rank (SciPy's ``rankdata``).

    float32 CPU columns take `_packed_ranks` (one vectorized integer sort on the
    host); other inputs one stable torch sort on their device.
    """
    n, d = x.shape
    if x.dtype == torch.float32 and x.device.type == "cpu" and 0 < n < PACKED_ROWS:
        return torch.from_numpy(np.stack([_packed_ranks(c) for c in x.detach().numpy().T], 1))
    sorted_x, order = torch.sort(x, dim=0, stable=True)
    group = torch.cumsum(runs(sorted_x), 0) - 1 + torch.arange(d, device=x.device) * n  # unique per column
    pos = torch.arange(n, device=x.device, dtype=torch.float64)[:, None].expand(n, d).reshape(-1)
    flat = group.reshape(-1)
    first = torch.full((n * d,), float(n), dtype=torch.float64, device=x.device).scatter_reduce(
        0, flat, pos, "amin")
    last = torch.zeros(n * d, dtype=torch.float64, device=x.device).scatter_reduce(0, flat, pos, "amax")
    avg = ((first + last) / 2 + 1)[flat].reshape(n, d)
    return torch.empty_like(avg).scatter_(0, order, avg)


# ---------------------------------------------------------------- packed keys: float32 columns on the host
#
# A float32 column of n < PACKED_ROWS values sorts as int64 keys ``(ascending32(value) << 32) | row``
# (`sorted_keys`): the sorted keys give the order (low half) and the runs of equal values (high half)
# without an argsort. Ranks are kept doubled and centred, exact integers:
#
#     c = 2 r - (n + 1) = a + b - n        for a run of equal values at sorted positions [a, b)
#
# (0-based; its average rank is r = (a + 1 + b) / 2), so that sum c = 0 and, with T = sum (t^3 - t)
# over the runs of t equal values,
#
#     V = sum c^2 = (n^3 - n - T) / 3.

PACKED_ROWS = 1 << 31  # below this many rows the row fits the low 32 bits and c the high 32 (signed)
_ROW_BITS = 32
_ROW_MASK = (1 << _ROW_BITS) - 1
_BLOCK = 1 << 14  # positions per step of the block walks: int64 temporaries of 128 KiB stay in cache


def packable(xs: tuple, ys: tuple) -> bool:
    """Whether the chunks of both columns are float32 CPU tensors with fewer than `PACKED_ROWS` rows in all."""
    return (all(c.dtype == torch.float32 and c.device.type == "cpu" for c in xs + ys)
            and sum(c.shape[0] for c in xs) < PACKED_ROWS)


def sorted_keys(parts, n: int) -> np.ndarray:
    """Sorted int64 keys ``(ascending32(value) << 32) | row`` of the float32 1-d arrays ``parts`` (``n`` values
    in all; rows numbered through the parts).

    Written block by block into the one ``n``-long array (no ``n``-long
    temporary, no index array) and sorted in place by numpy's vectorized
    integer sort; from `fmetrics._keys.BUCKET_ROWS` values on, by sample
    sort (`_bucketed`: buckets by the value's top 16 bits).
    ``-0.0 == +0.0``; NaN sorts last (`fmetrics._keys.ascending32`).
    """
    keys = np.empty(n, dtype=np.int64)
    if n and n >= _keys.BUCKET_ROWS:
        return _bucketed(parts, keys)
    for at, block in _blocks(parts):
        _pack_rows(keys[at: at + block.shape[0]], block, at)
    keys.sort()
    return keys


def _blocks(parts):
    """``(first row, block)`` over the parts, in blocks of at most `_BLOCK` values."""
    at = 0
    for part in parts:
        for s in range(0, part.shape[0], _BLOCK):
            block = part[s: s + _BLOCK]
            yield at, block
            at += block.shape[0]


def _pack_rows(out: np.ndarray, block: np.ndarray, at: int) -> np.ndarray:
    return _keys.pack_into(out, [(_keys.ascending32(block), None), (np.arange(at, at + block.shape[0]), _ROW_BITS)])


def _bucketed(parts, keys: np.ndarray) -> np.ndarray:
    """`sorted_keys` by `fmetrics._keys.SampleSort`, bucketed by the top 16 bits of the values' 32-bit images."""
    step = max(keys.shape[0] // _keys.SAMPLE, 1)
    buckets = _keys.SampleSort(np.concatenate([_prefix(_keys.ascending32(p[::step])) for p in parts]))
    for _, block in _blocks(parts):
        buckets.count(_prefix(_keys.ascending32(block)))
    scratch = np.empty(_BLOCK, dtype=np.int64)
    for at, block in _blocks(parts):
        k = _pack_rows(scratch[:block.shape[0]], block, at)
        buckets.place(keys, k, _prefix(k >> _ROW_BITS))
    return buckets.sort(keys)


def _prefix(image: np.ndarray) -> np.ndarray:
    """The top 16 bits of 32-bit value images in ``[-2**31, 2**31)``, as ``0 .. 2**16 - 1`` (order kept)."""
    return (image >> 16) + (1 << 15)


def walk_ranks(keys: np.ndarray, emit) -> int:
    """Calls ``emit(rows, c)`` for consecutive pieces (at most `_BLOCK` long) of the `sorted_keys` ``keys``, with
    ``rows`` their rows and ``c`` their centred doubled ranks ``a + b - n`` (int64); returns
    ``T = sum (t^3 - t)`` over the runs of ``t`` equal values (a Python int, exact).

    One pass in blocks: a run still open at a block's end is emitted when a
    later block closes it (its rows are read again from ``keys``).
    """
    n = keys.shape[0]
    ties = 0
    start = 0  # first position of the open run
    last = None  # value field at the end of the previous block
    for s in range(0, n, _BLOCK):
        values = keys[s: s + _BLOCK] >> _ROW_BITS
        new = np.flatnonzero(values[1:] != values[:-1]) + (s + 1)  # runs starting in this block
        if s and values[0] != last:
            new = np.concatenate(([s], new))
        last = values[-1]
        if not new.size:
            continue
        bounds = np.concatenate(([start], new))  # runs [bounds[i], bounds[i + 1]) close here
        _emit_run(keys, start, s, start + int(new[0]) - n, emit)  # the open run's part in earlier blocks
        lengths = np.diff(np.concatenate(([s], new)))  # ... and the closed runs' parts in this block
        emit(keys[s: new[-1]] & _ROW_MASK, np.repeat(bounds[:-1] + bounds[1:] - n, lengths))
        t = np.diff(bounds)
        head = int(t[0])  # the open run: any length (Python int); the others lie in this block (int64 exact)
        ties += head ** 3 - head + int(((t[1:] - 1) * t[1:] * (t[1:] + 1)).sum())
        start = int(new[-1])
    _emit_run(keys, start, n, start, emit)  # the last run [start, n): c = start + n - n
    return ties + (n - start) ** 3 - (n - start)


def _emit_run(keys: np.ndarray, a: int, b: int, c: int, emit) -> None:
    """``emit`` the positions ``[a, b)`` of one run (rank ``c``) in pieces of at most `_BLOCK`."""
    for s in range(a, b, _BLOCK):
        rows = keys[s: min(s + _BLOCK, b)] & _ROW_MASK
        emit(rows, np.full(rows.shape[0], c, dtype=np.int64))


def rank_comoments(xs, ys) -> tuple:
    """Exact ``(C, Vx, Vy)`` (Python ints) of the centred doubled ranks of two float32 columns, given as parts.

    ``C = sum c_x c_y``, ``V = (n^3 - n - T) / 3`` (see above); Spearman's
    ``rho = C / sqrt(Vx Vy)``. Memory: the sorted keys of one column (8 bytes
    a row) and ``c_x`` as int32 by row (4 bytes a row), besides block
    temporaries. ``c_x`` is scattered from ``x``'s sorted keys, then ``y``'s
    walk gathers it; each block's products ``p`` (|p| < n^2 < 2**62) are
    summed exactly as ``sum (p >> 32) * 2**32 + sum (p & (2**32 - 1))``.
    """
    n = sum(p.shape[0] for p in xs)
    cx = np.empty(n, dtype=np.int32)

    def scatter(rows, c):
        cx[rows] = c

    tx = walk_ranks(sorted_keys(xs, n), scatter)  # x's keys are freed before y's are built
    high = low = 0  # sums of the high and low halves of the products

    def dot(rows, c):
        nonlocal high, low
        p = cx[rows] * c
        low += int((p & _ROW_MASK).sum())
        high += int(np.right_shift(p, _ROW_BITS, out=p).sum())

    ty = walk_ranks(sorted_keys(ys, n), dot)
    return (high << _ROW_BITS) + low, (n ** 3 - n - tx) // 3, (n ** 3 - n - ty) // 3


def _packed_ranks(column: np.ndarray) -> np.ndarray:
    """float64 average ranks ``(c + n + 1) / 2`` of a float32 column from its `sorted_keys` (one integer sort)."""
    n = column.shape[0]
    ranks = np.empty(n)

    def put(rows, c):
        ranks[rows] = (c + (n + 1)) / 2

    walk_ranks(sorted_keys([column], n), put)
    return ranks
