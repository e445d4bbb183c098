"""Sort keys: integers that order like floats, and several fields packed into one int64.

Sorting integer keys is faster than sorting floats with an index array
(numpy's vectorized integer sort, torch's radix sort), and a key that packs a
group id, a score and a label sorts by all three at once and carries the
label along (no argsort, no gather). Every metric that sorts (exact curves,
rank correlations, retrieval rankings) builds its keys here.

Float keys (IEEE-754 bits with the magnitude bits of negative numbers
flipped, so the integer order is the float order):

* `ascending32` -- float32 (float16/bfloat16 exactly; wider floats rounded)
  to int64 keys in ``[-2**31, 2**31)``; `float32_from_key` inverts it;
* `descending32` -- keys in ``[0, 2**32)`` in the *reverse* order
  (``descending32 = MAX32 - ascending32``); scores ``> 0`` have keys
  ``< DESCENDING_ZERO``;
* `ascending64` -- float64 to int64 keys (any int64); `float64_from_key` inverts it;
* `float_key` -- `ascending64` for float64, `ascending32` for the narrower
  floats (exact for them); `float_from_key` inverts it.

In all of them ``-0.0`` and ``+0.0`` get one key, ``-inf``/``+inf`` the
extreme keys of the finite-and-infinite range, and every NaN one key above
``+inf`` (below every other key with `descending32`): NaN sorts last in
ascending order, as in ``torch.sort``.

Packed keys (`pack`, `pack_into`, `field`): fields from the most to the least
significant, each non-negative and narrower than its width (the first field
may be any int64 that fits in the bits left), packed by shift-and-or; the
lexicographic order of the fields is the integer order of the key.
`sort_flagged` sorts keys carrying a 0/1 flag by one sort of
``(key - min) * 2 + flag``, in 32 bits when the keys' span allows;
`sort_flagged_floats` does it for float keys (on a GPU in as few passes as
the data allow).

Every function takes a torch tensor or a numpy array and returns the same
kind; on CPU numpy's kernels are cheaper per call, so callers may pass
``tensor.numpy()`` views. Keys are only computed in ``finalize`` paths.
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence, Tuple, Union

import numpy as np
import torch

__all__ = [
    "MAX32",
    "DESCENDING_ZERO",
    "ascending32",
    "descending32",
    "float32_from_key",
    "ascending64",
    "float64_from_key",
    "float_key",
    "float_from_key",
    "float32_exact",
    "sort_flagged",
    "sort_flagged_floats",
    "fits",
    "pack",
    "pack_into",
    "field",
]

Array = Union[torch.Tensor, np.ndarray]

MAX32 = (1 << 31) - 1  # 0x7FFFFFFF: the magnitude bits of a float32
_MAX64 = (1 << 63) - 1
DESCENDING_ZERO = MAX32  # descending32(+0.0): keys below it are scores > 0
_NAN32 = 0x7FC00000  # the bits (and key) of float32 NaN: above +inf (0x7F800000)
_NAN64 = 0x7FF8000000000000


def _is_numpy(x: Array) -> bool:
    return isinstance(x, np.ndarray)


def _float32(x: Array) -> Array:
    if _is_numpy(x):
        return x if x.dtype == np.float32 else x.astype(np.float32)
    return x if x.dtype == torch.float32 else x.to(torch.float32)


def _canonical_nan(x: Array, nan) -> Array:
    """``x`` with every NaN replaced by the positive quiet NaN (one key for all NaNs, above ``+inf``)."""
    if _is_numpy(x):
        bad = np.isnan(x)
        return np.where(bad, x.dtype.type(nan), x) if bad.any() else x
    return torch.where(torch.isnan(x), torch.full_like(x, nan), x)


_BLOCK = 1 << 16  # numpy inputs longer than this are keyed block by block (bounded temporaries)


def _blockwise(fn, x: np.ndarray) -> np.ndarray:
    """``fn(x)`` (an int64 array of ``x``'s shape) computed over blocks of ``x``: the temporaries stay cache-sized."""
    flat = np.ravel(x)
    out = np.empty(flat.shape, dtype=np.int64)
    for at in range(0, flat.size, _BLOCK):
        out[at: at + _BLOCK] = fn(flat[at: at + _BLOCK])
    return out.reshape(np.shape(x))


def ascending32(x: Array) -> Array:
    """int64 keys in ``[-2**31, 2**31)`` ordered like the float32 values of ``x``.

    ``-0.0`` and ``+0.0`` share a key; every NaN has the one key ``0x7FC00000``,
    above ``+inf``. float16 and bfloat16 convert exactly; float64 is rounded to
    float32 first (see `float32_exact`).
    """
    if _is_numpy(x) and x.size > _BLOCK:
        return _blockwise(ascending32, x)
    x = _canonical_nan(_float32(x), float("nan"))
    if _is_numpy(x):
        bits = (x + np.float32(0.0)).view(np.int32)  # + 0 turns -0.0 into +0.0
        return (bits ^ ((bits >> 31) & MAX32)).astype(np.int64)
    bits = (x + 0.0).view(torch.int32)
    return (bits ^ ((bits >> 31) & MAX32)).to(torch.int64)


def descending32(x: Array) -> Array:
    """int64 keys in ``[0, 2**32)`` in the reverse order of the float32 values of ``x`` (``MAX32 - ascending32``).

    ``+0.0`` and ``-0.0`` have the key `DESCENDING_ZERO`; larger scores smaller
    keys; NaN the smallest key of all.
    """
    if _is_numpy(x) and x.size > _BLOCK:
        return _blockwise(descending32, x)
    x = _canonical_nan(_float32(x), float("nan"))
    if _is_numpy(x):
        bits = (x + np.float32(0.0)).view(np.int32)
        # bits >= 0: MAX32 - bits (flip the magnitude); bits < 0: the bits read as unsigned
        return (bits ^ ((~bits >> 31) & MAX32)).view(np.uint32).astype(np.int64)
    bits = (x + 0.0).view(torch.int32)
    return (bits ^ ((~bits >> 31) & MAX32)).to(torch.int64) & 0xFFFFFFFF


def float32_from_key(key: Array) -> Array:
    """The float32 values of `ascending32` keys (``+0.0`` for the zero key; NaN for the NaN key)."""
    if _is_numpy(key):
        k = key.astype(np.int32)
        return (k ^ ((k >> 31) & MAX32)).view(np.float32)
    k = key.to(torch.int32)
    return (k ^ ((k >> 31) & MAX32)).view(torch.float32)


def ascending64(x: Array) -> Array:
    """int64 keys ordered like the float64 values of ``x`` (``-0.0 == +0.0``; NaN one key above ``+inf``)."""
    if _is_numpy(x):
        x = _canonical_nan(x.astype(np.float64, copy=False), float("nan"))
        bits = (x + 0.0).view(np.int64)
        return bits ^ ((bits >> 63) & _MAX64)
    x = _canonical_nan(x.to(torch.float64), float("nan"))
    bits = (x + 0.0).view(torch.int64)
    return bits ^ ((bits >> 63) & _MAX64)


def float64_from_key(key: Array) -> Array:
    """The float64 values of `ascending64` keys (``+0.0`` for the zero key; NaN for the NaN key)."""
    if _is_numpy(key):
        k = key.astype(np.int64, copy=False)
        return (k ^ ((k >> 63) & _MAX64)).view(np.float64)
    k = key.to(torch.int64)
    return (k ^ ((k >> 63) & _MAX64)).view(torch.float64)


def _is_float64(x: Array) -> bool:
    return x.dtype == (np.float64 if _is_numpy(x) else torch.float64)


def float_key(x: Array) -> Array:
    """int64 keys ordered like the float values of ``x``, exactly for every float dtype.

    `ascending64` for float64; `ascending32` for float32, float16 and bfloat16
    (their float32 images are exact). ``-0.0 == +0.0``; NaN one key, last.
    """
    return ascending64(x) if _is_float64(x) else ascending32(x)


def float_from_key(key: Array, wide: bool) -> Array:
    """The values of `float_key` keys: float64 when ``wide`` (keys of float64), else float32."""
    return float64_from_key(key) if wide else float32_from_key(key)


def float32_exact(x: torch.Tensor) -> bool:
    """Whether ``x``'s float32 image keeps every value (float16/bfloat16/float32, or float64 exactly representable).

    Then `ascending32` / `descending32` keys order ``x`` exactly. A host read for float64.
    """
    if x.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return True
    if x.dtype != torch.float64:
        return False
    image = x.to(torch.float32).to(torch.float64)
    return bool(((image == x) | (torch.isnan(x) & torch.isnan(image))).all())


def fits(*widths: int) -> bool:
    """Whether fields of these bit widths pack into one non-negative int64 (``sum(widths) <= 63``)."""
    return sum(widths) <= 63


def pack_into(out: Array, fields: Sequence[Tuple[Array, int]]) -> Array:
    """Writes ``fields[0] << (w1 + w2 + ...) | fields[1] << (w2 + ...) | ...`` into the int64 ``out``.

    ``fields``: ``(values, width)`` pairs from the most significant; every
    field but the first must be non-negative and ``< 2**width`` (the first
    field's width is not used). In place, one pass per field over ``out``;
    ``out`` may be the first field itself (a key array the caller owns).
    """
    (first, _), rest = fields[0], fields[1:]
    if first is not out:
        out[...] = first
    for values, width in rest:
        out <<= width
        out |= values
    return out


def pack(fields: Sequence[Tuple[Array, int]]) -> Array:
    """`pack_into` a new int64 array (torch tensor or numpy array, like the first field)."""
    first = fields[0][0]
    if _is_numpy(first):
        out = np.empty(np.shape(first), dtype=np.int64)
    else:
        out = torch.empty(first.shape, dtype=torch.int64, device=first.device)
    return pack_into(out, fields)


def field(key: Array, shift: int, width: int | None = None) -> Array:
    """The field of a packed ``key`` that starts ``shift`` bits up: ``(key >> shift) & (2**width - 1)``.

    ``width=None`` takes every bit above ``shift`` (the first field, sign included).
    """
    high = key >> shift if shift else key
    return high if width is None else high & ((1 << width) - 1)


_SPAN32 = 1 << 30  # keys spanning less than this pack with a flag bit into int32
_SPAN64 = 1 << 62  # ... into non-negative int64


def sort_flagged(key: Array, flag: Array, bounds: Tuple[int, int] | None = None) -> Tuple[Array, Array, int]:
    """``(keys, flags, offset)``: the integer ``key`` in increasing order, as ``keys + offset``, carrying the 0/1
    ``flag`` along, flag 0 first among equal keys.

    ONE sort of the packed keys ``(key - offset) * 2 + flag``: in int32 when
    the keys span less than ``2**30`` (`float_key` of scores in ``[0, 1]``: a
    32-bit sort, as cheap as sorting the floats), else in int64 when they span
    less than ``2**62``; the flags are the low bit of the sorted keys (no
    argsort, no gather) and ``keys`` the rest, in the packed dtype. ``offset``
    is the smallest key, or 0 when the keys fit as they are. Keys spanning
    more (`ascending64` keys of values of both signs beyond magnitude 2, or of
    NaN and negative values) cannot carry the bit: a lexicographic sort
    (numpy ``lexsort``; torch two stable sorts), int64 keys, offset 0. Flags
    come back as small integers (numpy int8; torch the packed dtype).

    ``bounds``: the keys' ``(min, max)`` when the caller knows them; else they
    are read (numpy: two passes; torch: one ``aminmax``, a host read of two
    scalars -- the data stay on their device).
    """
    n = key.shape[0]
    if bounds is None:
        if _is_numpy(key):
            bounds = (int(key.min()), int(key.max())) if n else (0, 0)
        else:
            bounds = tuple(torch.stack(torch.aminmax(key)).tolist()) if n else (0, 0)
    lo, hi = bounds
    if hi - lo >= _SPAN64:
        return _lexsort_flagged(key, flag) + (0,)
    limit = _SPAN32 if hi - lo < _SPAN32 else _SPAN64
    offset = 0 if 0 <= lo and hi < limit else lo
    if _is_numpy(key):
        packed = np.empty(n, dtype=np.int32 if limit == _SPAN32 else np.int64)
        _pack_flag(packed, key, flag, offset)
        return _sort_unpack(packed) + (offset,)
    if limit == _SPAN32:  # key - offset fits in int32 (computed in int32 for int32 keys: no overflow)
        rel = (key - offset if offset else key).to(torch.int32)
    else:
        rel = key.to(torch.int64)
        rel = rel - offset if offset else rel
    packed = torch.sort(torch.add(flag, rel, alpha=2)).values  # flag + 2 * rel
    keys = packed >> 1
    return keys, packed.bitwise_and_(1), offset


def sort_flagged_floats(x: Array, flag: Array) -> Tuple[Array, Array, int]:
    """`sort_flagged` of the `float_key` of the floats ``x``: ``keys + offset`` are their sorted keys.

    torch float32 (and 16-bit) scores without NaN take a short cut: one
    ``aminmax`` of the scores (a host read of two values) gives the key range
    and shows whether there are negatives; the keys are the IEEE bits of
    ``x + 0`` read as int32, with the magnitude bits of negatives flipped only
    when there are some -- for probabilities two elementwise passes (that
    and the packing) besides the 32-bit sort. numpy, float64 and NaN: the
    int64 `float_key`.
    """
    if _is_numpy(x) or _is_float64(x) or x.numel() == 0:
        return sort_flagged(float_key(x), flag)
    x = _float32(x)
    lo, hi = torch.stack(torch.aminmax(x)).tolist()
    if lo != lo or hi != hi:  # NaN
        return sort_flagged(float_key(x), flag)
    bits = (x + 0.0).view(torch.int32)  # + 0 turns -0.0 into +0.0
    if lo < 0:
        bits.bitwise_xor_((bits >> 31).bitwise_and_(MAX32))
    return sort_flagged(bits, flag, tuple(ascending32(np.array([lo, hi], dtype=np.float32)).tolist()))


def sort_flagged_parts(parts: Callable[[], Iterable[Tuple[np.ndarray, np.ndarray]]]):
    """`sort_flagged_floats` of float32 host parts ``(x, flag)`` joined, without joining them.

    The int32 packed keys ``(ascending32(x) - offset) * 2 + flag`` are written block by block into
    one array (two passes over the parts: the key range, then the keys), so the extra memory is that
    array, 4 bytes a row, and cache-sized temporaries -- not a joined copy of the scores and int64
    keys. ``parts()`` is called once per pass: the caller may make each part as it is needed. ``None``
    when the keys span ``2**30`` or more (scores of both signs beyond magnitude 2, NaN with
    negatives): the caller joins the parts and takes `sort_flagged_floats`.
    """
    lo, hi, n = None, None, 0
    for x, _ in parts():
        for at in range(0, x.shape[0], _BLOCK):
            key = ascending32(x[at: at + _BLOCK])
            lo = int(key.min()) if lo is None else min(lo, int(key.min()))
            hi = int(key.max()) if hi is None else max(hi, int(key.max()))
        n += x.shape[0]
    if n == 0 or hi - lo >= _SPAN32:
        return None
    offset = 0 if 0 <= lo and hi < _SPAN32 else lo
    packed = np.empty(n, dtype=np.int32)
    at = 0
    for x, flag in parts():
        for s in range(0, x.shape[0], _BLOCK):
            out = packed[at: at + min(_BLOCK, x.shape[0] - s)]
            _pack_flag(out, ascending32(x[s: s + _BLOCK]), flag[s: s + _BLOCK], offset)
            at += out.shape[0]
    return _sort_unpack(packed) + (offset,)


def _pack_flag(out: np.ndarray, key: np.ndarray, flag: np.ndarray, offset: int) -> None:
    """``out = (key - offset) * 2 + flag`` in ``out``'s integer dtype (in range by the caller's span: exact)."""
    np.subtract(key, offset, out=out, dtype=np.int64, casting="unsafe")
    np.left_shift(out, 1, out=out)
    np.bitwise_or(out, flag, out=out, casting="unsafe")


def _sort_unpack(packed: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """``(keys, flags int8)`` of the packed keys sorted in place (the keys shifted back in place)."""
    packed.sort()
    flags = np.bitwise_and(packed, 1, out=np.empty(packed.shape[0], dtype=np.int8), casting="unsafe")
    return np.right_shift(packed, 1, out=packed), flags


def _lexsort_flagged(key: Array, flag: Array) -> Tuple[Array, Array]:
    """`sort_flagged` of keys too wide to carry the flag bit."""
    if _is_numpy(key):
        order = np.lexsort((flag, key))
        return key[order], flag[order].astype(np.int8)
    by_flag = torch.argsort(flag.to(torch.uint8), stable=True)
    keys, order = torch.sort(key[by_flag], stable=True)
    return keys, flag[by_flag][order].to(torch.int64)


# ---------------------------------------------------------------- sample sort of large host key arrays

BUCKET_ROWS = 1 << 22  # key arrays at least this long sort by `SampleSort`
BUCKETS = 16
SAMPLE = 1 << 16  # about this many prefixes sampled for the bucket bounds (callers stride their data by n // SAMPLE)


class SampleSort:
    """Sorts a large int64 key array on the host in buckets of value ranges, each by ``torch.sort``.

    On CPU (torch 2.13, 1 thread) torch's radix sort beats numpy's in-place
    sort (2e7 int64 keys: 0.99 s against 1.37 s) but needs about 4x the keys'
    bytes beside them; on one bucket of 1/`BUCKETS` of the keys that is little.
    A key's bucket is looked up from its *prefix*, an int in ``[0, 2**16)`` that
    orders like the key (its top bits); bounds are quantiles of a sample of
    prefixes. The caller:

    1. ``s = SampleSort(sample_prefixes)``;
    2. ``s.count(prefixes)`` for every key, block by block;
    3. ``s.place(out, keys, prefixes)`` block by block: each block's keys go to
       their bucket's range of the ``n``-long ``out``;
    4. ``s.sort(out)``: each bucket sorted on its own (numpy's in-place sort for
       a bucket of over 1/8 of the keys, as one prefix shared by many keys
       makes). The buckets in order are then the keys in order.
    """

    def __init__(self, sample: np.ndarray):
        sample = np.sort(sample)
        bounds = sample[(np.arange(1, BUCKETS) * sample.shape[0]) // BUCKETS] if sample.size else sample
        self.table = np.searchsorted(bounds, np.arange(1 << 16), side="right").astype(np.uint8)  # prefix -> bucket
        self.counts = np.zeros(BUCKETS, dtype=np.int64)
        self.fill = None

    def count(self, prefixes: np.ndarray) -> None:
        self.counts += np.bincount(self.table[prefixes], minlength=BUCKETS)

    def place(self, out: np.ndarray, keys: np.ndarray, prefixes: np.ndarray) -> None:
        if self.fill is None:
            self.fill = np.cumsum(self.counts) - self.counts
        bucket = self.table[prefixes]
        order = np.argsort(bucket, kind="stable")  # a radix sort of uint8
        keys, sizes, at = keys[order], np.bincount(bucket, minlength=BUCKETS), 0
        for j in np.flatnonzero(sizes):
            out[self.fill[j]: self.fill[j] + sizes[j]] = keys[at: at + sizes[j]]
            self.fill[j] += sizes[j]
            at += sizes[j]

    def sort(self, out: np.ndarray) -> np.ndarray:
        ends = np.cumsum(self.counts)
        for a, b in zip(ends - self.counts, ends):
            part = out[a: b]
            if b - a > out.shape[0] // 8:
                part.sort()
            elif b > a:
                part[...] = torch.sort(torch.from_numpy(part)).values.numpy()
        return out
