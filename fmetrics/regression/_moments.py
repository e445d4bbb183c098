"""Streaming means, variances and co-moments merged with Chan's pairwise formulas.

For two parts ``a`` and ``b`` with counts ``n_a, n_b``, means ``m_a, m_b`` and
centred second moments ``M2_a = sum (x - m_a)^2`` (co-moments
``C_a = sum (x - m_x)(y - m_y)`` likewise)::

    n     = n_a + n_b
    delta = m_b - m_a
    m     = m_a + delta * n_b / n
    M2    = M2_a + M2_b + delta^2 * n_a n_b / n
    C     = C_a + C_b + delta_x delta_y * n_a n_b / n

``init()`` (all zeros) is the identity. No raw sum of squares is ever formed,
so data with a large offset (values near 1e6 with unit noise) keep their full
precision.

A batch enters in the accumulator dtype (float64). NRMSE merges the batch's own
mean and centred moments (`centre`); Pearson and R² fold it in directly
(`shift`, `absorb`): with the shift ``K`` = the state's mean (the batch's first
row when the state is empty) and the float64 sums ``S1 = sum (x - K)``,
``S2 = sum (x - K)^2``, ``Sxy = sum (x - Kx)(y - Ky)``::

    n' = n + N,   m' = K + S1 / n',   M2' = M2 + S2 - S1^2 / n',   C' = C + Sxy - S1x S1y / n'

(the merge above with ``m_a = K`` written out). ``x - K`` is small, so nothing
cancels beyond a factor ``n' / n``, and a batch costs one float64 pass per
statistic and a handful of ``(D,)`` operations.
"""
from __future__ import annotations

import torch

# Batches of at most this many elements per input stack preds and target into one
# (N, 2, D) float64 buffer (half the operations: per-update overhead dominates);
# larger ones use two (N, D) buffers (no stacking copy: memory traffic dominates).
STACK_LIMIT = 8192


def batch_count(x: torch.Tensor) -> torch.Tensor:
    """Rows of ``x`` as an int64 0-d tensor on its device."""
    return torch.full((), x.shape[0], dtype=torch.int64, device=x.device)


def shift(n: torch.Tensor, mean: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """The batch shift ``K``: the state's ``mean``, or the batch's ``first`` row when the state is empty."""
    return torch.where(n > 0, mean, first.to(mean.dtype))


def absorb(n: torch.Tensor, rows: int, k: torch.Tensor, s1: torch.Tensor):
    """``(n', m', w)`` after folding in ``rows`` rows with shifted sums ``s1``; ``w = s1 / n'``.

    The caller finishes ``M2' = M2 + S2 - s1 w`` and ``C' = C + Sxy - s1_x w_y``.
    """
    n = n + rows
    w = s1 / n
    return n, k + w, w


def centre_(c: torch.Tensor):
    """``(mean, c - mean)`` of a fresh ``(N, D)`` buffer ``c``, centred in place (zero mean for no rows)."""
    mean = c.sum(0) / max(c.shape[0], 1)
    return mean, c.sub_(mean)


def centre(x: torch.Tensor, dtype: torch.dtype):
    """``(mean, x - mean)`` of ``(N, D)`` ``x`` in ``dtype``; the second is a fresh buffer the caller may overwrite."""
    return centre_(x.to(dtype, copy=True))


def weights(n_a: torch.Tensor, n_b: torch.Tensor, dtype: torch.dtype):
    """``(n, w_b, cross)`` with ``w_b = n_b / n`` and ``cross = n_a n_b / n`` (0 when ``n == 0``)."""
    fa, fb = n_a.to(dtype), n_b.to(dtype)
    w_b = fb / torch.clamp(fa + fb, min=1)
    return n_a + n_b, w_b, fa * w_b


def merge_mean(m_a: torch.Tensor, m_b: torch.Tensor, w_b: torch.Tensor) -> torch.Tensor:
    return m_a + (m_b - m_a) * w_b


def merge_comoment(c_a, c_b, dx, dy, cross) -> torch.Tensor:
    """``C_a + C_b + dx dy cross``; with ``dx is dy`` this is the variance merge."""
    return c_a + c_b + dx * dy * cross


def degenerate(n: torch.Tensor, mean: torch.Tensor, m2: torch.Tensor) -> torch.Tensor:
    """Bool mask of columns whose variance is zero up to rounding (or fewer than 2 samples).

    A constant column gives ``M2`` exactly 0 for float32/integer inputs and at
    most ``n (k eps |mean|)^2`` for float64 inputs (the batch mean's rounding).
    """
    eps = torch.finfo(m2.dtype).eps if m2.is_floating_point() else 0.0
    scale = 64 * eps * mean.abs()
    return (n < 2) | (m2 <= n.to(m2.dtype) * scale * scale) | ~torch.isfinite(m2)
