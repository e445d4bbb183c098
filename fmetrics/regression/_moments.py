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

import numpy as np
import torch

from fmetrics import validation
from fmetrics.regression import _host, _inputs

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
    w = s1 / torch.clamp(n, min=1)
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


def update(state, x: torch.Tensor, y: torch.Tensor, residual: bool, mode: str, name: str = "", raw: tuple = ()):
    """``state`` (fields ``n, mean, m2[, c_xy], invalid``) after the rows of ``(N, D)`` ``x`` and ``y``.

    The two variables are ``(x, y)``, or ``(x, y - x)`` with ``residual``
    (R²'s target and residual ``preds - target``); a ``c_xy`` field gets their
    co-moment. ``mode``: ``"count"`` counts non-finite entries into
    ``state.invalid``, ``"drop"`` also leaves their rows out (0/1 row
    weights), ``"off"`` does neither (``nan_strategy="disable"``). On CPU in
    eager mode ``"count"`` instead raises at once when a batch sum is not
    finite, quoting the values of the ``raw`` inputs (the caller's ``(preds,
    target)``, named in the message by ``name``). The batch's arithmetic is
    float64 (``exact=True``; the fast default is `fmetrics.regression._shifted`).
    """
    rows = x.shape[0]
    if rows == 0:
        return state
    if mode != "drop" and _host.applies(x, y, state.mean):
        return _host_update(state, x, y, residual, mode, name, raw, state.mean.dtype)
    inv = state.invalid
    eager = mode == "count" and not _inputs.deferred(x, y)
    if eager:  # CPU, eager: the batch sums below tell whether an input is non-finite (then raise)
        mode = "off"
        inv = inv._replace(calls=inv.calls + 1)  # the same record as the deferred path keeps
    cross = len(state) == 5
    acc = state.mean.dtype
    if x.numel() <= STACK_LIMIT:  # one (N, 2, D) buffer: half the operations
        z = torch.stack((x, y), 1).to(acc)
        if mode != "off":
            inv = _inputs.flag_nonfinite(inv, z.reshape(rows, -1))
        if residual:
            z[:, 1].sub_(z[:, 0])
        if mode == "drop":
            w = _inputs.row_weights(z)
            z = torch.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)
        k = shift(state.n, state.mean, z[0]).to(acc)
        z = z.sub_(k)
        if mode == "drop":
            z = z.mul_(w[:, None, None])
        s1 = z.sum(0)
        sxy = (z[:, 0] * z[:, 1]).sum(0) if cross else None
        s2 = _inputs.square(z).sum(0)
    else:  # two (N, D) buffers: fewer bytes moved
        if mode == "off" and x.dtype == acc and y.dtype == acc:  # nothing to cast or count: no copies
            k, a, b = shifted(state, x, y, residual)
        else:
            a, b = x.to(acc, copy=True), y.to(acc, copy=True)
            if mode != "off":
                inv = _inputs.flag_nonfinite(inv, a, b)
            if residual:
                b = b.sub_(a)
            if mode == "drop":
                w = _inputs.row_weights(a) * _inputs.row_weights(b)
                a = torch.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
                b = torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)
            k = shift(state.n, state.mean, torch.stack((a[0], b[0]))).to(acc)
            a, b = a.sub_(k[0]), b.sub_(k[1])
            if mode == "drop":
                a, b = a.mul_(w[:, None]), b.mul_(w[:, None])
        s1 = torch.stack((a.sum(0), b.sum(0)))
        sxy = (a * b).sum(0) if cross else None
        s2 = torch.stack((_inputs.square(a, b).sum(0), _inputs.square(b, a).sum(0)))
    if eager:
        _inputs.check_sum(name, ("preds", "target"), s1, *raw)
    count = w.sum().to(torch.int64) if mode == "drop" else rows
    n, mean, w_new = absorb(state.n, count, k, s1)
    fields = [n, mean, torch.addcmul(state.m2 + s2, s1, w_new, value=-1)]
    if cross:
        fields.append(torch.addcmul(state.c_xy + sxy, s1[0], w_new[1], value=-1))
    return type(state)(*fields, inv)


def shifted(state, x: torch.Tensor, y: torch.Tensor, residual: bool):
    """``(k, x - k[0], y - k[1])`` (``y - x - k[1]`` with ``residual``) in fresh buffers of the inputs' dtype,
    with the shift ``k`` of `update`: one pass each, where copying the inputs first would add two."""
    b = torch.sub(y, x) if residual else y
    k = shift(state.n, state.mean, torch.stack((x[0], b[0]))).to(x.dtype)
    return k, torch.sub(x, k[0]), (b.sub_(k[1]) if residual else torch.sub(y, k[1]))


def _host_update(state, x, y, residual: bool, mode: str, name: str, raw: tuple, dtype: torch.dtype):
    """`update` of a small CPU batch from numpy sums in ``dtype`` (`_host`): the same shift and float64 fold."""
    n = int(state.n)
    with np.errstate(all="ignore"):  # non-finite input: raised below ("count") or propagated ("off")
        k, z = _host.shifted(x, y, residual, n, state.mean, dtype)
        s1 = np.add.reduce(z, 1, dtype=np.float64)
        s2 = np.add.reduce(z * z, 1, dtype=np.float64)
        w = s1 / (n + x.shape[0])
        fields = [state.n + x.shape[0], torch.from_numpy(k + w), torch.from_numpy(state.m2.numpy() + s2 - s1 * w)]
        if len(state) == 5:
            sxy = np.add.reduce(z[0] * z[1], 0, dtype=np.float64)
            fields.append(torch.from_numpy(state.c_xy.numpy() + sxy - s1[0] * w[1]))
    inv = state.invalid
    if mode == "count":
        _inputs.check_sum(name, ("preds", "target"), s1, *raw)
        inv = inv._replace(calls=inv.calls + 1)
    return type(state)(*fields, inv)


def merge(a, b):
    """Chan's merge of two moment states (fields ``n, mean, m2[, c_xy], invalid``)."""
    n, w_b, cross = weights(a.n, b.n, a.mean.dtype)
    d = b.mean - a.mean
    fields = [n, merge_mean(a.mean, b.mean, w_b), merge_comoment(a.m2, b.m2, d, d, cross)]
    if len(a) == 5:
        fields.append(merge_comoment(a.c_xy, b.c_xy, d[0], d[1], cross))
    return type(a)(*fields, validation.invalid_merge(a.invalid, b.invalid))


def weigh_rows(rows, weights: torch.Tensor):
    """The moment family's `Metric.weigh_rows`: each replicate's batch state in closed form.

    ``rows`` are one-row states stacked ``(B, ...)``: ``n`` 1 (0 for a row
    left out), ``mean`` the row's two values ``(B, 2, D)``, zero ``m2`` (and
    ``c_xy``). With the rows shifted by their unweighted mean ``K`` (``c_i =
    z_i - K``, for precision), effective weights ``W_ri = weights_ri n_i`` and
    ``S_1 = W c``, ``S_2 = W c^2``, ``S_xy = W (c_x c_y)`` (one matmul,
    ``(1 + 5D, B) x (B, R)``)::

        n = W 1,  mean = K + S_1 / n,  m2 = S_2 - S_1^2 / n,  c_xy = S_xy - S_1x S_1y / n

    (``n = 0`` gives ``(0, K, 0, 0)``, an identity of the Chan merge): the
    exact weighted sample, as repeated merges, in one matmul. The deferred
    record counts each row's non-finite entries ``weights`` times.
    """
    cross = len(rows) == 5
    z = rows.mean  # (B, 2, D)
    w = weights.to(z.dtype) * rows.n.to(z.dtype)  # (R, B)
    k = z.mean(0)
    c = z - k
    parts = [torch.ones_like(z[:, 0, 0]), c, c * c] + ([c[:, 0] * c[:, 1]] if cross else [])
    sums = torch.cat([x.reshape(x.shape[0], -1) for x in parts], dim=1).mT @ w.mT  # (S, R)
    width = c[0].numel()
    n = sums[0]
    s1 = sums[1:1 + width].mT.reshape(-1, *c.shape[1:])
    s2 = sums[1 + width:1 + 2 * width].mT.reshape(s1.shape)
    inv = 1 / n.clamp(min=1).reshape(-1, 1, 1)
    mean = s1 * inv
    out = [n.round().to(rows.n.dtype), mean + k, torch.addcmul(s2, mean, s1, value=-1)]
    if cross:
        out.append(torch.addcmul(sums[1 + 2 * width:].mT, mean[:, 0], s1[:, 1], value=-1))
    return type(rows)(*out, _weigh_invalid(rows.invalid, weights))


def _weigh_invalid(rows: validation.Invalid, weights: torch.Tensor) -> validation.Invalid:
    """Per replicate: one update call whose offending entries are the rows' ``weights`` times over."""
    count = (weights.to(torch.int64) * rows.count).sum(-1)  # (R,)
    picked = (weights > 0) & (rows.count > 0)  # (R, B)
    first = rows.first[torch.argmax(picked.to(torch.uint8), dim=-1)]
    bad = count > 0
    one = torch.ones_like(count)
    return validation.Invalid(count, torch.where(bad, first, torch.nan), torch.where(bad, one, 0 * one), one)
