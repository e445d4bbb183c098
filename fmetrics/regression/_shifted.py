"""Shifted raw power sums: the fast default state of R², explained variance, RSE, Pearson and concordance.

Per variable (row ``r``: preds / target, or target / residual) and output
column the state keeps a shift ``K`` and float64 sums of the shifted values::

    S1 = sum (x - K),   S2 = sum (x - K)^2,   Sxy = sum (x - Kx)(y - Ky)

``K`` is taken once, from the first non-empty batch (its first row; with
``nan_strategy="warn"/"ignore"`` the mean of its finite rows), rounded to a
float32 value, and stored in the state; it never changes afterwards. A batch
is shifted, multiplied and summed in the inputs' own float32 / float64 dtype
(``K`` is exact in both), the same passes as torchmetrics' raw power sums,
and only the running sums are float64. The moments follow in `finalize`::

    mean = K + S1 / n,   M2 = S2 - S1^2 / n,   C = Sxy - S1x S1y / n

Because ``x - K`` is small for data near ``K`` (values near 1e4 with unit
noise), nothing cancels as it does in raw sums of ``x`` and ``x^2``
(torchmetrics is off by 0.24 in R² there). `merge` re-bases one side's sums
onto the other's shift in float64 (``d = K_b - K_a``)::

    S1 += n_b d,   S2 += 2 d S1_b + n_b d^2,   Sxy += dx S1y_b + dy S1x_b + n_b dx dy

and an empty side (``n == 0``) adopts the other's shift, so ``init()`` is the
identity. The first-batch choice is a ``torch.where`` on ``n > 0`` (no host
branch: the update traces, vmaps and runs on ``meta``).

Fields: ``n`` int64 ``()``, ``shift`` float64 ``(2, D)``, ``sums`` float64
``(4, D)`` (``S1`` of both rows, then ``S2`` of both) or ``(5, D)`` (then
``Sxy``), ``invalid`` (`fmetrics.validation.Invalid`). States of the exact,
centred layout (``n, mean, m2[, c_xy], invalid``: `_moments`) convert
exactly (`from_centred`), so a state saved before this layout still merges
and finalizes.
"""
from __future__ import annotations

import numpy as np
import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.regression import _host, _inputs, _moments
from fmetrics.state import accum_dtype

F32_MAX = float(torch.finfo(torch.float32).max)


def init(state_type, num_outputs: int, cross: bool, dtype: torch.dtype):
    """The empty state (zero count, shift and sums)."""
    zero = torch.zeros(2, num_outputs, dtype=dtype)
    return state_type(torch.zeros((), dtype=torch.int64), zero, torch.zeros(5 if cross else 4, num_outputs,
                                                                             dtype=dtype), validation.invalid_init())


def family(family_name: str, state_type, num_outputs: int, mode: str, name: str, residual: bool) -> Family:
    """The fast default `Family` over ``state_type`` sums: rows ``(target, residual)`` with ``residual``
    (R², explained variance, RSE), else ``(preds, target)`` with the cross sum (Pearson, concordance)."""
    def step(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=False)
        t = _inputs.columns(name, target, num_outputs, flatten=False)
        x, y = (t, p) if residual else (p, t)
        return update(state, x, y, residual=residual, mode=mode, name=name, raw=(preds, target))

    return Family(name=family_name, key=(num_outputs, mode, False),
                  init=lambda: init(state_type, num_outputs, not residual, accum_dtype()), update=step,
                  reductions=state_type(n=None, shift=None, sums=None, invalid=None), merge=merge,
                  weigh_rows=weigh_rows)


def _first(z: torch.Tensor) -> torch.Tensor:
    """``z`` rounded to float32 values (finite where ``z`` is), in ``z``'s dtype: a shift exact in float32 and float64."""
    if z.dtype == torch.float32:
        return z
    return z.clamp(-F32_MAX, F32_MAX).to(torch.float32).to(z.dtype)


def update(state, x: torch.Tensor, y: torch.Tensor, residual: bool, mode: str, name: str = "", raw: tuple = ()):
    """``state`` after the rows of ``(N, D)`` ``x`` and ``y`` (``y - x`` with ``residual``).

    ``mode``: ``"count"`` counts non-finite entries into ``state.invalid`` (on
    CPU in eager mode it raises at once instead, quoting the ``raw`` inputs),
    ``"drop"`` also leaves their rows out, ``"off"`` does neither.
    """
    if isinstance(state, _CENTRED_TYPES[0]):
        state = from_centred(state)
    rows = x.shape[0]
    if rows == 0:
        return state
    if mode != "drop" and _host.applies(x, y, state.sums):
        return _host_update(state, x, y, residual, mode, name, raw)
    work = _inputs.work_dtype(state.sums.dtype, x, y, exact=False)
    inv = state.invalid
    eager = mode == "count" and not _inputs.deferred(x, y)
    if eager:  # CPU, eager: the batch sums below tell whether an input is non-finite (then raise)
        mode = "off"
    host = eager and not (x.requires_grad or y.requires_grad)  # no autograd graph to keep: numpy may help
    if x.dtype != work or y.dtype != work:
        x, y = x.to(work), y.to(work)
    if mode != "off":  # counted ("count"), or counted and left out ("drop")
        inv = _inputs.flag_nonfinite(inv, torch.stack((x, y), 1).reshape(rows, -1))
    b = torch.sub(y, x) if residual else y
    count = rows
    if mode == "drop":
        w = (_inputs.row_weights(x) * _inputs.row_weights(b))[:, None]
        x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
        b = torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)
        total = w.sum()
        count = total.to(torch.int64)
        first = torch.stack(((x * w).sum(0), (b * w).sum(0))) / torch.clamp(total, min=1)
        k = torch.where(state.n > 0, state.shift, _first(first))  # float64 (type promotion)
    elif host and int(state.n) > 0:  # CPU, eager: a host read decides, the shift comes from numpy
        k = state.shift
    else:
        k = torch.where(state.n > 0, state.shift, _first(torch.stack((x[0], b[0]))))
        host = False
    kx, kb = (torch.from_numpy(v) for v in k.numpy().astype(NUMPY[work])) if host else k.to(work).unbind(0)
    a = torch.sub(x, kx)
    b = b.sub_(kb) if residual else torch.sub(b, kb)
    if mode == "drop":
        a, b = a.mul_(w), b.mul_(w)
    parts = [a.sum(0), b.sum(0)]
    cross = [(a * b).sum(0)] if state.sums.shape[-2] == 5 else []
    batch = torch.stack(parts + [_inputs.square(a).sum(0), _inputs.square(b).sum(0)] + cross)
    if eager:
        _inputs.check_sum(name, ("preds", "target"), batch.detach().numpy(), *raw)
    if host:  # the (D,)-sized bookkeeping in numpy: under 1 µs a call where a torch operation costs 1-2 µs
        inv = inv._replace(calls=_plus(inv.calls, 1))
        return type(state)(_plus(state.n, count), k, torch.from_numpy(state.sums.numpy() + batch.numpy()), inv)
    if eager:
        inv = inv._replace(calls=inv.calls + 1)
    return type(state)(state.n + count, k, torch.add(state.sums, batch), inv)  # float64 by type promotion


NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


def _host_update(state, x, y, residual: bool, mode: str, name: str, raw: tuple):
    """`update` of a small CPU batch in numpy (`_host`: ufuncs dispatch in under 1 µs): the same shift and
    work dtype, one ``(4 or 5, N, D)`` buffer of shifted values, squares and products, one float64 sum."""
    dtype = NUMPY[_inputs.work_dtype(state.sums.dtype, x, y, exact=False)]
    cross = state.sums.shape[-2] == 5
    n = state.n.numpy()
    xs, ys = x.numpy(), y.numpy()
    buf = np.empty((5 if cross else 4, *xs.shape), dtype=dtype)
    with np.errstate(all="ignore"):  # non-finite input: raised below ("count") or propagated ("off")
        buf[0] = xs
        if residual:
            np.subtract(ys, xs, out=buf[1], dtype=dtype)
        else:
            buf[1] = ys
        if n > 0:
            shift = state.shift
            k = shift.numpy().astype(dtype)
        else:  # the first row, as a float32 value (`_first`)
            k = np.clip(buf[:2, 0], -F32_MAX, F32_MAX).astype(np.float32).astype(dtype)
            shift = torch.from_numpy(k.astype(np.float64))
        z = np.subtract(buf[:2], k[:, None], out=buf[:2])
        np.multiply(z, z, out=buf[2:4])
        if cross:
            np.multiply(z[0], z[1], out=buf[4])
        batch = np.add.reduce(buf, 1, dtype=np.float64)
    inv = state.invalid
    if mode == "count":
        _inputs.check_sum(name, ("preds", "target"), batch, *raw)
        inv = inv._replace(calls=_plus(inv.calls, 1))
    return type(state)(_plus(state.n, x.shape[0]), shift, torch.from_numpy(state.sums.numpy() + batch), inv)


def _plus(count: torch.Tensor, k: int) -> torch.Tensor:
    """``count + k`` for a CPU int64 tensor, in numpy (under 1 µs; a torch add costs ~2 µs in dispatch)."""
    return torch.from_numpy(np.asarray(count.numpy() + k))


def merge(a, b):
    """``a`` and ``b`` on ``a``'s shift (``b``'s when ``a`` is empty), re-based exactly in float64."""
    if isinstance(a, _CENTRED_TYPES[0]):
        a = from_centred(a)
    if isinstance(b, _CENTRED_TYPES[0]):
        b = from_centred(b)
    k = torch.where(a.n > 0, a.shift, b.shift)
    d = b.shift - k  # 0 when a is empty; b's sums are 0 when b is
    nb = b.n.to(d.dtype)
    s1 = b.sums[:2]
    parts = [nb * d, d * (2 * s1 + nb * d)]
    if a.sums.shape[-2] == 5:
        parts.append((d[0] * s1[1] + d[1] * s1[0] + nb * d[0] * d[1])[None])
    return type(a)(a.n + b.n, k, a.sums + b.sums + torch.cat(parts), validation.invalid_merge(a.invalid, b.invalid))


def centred(state, centred_type):
    """The exact centred view ``centred_type(n, mean, m2[, c_xy], invalid)`` of a shifted state
    (`_moments`' layout, which the finalizers read); a centred state is returned as it is. Leading
    dimensions (stacked states) broadcast."""
    if isinstance(state, _CENTRED_TYPES[0]):
        return state
    sums = state.sums
    s1 = sums[..., :2, :]
    w = s1 / torch.clamp(state.n, min=1).to(s1.dtype)[..., None, None]
    fields = [state.n, state.shift + w, torch.clamp(sums[..., 2:4, :] - s1 * w, min=0)]
    if sums.shape[-2] == 5:
        fields.append(sums[..., 4, :] - s1[..., 0, :] * w[..., 1, :])
    return centred_type(*fields, state.invalid)


def from_centred(state, shifted_type=None):
    """The shifted state of a centred one (``K`` = its mean rounded to float32; exact up to float64 rounding).
    Leading dimensions (stacked states) broadcast."""
    k = torch.where((state.n > 0)[..., None, None], _first(state.mean), 0)
    d = state.mean - k
    s1 = state.n.to(d.dtype)[..., None, None] * d
    parts = [s1, state.m2 + s1 * d]
    if len(state) == 5:
        parts.append((state.c_xy + s1[..., 0, :] * d[..., 1, :]).unsqueeze(-2))
    return (shifted_type or _SHIFTED[type(state)])(state.n, k, torch.cat(parts, -2), state.invalid)


def weigh_rows(rows, weights: torch.Tensor):
    """`Metric.weigh_rows` of a shifted state: `_moments.weigh_rows` of its centred view, shifted back."""
    centred_type = _CENTRED[type(rows)]
    return from_centred(_moments.weigh_rows(centred(rows, centred_type), weights), type(rows))


_SHIFTED: dict = {}  # centred state type -> shifted state type (filled by `pair_types`)
_CENTRED: dict = {}
_CENTRED_TYPES = [()]  # the centred types, as one tuple for isinstance


def pair_types(centred_type, shifted_type) -> None:
    """Declares the exact (centred) and fast (shifted) layouts of one state, for the conversions above."""
    _SHIFTED[centred_type] = shifted_type
    _CENTRED[shifted_type] = centred_type
    _CENTRED_TYPES[0] = tuple(_SHIFTED)
