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
* `ascending64` -- float64 to int64 keys (any int64).

In all of them ``-0.0`` and ``+0.0`` get one key, ``-inf``/``+inf`` the
extreme keys of the finite-and-infinite range, and every NaN one key above
``+inf`` (below every other key with `descending32`): NaN sorts last in
ascending order, as in ``torch.sort``.

Packed keys (`pack`, `pack_into`, `field`): fields from the most to the least
significant, each non-negative and narrower than its width (the first field
may be any int64 that fits in the bits left), packed by shift-and-or; the
lexicographic order of the fields is the integer order of the key.

Every function takes a torch tensor or a numpy array and returns the same
kind; on CPU numpy's kernels are cheaper per call, so callers may pass
``tensor.numpy()`` views. Keys are only computed in ``finalize`` paths.
"""
from __future__ import annotations

from typing import Sequence, Tuple, Union

import numpy as np
import torch

__all__ = [
    "MAX32",
    "DESCENDING_ZERO",
    "ascending32",
    "descending32",
    "float32_from_key",
    "ascending64",
    "float32_exact",
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
