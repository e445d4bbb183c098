"""Shifted raw power sums: the fast default state of R², explained variance, RSE, Pearson and concordance.

Per shifted variable and output column the state keeps a shift ``K`` and
float64 sums of the shifted values::

    S1 = sum (x - K),   S2 = sum (x - K)^2,   Sxy = sum (x - Kx)(y - Ky)

in one of three layouts (`LAYOUTS`): ``"pair"`` (preds and target, with
``Sxy``: Pearson, concordance), ``"residual"`` (target and residual ``e = p -
t``, ``K_t + K_e`` a float32 value so ``e - K_e = (p - K_p) - (t - K_t)``:
explained variance) and ``"r2"`` (the target, then the plain residual sum of
squares ``sum (p - t)^2``, one fused pass; nothing cancels in it: R², RSE).

``K`` is taken once, from the first non-empty batch (its first row; with
``nan_strategy="warn"/"ignore"`` the mean of its finite rows), rounded to a
float32 value, and stored in the state; it never changes afterwards, but for one exact re-basing to
``K = 0`` on the CPU in eager mode of each variable that sits within a standard deviation of 0 (`_steady`). A
batch is shifted, multiplied and summed in the inputs' own float32 / float64 dtype
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
branch: the update traces, vmaps and runs on ``meta``); on CPU in eager mode a
non-empty state takes `_steady` (a host read of ``n``, one torch add per field).

Fields: ``n`` int64 ``()``, ``shift`` float64 ``(S, D)``, ``sums`` float64
``(R, D)`` (``S1`` of the shifted rows, their ``S2``, then ``Sxy`` or the
residual's sum of squares), ``invalid`` (`fmetrics.validation.Invalid`). States of the exact,
centred layout (``n, mean, m2[, c_xy], invalid``: `_moments`) convert
exactly (`from_centred`), so a state saved before this layout still merges
and finalizes.
"""
from __future__ import annotations

import math
import weakref

import numpy as np
import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.regression import _host, _inputs, _moments
from fmetrics.state import accum_dtype, host_plus

F32_MAX = float(torch.finfo(torch.float32).max)


def init(state_type, num_outputs: int, layout: str, dtype: torch.dtype):
    """The empty state (zero count, shift and sums) of ``layout``."""
    shifts, rows = LAYOUTS[layout]
    return state_type(torch.zeros((), dtype=torch.int64), torch.zeros(shifts, num_outputs, dtype=dtype),
                      torch.zeros(rows, num_outputs, dtype=dtype), validation.invalid_init())


# layout: (shifted rows, sums rows). "pair": preds and target with the cross sum (Pearson, concordance);
# "residual": target and residual e = p - t (explained variance; K_t + K_e is a float32 value, the preds'
# shift, so e - K_e = (p - K_p) - (t - K_t)); "r2": the target, then the residual's plain sum of squares
# (R², RSE: nothing cancels in it)
LAYOUTS = {"pair": (2, 5), "residual": (2, 4), "r2": (1, 3)}


def _row_shifts(layout: str, k):
    """The shifts of the input rows (float64 tensor or array ``(S, D)``): ``k``, or ``(K_t, K_t + K_e)`` (target
    and preds, float32 values: the running sum of ``k``'s rows) for ``"residual"``."""
    return k.cumsum(0) if layout == "residual" else k


def _shift_of(layout: str, z: torch.Tensor) -> torch.Tensor:
    """Shifts near the values ``z`` (float64, ``(..., S, D)``), float32 values (exact in both work dtypes); for
    ``"residual"`` ``(K_t, K_p - K_t)`` with both ``K`` float32 values."""
    if layout != "residual":
        return _first(z)
    kt = _first(z[..., :1, :])
    return torch.cat((kt, _first(kt + z[..., 1:, :]) - kt), -2)


def family(family_name: str, state_type, num_outputs: int, mode: str, name: str, layout: str) -> Family:
    """The fast default `Family` over ``state_type`` sums in ``layout`` (`LAYOUTS`): rows ``(preds, target)``
    for ``"pair"``, else ``(target, residual)``."""
    def step(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=False)
        t = _inputs.columns(name, target, num_outputs, flatten=False)
        x, y = (p, t) if layout == "pair" else (t, p)
        return update(shifted(state, state_type), x, y, layout, mode, name, (preds, target))

    return Family(name=family_name, key=(num_outputs, mode, False),
                  init=lambda: init(state_type, num_outputs, layout, accum_dtype()), update=step,
                  reductions=state_type(n=None, shift=None, sums=None, invalid=None),
                  merge=lambda a, b: merge(shifted(a, state_type), shifted(b, state_type)), weigh_rows=weigh_rows)


def shifted(state, state_type):
    """``state`` in the shifted layout ``state_type`` (a centred state of `_moments`' layout converted)."""
    return from_centred(state, state_type) if isinstance(state, _CENTRED_TYPES[0]) else state


def _first(z: torch.Tensor) -> torch.Tensor:
    """``z`` rounded to float32 values (finite where ``z`` is), in ``z``'s dtype: a shift exact in float32 and float64."""
    if z.dtype == torch.float32:
        return z
    return z.clamp(-F32_MAX, F32_MAX).to(torch.float32).to(z.dtype)


def update(state, x: torch.Tensor, y: torch.Tensor, layout: str, mode: str, name: str = "", raw: tuple = ()):
    """``state`` after the rows of ``(N, D)`` ``x`` and ``y`` (``y - x`` unless ``layout == "pair"``).

    ``mode``: ``"count"`` counts non-finite entries into ``state.invalid`` (on
    CPU in eager mode it raises at once instead, quoting the ``raw`` inputs),
    ``"drop"`` also leaves their rows out, ``"off"`` does neither.
    """
    rows = x.shape[0]
    if rows == 0:
        return state
    if mode != "drop" and _host.applies(x, y, state.sums):
        return _host_update(state, x, y, layout, mode, name, raw)
    if (mode == "count" and x.dtype == y.dtype and x.dtype in NUMPY and not (x.requires_grad or y.requires_grad)
            and not _inputs.deferred(x, y)):
        n = int(state.n)
        if n > 0:
            return _steady(state, n, x, y, layout, name, raw)
    work = _inputs.work_dtype(state.sums.dtype, x, y, exact=False)
    inv = state.invalid
    eager = mode == "count" and not _inputs.deferred(x, y)
    if eager:  # CPU, eager: the batch sums below tell whether an input is non-finite (then raise)
        mode = "off"
        inv = inv._replace(calls=inv.calls + 1)
    if x.dtype != work or y.dtype != work:
        x, y = x.to(work), y.to(work)
    if mode != "off":  # counted ("count"), or counted and left out ("drop")
        inv = _inputs.flag_nonfinite(inv, torch.stack((x, y), 1).reshape(rows, -1))
    b = torch.sub(y, x) if layout == "r2" else y  # no fused mse_loss here: it specializes traces on the size
    count, w = rows, None
    if mode == "drop":
        w = (_inputs.row_weights(x) * _inputs.row_weights(b))[:, None]
        x = torch.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
        b = torch.nan_to_num(b, nan=0.0, posinf=0.0, neginf=0.0)
        total = w.sum()
        count = total.to(torch.int64)
        first = torch.stack(((x * w).sum(0), (b * w).sum(0))) / torch.clamp(total, min=1)
    else:
        first = torch.stack((x[0], b[0]))
    if layout == "residual":  # the residual's first value: e = p - t
        first = torch.stack((first[0], first[1] - first[0]))
    first = first[:state.shift.shape[0]].to(state.shift.dtype)
    k = torch.where(state.n > 0, state.shift, _shift_of(layout, first))
    batch = _batch(layout, x, b, _row_shifts(layout, k).to(work), w)
    if eager:
        _inputs.check_sum(name, ("preds", "target"), batch.detach().numpy(), *raw)
    return type(state)(state.n + count, k, torch.add(state.sums, batch), inv)  # float64 by type promotion


def _batch(layout: str, x, b, k, w=None, rss=None) -> torch.Tensor:
    """The batch's sums in the work dtype (rows as in `LAYOUTS`) from ``x`` and ``b`` (preds, or the residual in
    a fresh buffer; ``None`` with ``rss``, the residual's sum of squares), shifts ``k``, row weights ``w``."""
    ks = k.unbind(0) if layout != "r2" else (k,)  # one call for both rows; "r2"'s (1, D) broadcasts as it is
    a, b = _centred(layout, x, b, lambda z, i: torch.sub(z, ks[i]))
    if w is not None:
        a, b = a.mul_(w), b.mul_(w)
    return _sums(layout, a, b, rss)


def _centred(layout: str, x, b, sub):
    """``(x - K_0, b')`` with ``b' = b - K_1`` (``"pair"``), ``(b - K_1) - (x - K_0)`` (``"residual"``: ``b``
    holds preds) or ``b`` itself (``"r2"``); ``sub(z, i)`` is ``z - K_i`` in a fresh buffer."""
    a = sub(x, 0)
    if layout == "pair":
        b = sub(b, 1)
    elif layout == "residual":  # e - K_e = (p - K_p) - (t - K_t)
        b = sub(b, 1).sub_(a)
    return a, b


def _sums(layout: str, a, b, rss=None, square_a=_inputs.square, square_b=_inputs.square) -> torch.Tensor:
    """The rows of `LAYOUTS` from the shifted buffers ``a`` and ``b`` (squared in place where autograd allows;
    ``square_a`` / ``square_b``: how)."""
    if layout == "pair":
        parts = [a.sum(0), b.sum(0)]
        cross = (a * b).sum(0)
        return torch.stack(parts + [square_a(a).sum(0), square_b(b).sum(0), cross])
    if layout == "r2":
        return torch.stack((a.sum(0), square_a(a).sum(0), square_b(b).sum(0) if rss is None else rss))
    return torch.stack((a.sum(0), b.sum(0), square_a(a).sum(0), square_b(b).sum(0)))


def _square_(z: torch.Tensor) -> torch.Tensor:
    return z.mul_(z)


def _square(z: torch.Tensor) -> torch.Tensor:
    return z * z


def _steady(state, n: int, x, y, layout: str, name: str, raw: tuple):
    """`update` in its steady state on CPU in eager mode (a non-empty state, float32 / float64 inputs of one
    dtype, no autograd, ``nan_strategy="error"``): the fewest calls, as after a large batch's passes each small
    one costs a few µs (one torch add per field, one ``tolist`` for the check, the shifts from `_wide_shifts`).
    The first pass reads both inputs from memory and writes one buffer: R²'s ``(p - t)^2`` (fused), the
    residual ``p - t`` (shifted in place by ``K_e`` where that is exact in the work dtype). A variable near 0
    for its spread is re-based once to shift 0 (`_wide_shifts`); the batches then skip its shift pass."""
    rows, cols = x.shape
    tile = _tile(rows) if x.is_contiguous() and y.is_contiguous() else 1
    k, residual_exact, rebase, zero = _wide_shifts(state, n, layout, x.dtype, tile)
    if rebase is not None:
        state = state._replace(shift=rebase, sums=_rebased(state, rebase))
        k, residual_exact, rebase, zero = _wide_shifts(state, n, layout, x.dtype, tile)
    if layout == "residual" and not residual_exact:  # the two-subtraction form writes into its second buffer
        zero = (False,) * len(zero)

    def sub(z, i):  # z - K_i over (rows / tile, tile D) views; z itself where K_i is 0
        return z if zero[i] else torch.sub(z.view(-1, cols * tile), k[i]).view(rows, cols)

    square = [_square if z else _square_ for z in zero]  # an input itself is squared out of place
    if layout == "r2":  # the binding behind F.mse_loss (reduction 0: none), without its broadcast and checks
        rss = torch._C._nn.mse_loss(y, x, 0).sum(0)
        batch = _sums(layout, sub(x, 0), None, rss, square[0])
    elif layout == "residual" and residual_exact:  # e - K_e = (p - t) - K_e, e a fresh buffer
        e = torch.sub(y, x)
        batch = _sums(layout, sub(x, 0), e if zero[2] else e.view(-1, cols * tile).sub_(k[2]).view(rows, cols),
                      square_a=square[0], square_b=_square_)
    else:
        batch = _sums(layout, *_centred(layout, x, y, sub), square_a=square[0], square_b=square[1])
    _inputs.check_sum(name, ("preds", "target"), batch, *raw)
    inv = state.invalid
    return type(state)(host_plus(n, rows), state.shift, torch.add(state.sums, batch),
                       validation.Invalid(inv.count, inv.first, inv.call, host_plus(inv.calls, 1)))


def _tile(rows: int) -> int:
    """How many rows of a contiguous ``(rows, D)`` batch `_steady` subtracts as one: the largest power of two up
    to 64 that divides ``rows`` (a broadcast over 16 columns costs torch ~1.5x a flat pass)."""
    return math.gcd(rows, 64)


_WIDE = [None]  # the last `_wide_shifts` result and what it was made from


def _wide_shifts(state, n: int, layout: str, dtype: torch.dtype, tile: int):
    """``(k, residual_exact, rebase, zero)`` for `_steady`: the input rows' shifts (`_row_shifts`, ``(S, D)``;
    for ``"residual"`` a third row, ``K_e``) in ``dtype`` (float32 values: exact), each tiled ``tile`` times:
    ``(S, tile D)``; whether ``K_e`` is exact in ``dtype`` (``K_p - K_t`` of two float32 values need not be);
    the shift to re-base the state to once, or ``None``: 0 for each shifted variable whose mean so far lies
    within its standard deviation of 0 in every column (``mean^2 <= var``: raw values then lose no more to
    rounding than values shifted by one sample; the residual layout's target only with its residual, so that
    ``K_p`` stays a float32 value); and which rows of ``k`` are 0 (`_steady` skips their subtraction).
    Reused while the same, unmodified shift tensor comes back (a state passes its shift on from update to
    update): a fresh small tensor each update costs a few µs after a large batch, and the decision reads the
    sums once."""
    shift = state.shift
    key = (shift._version, layout, dtype, tile)
    last = _WIDE[0]
    if last is not None and last[0]() is shift and last[1] == key:
        return last[2]
    rows = _row_shifts(layout, shift)
    if layout == "residual":
        rows = torch.cat((rows, shift[1:]))
    k = rows.to(dtype)
    s1 = state.sums[:shift.shape[0]] / n
    near = ((shift + s1).square() <= state.sums[shift.shape[0]:2 * shift.shape[0]] / n - s1.square()).all(-1)
    if layout == "residual":
        near[0] &= near[1]
    moved = near & shift.any(-1)
    rebase = torch.where(near[:, None], 0.0, shift) if bool(moved.any()) else None
    found = (k.repeat(1, tile), bool(torch.equal(k.to(rows.dtype), rows)), rebase,
             tuple(not r for r in k.any(-1).tolist()))
    _WIDE[0] = (weakref.ref(shift), key, found)
    return found


NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


def _host_update(state, x, y, layout: str, mode: str, name: str, raw: tuple):
    """`update` of a small CPU batch in numpy (`_host`: ufuncs dispatch in under 1 µs): the same shift and
    work dtype, one ``(rows, N, D)`` buffer of shifted values, squares (and products), one float64 sum."""
    dtype = NUMPY[_inputs.work_dtype(state.sums.dtype, x, y, exact=False)]
    shifts, size = LAYOUTS[layout]
    n = int(state.n)
    xs, ys = x.numpy(), y.numpy()
    buf = np.empty((size, *xs.shape), dtype=dtype)
    with np.errstate(all="ignore"):  # non-finite input: raised below ("count") or propagated ("off")
        buf[0] = xs
        if layout == "r2":  # the residual in row 2
            np.subtract(ys, xs, out=buf[2], dtype=dtype)
        else:
            buf[1] = ys
        if n > 0:
            shift = state.shift
        else:  # the first row, as float32 values (`_shift_of`)
            k = np.clip(buf[:shifts, 0], -F32_MAX, F32_MAX).astype(np.float32).astype(np.float64)
            if layout == "residual":
                k[1] -= k[0]
            shift = torch.from_numpy(k)
        k = _row_shifts(layout, shift.numpy())
        z = np.subtract(buf[:shifts], k.astype(dtype)[:, None], out=buf[:shifts])
        if layout == "r2":
            np.multiply(z[0], z[0], out=buf[1])
            np.multiply(buf[2], buf[2], out=buf[2])
        else:
            if layout == "residual":  # e - K_e = (p - K_p) - (t - K_t)
                np.subtract(z[1], z[0], out=z[1])
            np.multiply(z, z, out=buf[2:4])
        if layout == "pair":
            np.multiply(z[0], z[1], out=buf[4])
        batch = np.add.reduce(buf, 1, dtype=np.float64)
    inv = state.invalid
    if mode == "count":
        _inputs.check_sum(name, ("preds", "target"), batch, *raw)
        inv = validation.Invalid(inv.count, inv.first, inv.call, host_plus(inv.calls, 1))
    return type(state)(host_plus(state.n, x.shape[0]), shift, torch.from_numpy(state.sums.numpy() + batch), inv)


def merge(a, b):
    """``a`` and ``b`` on ``a``'s shift (``b``'s when ``a`` is empty), re-based exactly in float64."""
    k = torch.where(a.n > 0, a.shift, b.shift)  # b re-based onto its own shift when a is empty: d = 0
    return type(a)(a.n + b.n, k, a.sums + _rebased(b, k), validation.invalid_merge(a.invalid, b.invalid))


def _rebased(state, k: torch.Tensor) -> torch.Tensor:
    """``state``'s sums on the shift ``k``, exact in float64 (``d = K - k``): ``S1 + n d``, ``S2 + 2 d S1 + n
    d^2``, ``Sxy + dx S1y + dy S1x + n dx dy``; the residual's plain sum of squares (``"r2"``) as it is."""
    d = state.shift - k
    n = state.n.to(d.dtype)
    shifts, size = d.shape[-2], state.sums.shape[-2]
    s1 = state.sums[:shifts]
    parts = [n * d, d * (2 * s1 + n * d)]
    if size == 5:  # the cross sum
        parts.append((d[0] * s1[1] + d[1] * s1[0] + n * d[0] * d[1])[None])
    elif size == 3:
        parts.append(torch.zeros_like(d))
    return state.sums + torch.cat(parts)


def centred(state, centred_type):
    """The exact centred view ``centred_type(n, mean, m2[, c_xy], invalid)`` of a shifted state
    (`_moments`' layout, which the finalizers read); a centred state is returned as it is. In the ``"r2"``
    layout the residual's moments are about 0 (mean 0, ``M2 = sum e^2``: the same ``RSS = M2 + n mean^2``).
    Leading dimensions (stacked states) broadcast."""
    if isinstance(state, _CENTRED_TYPES[0]):
        return state
    sums, shifts = state.sums, state.shift.shape[-2]
    s1 = sums[..., :shifts, :]
    n = torch.clamp(state.n, min=1).to(s1.dtype)[..., None, None]
    w = s1 / n
    mean, m2 = state.shift + w, torch.clamp(sums[..., shifts:2 * shifts, :] - s1 * w, min=0)
    if shifts == 1:  # "r2": the residual's moments about 0
        mean, m2 = torch.cat((mean, torch.zeros_like(mean)), -2), torch.cat((m2, sums[..., 2:, :]), -2)
    fields = [state.n, mean, m2]
    if sums.shape[-2] == 5:
        fields.append(sums[..., 4, :] - s1[..., 0, :] * w[..., 1, :])
    return centred_type(*fields, state.invalid)


def from_centred(state, shifted_type):
    """The ``shifted_type`` state of a centred one (``K`` = its mean rounded to float32; exact up to float64
    rounding). Leading dimensions (stacked states) broadcast."""
    shifts, size = LAYOUTS[_LAYOUT[shifted_type]]
    mean = state.mean[..., :shifts, :]
    k = torch.where((state.n > 0)[..., None, None], _shift_of(_LAYOUT[shifted_type], mean), 0)
    d = mean - k
    n = state.n.to(d.dtype)[..., None, None]
    s1 = n * d
    parts = [s1, state.m2[..., :shifts, :] + s1 * d]
    if size == 5:
        parts.append((state.c_xy + s1[..., 0, :] * d[..., 1, :]).unsqueeze(-2))
    elif size == 3:  # the residual's sum of squares M2_e + n mean_e^2
        parts.append(state.m2[..., 1:, :] + n * state.mean[..., 1:, :] ** 2)
    return shifted_type(state.n, k, torch.cat(parts, -2), state.invalid)


def weigh_rows(rows, weights: torch.Tensor):
    """`Metric.weigh_rows` of shifted one-row states ``(B, ...)`` (``n`` 1, or 0 for a row left out): the
    rows' values ``z = K + S1`` shifted by their mean ``k`` (rounded to float32), ``c = z - k``, and with
    ``W = weights n`` (``(R, B)``) one contraction gives ``S1 = W c``, ``S2 = W c^2``, ``Sxy = W c_x c_y``
    and a plain sum of squares ``W RSS`` (layout ``"r2"``): state ``r`` holds row ``i`` ``weights[r, i]``
    times, exactly as repeated merges."""
    shifts, size = LAYOUTS[_LAYOUT[type(rows)]]
    n = rows.n.to(rows.sums.dtype)
    per_row = 1 / torch.clamp(n, min=1)[:, None, None]
    z = rows.shift + rows.sums[:, :shifts] * per_row  # (B, S, D)
    k = _shift_of(_LAYOUT[type(rows)], (z * n[:, None, None]).sum(0) / torch.clamp(n.sum(), min=1))
    c = z - k
    parts = [c, c * c]
    if size == 5:
        parts.append((c[:, 0] * c[:, 1])[:, None])
    elif size == 3:
        parts.append(rows.sums[:, 2:] * per_row)
    w = weights.to(c.dtype) * n
    per_row = torch.cat(parts, 1)
    sums = (w @ per_row.reshape(per_row.shape[0], -1)).reshape(w.shape[0], *per_row.shape[1:])
    count = w.sum(-1).round().to(rows.n.dtype)
    return type(rows)(count, k.expand(w.shape[0], *k.shape), sums, _moments._weigh_invalid(rows.invalid, weights))


_LAYOUT: dict = {}  # shifted state type -> its layout (filled by `pair_types`)
_CENTRED_TYPES = [()]  # the centred types, as one tuple for isinstance


def pair_types(centred_type, shifted_type, layout: str) -> None:
    """Declares the exact (centred) and fast (shifted, in ``layout``) forms of one state, for the conversions."""
    _LAYOUT[shifted_type] = layout
    _CENTRED_TYPES[0] = tuple(set(_CENTRED_TYPES[0]) | {centred_type})
