"""The bootstrap's counter-based draws, written again in NumPy from their documented definition.

An oracle independent of `fmetrics.wrappers._draws`: the bootstrap cases
(tests/cases/wrappers.py) draw their resampling counts here, and
tests/test_wrappers_draws.py checks the library's draws against these
definitions bit for bit. The definitions (``fmetrics/wrappers/_draws.py`` and
the `fmetrics.wrappers.bootstrap` docstring):

* ``mix``: splitmix64's finalizer, ``x ^= x >> 30; x *= 0xBF58476D1CE4E5B9;
  x ^= x >> 27; x *= 0x94D049BB133111EB; x ^= x >> 31`` (unsigned 64-bit,
  wrapping; here ``numpy.uint64``).
* a row's key: ``mix(id + mix(seed))`` with sample ids; without ids
  ``mix(mix(offset + mix(seed)) ^ mix(rank * G + 1)) ^ content(row)``,
  ``G = 0x9E3779B97F4A7C15`` (the golden ratio), ``offset`` the row's position
  in the state's stream and ``content`` the hash of its input values: per input
  ``i`` with a sample axis, ``mix(sum_c mix(bits_c ^ (c * G + mix(i))))`` over
  the row's values as float64 (or int64) bit patterns, combined across inputs
  by ``h = mix(h ^ row)``.
* Poisson(1) counts: replicate ``r = 4g + j`` takes the 16 bits ``16j .. 16j+15``
  of ``mix(key ^ mix((g + 1) * G))`` as ``u`` and counts
  ``#{k : u >= ceil(2^16 P(X <= k))}`` over the ``k`` with
  ``2^16 P(X <= k) < 2^16 - 1`` (X ~ Poisson(1), so counts are at most 7).
* multinomial: replicate ``r`` hashes ``mix(key ^ mix((r + 1) * G))``; its top
  53 bits make ``u`` in [0, 1) and the draw picks row ``min(floor(u * n), n - 1)``.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

G = 0x9E3779B97F4A7C15
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK = 2**64 - 1


def u64(x) -> np.ndarray:
    """Integers (NumPy / torch / Python, signed or not) as their unsigned 64-bit two's-complement patterns."""
    if hasattr(x, "numpy"):
        x = x.detach().cpu().numpy()
    if isinstance(x, int):
        return np.array(x & _MASK, dtype=np.uint64)
    x = np.asarray(x)
    return x.astype(np.int64).view(np.uint64) if x.dtype != np.uint64 else x


def mix(x) -> np.ndarray:
    x = u64(x).copy()
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(_M1)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(_M2)
        return x ^ (x >> np.uint64(31))


def id_keys(seed: int, ids) -> np.ndarray:
    with np.errstate(over="ignore"):
        return mix(u64(ids) + mix(seed))


def content(inputs, n: int) -> np.ndarray:
    h = None
    for i, x in enumerate(inputs):
        x = x.detach().cpu().numpy() if hasattr(x, "numpy") else np.asarray(x)
        if x.ndim == 0 or x.shape[0] != n:
            continue
        x = x.reshape(n, -1)
        bits = x.astype(np.float64).view(np.uint64) if np.issubdtype(x.dtype, np.floating) else u64(x)
        with np.errstate(over="ignore"):
            column = np.arange(bits.shape[1], dtype=np.uint64) * np.uint64(G) + mix(i)
            row = mix(mix(bits ^ column).sum(-1, dtype=np.uint64))
        h = row if h is None else mix(h ^ row)
    return h


def offset_keys(seed: int, inputs, start: int = 0, rank: int = 0) -> np.ndarray:
    """Keys of rows ``start ..`` of a stream without sample ids (rank ``rank``)."""
    n = inputs[0].shape[0]
    with np.errstate(over="ignore"):
        h = mix(u64(np.arange(start, start + n)) + mix(seed))
        return mix(h ^ mix((rank * G + 1) & _MASK)) ^ content(inputs, n)


def _bounds() -> np.ndarray:
    cdf = stats.poisson.cdf(np.arange(40), 1.0) * 2**16
    return np.ceil(cdf[cdf < 2**16 - 1])


BOUNDS = _bounds()


def poisson_counts(keys, num_samples: int, first: int = 0) -> np.ndarray:
    """``(R, N)`` Poisson(1) counts of replicates ``first .. first + R`` (``first`` a multiple of 4)."""
    keys = u64(keys)
    r = np.arange(first, first + num_samples)
    with np.errstate(over="ignore"):
        h = mix(keys[None, :] ^ mix((r[:, None] // 4 + 1).astype(np.uint64) * np.uint64(G)))
    u = (h >> (16 * (r[:, None] % 4)).astype(np.uint64)) & np.uint64(0xFFFF)
    return (u[..., None] >= BOUNDS).sum(-1).astype(np.int64)


def multinomial_picks(keys, num_samples: int) -> np.ndarray:
    """``(R, N)``: the row each of the ``N`` draws of replicate ``r`` picks."""
    keys = u64(keys)
    n = keys.shape[0]
    with np.errstate(over="ignore"):
        salt = mix((np.arange(num_samples, dtype=np.uint64) + np.uint64(1)) * np.uint64(G))
    u = (mix(keys[None, :] ^ salt[:, None]) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return np.minimum((u * n).astype(np.int64), n - 1)
