"""The contingency family: extrinsic clustering scores and nominal association over one label table.

Two state layouts, chosen by whether the number of labels is known:

* ``num_clusters`` given -- a dense ``int64`` table ``[K, K]`` (rows: target
  labels, columns: predicted labels), sum-mergeable: exact across ranks in one
  all-reduce. Labels must lie in ``[0, K)``.
* ``num_clusters=None`` -- the labels themselves, as chunks (any integer ids,
  large or non-contiguous); the table is built once in `finalize`. ``update``
  never calls ``unique``.

The shared step (`table`) returns the table in float64 without empty rows and
columns; every finalizer of the family starts from it, so a collection of
ARI, NMI and AMI builds it once.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.state import cat_chunks

__all__ = ["TableState", "LabelState", "contingency_family", "table", "check_labels"]


class TableState(NamedTuple):
    counts: torch.Tensor  # int64 [K, K]: counts[target, pred]
    invalid: validation.Invalid


class LabelState(NamedTuple):
    preds: tuple  # chunks of labels (int64, or float64 where NaN may appear)
    target: tuple


def check_labels(name: str, preds: torch.Tensor, target: torch.Tensor, allow_float: bool = False) -> None:
    """Shape and dtype checks (metadata only)."""
    if not isinstance(preds, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise validation.fail(name, "preds/target", "tensors", f"{type(preds).__name__}, {type(target).__name__}")
    if preds.shape != target.shape or preds.dim() != 1:
        raise validation.fail(name, "preds/target", "1-D tensors of one shape",
                              f"{tuple(preds.shape)} and {tuple(target.shape)}")
    for arg, x in (("preds", preds), ("target", target)):
        if x.is_complex() or (x.is_floating_point() and not allow_float) or x.dtype == torch.bool:
            raise validation.fail(name, arg, "integer labels", str(x.dtype))


def contingency_family(name: str, num_clusters: Optional[int], prepare: Optional[Callable] = None,
                       key: tuple = (), allow_float: bool = False) -> Family:
    """The family over one label table; ``prepare(preds, target) -> (preds, target, keep)`` maps raw inputs
    to labels (nominal data: NaN handling, one-hot argmax) before counting."""
    if num_clusters is not None and (not isinstance(num_clusters, int) or isinstance(num_clusters, bool)
                                     or num_clusters < 1):
        raise validation.fail(name, "num_clusters", "a positive int or None", repr(num_clusters))
    prep = prepare or (lambda p, t: (p, t, None))

    if num_clusters is None:
        def init():
            return LabelState((), ())

        def update(state, preds, target):
            p, t, keep = prep(preds, target)
            check_labels(name, p, t, allow_float=True)
            dtype = torch.float64 if (p.is_floating_point() or t.is_floating_point()) else torch.int64
            if keep is not None:  # dropped rows become NaN; finalize leaves them out
                dtype = torch.float64
                p = torch.where(keep, p.to(dtype), float("nan"))
                t = torch.where(keep, t.to(dtype), float("nan"))
            # a copy the caller cannot change later (to() copies only when the dtype differs)
            return LabelState((p.detach().to(dtype, copy=True),), (t.detach().to(dtype, copy=True),))

        return Family(name="contingency_labels", key=key, init=init, update=update,
                      reductions=LabelState(preds="cat", target="cat"), shared=_labels_table)

    k = num_clusters

    def init():
        return TableState(torch.zeros(k, k, dtype=torch.int64), validation.invalid_init())

    def update(state, preds, target):
        p, t, keep = prep(preds, target)
        check_labels(name, p, t, allow_float=allow_float)
        p, t = p.detach(), t.detach()
        bad = (p < 0) | (p >= k) | (t < 0) | (t >= k)
        if p.is_floating_point():
            bad = bad | (p != p.floor()) | (t != t.floor())
        if keep is not None:
            bad = bad & keep
        good = ~bad if keep is None else keep & ~bad
        zero = torch.zeros((), dtype=p.dtype, device=p.device)
        flat = torch.where(good, t, zero).to(torch.int64) * k + torch.where(good, p, zero).to(torch.int64)
        counts = state.counts.reshape(-1).index_add(0, flat, good.to(torch.int64)).reshape(k, k)
        worst = torch.where((p < 0) | (p >= k), p, t)
        return TableState(counts, validation.invalid_flag(state.invalid, bad, worst))

    def merge(a, b):
        return TableState(a.counts + b.counts, validation.invalid_merge(a.invalid, b.invalid))

    def check(preds, target):
        p, t, keep = prep(preds, target)
        check_labels(name, p, t, allow_float=allow_float)
        bad = (p < 0) | (p >= k) | (t < 0) | (t >= k)
        if keep is not None:
            bad = bad & keep
        if bool(bad.any()):
            vals = torch.cat([p[bad & ((p < 0) | (p >= k))], t[bad & ((t < 0) | (t >= k))]])
            raise ValueError(f"{name}: labels must be in [0, {k}) (num_clusters={k}); found {validation.quote(vals)}")

    def shared(state):
        validation.invalid_report(name, f"labels in [0, {k})", state.invalid)
        return _dense_table(state.counts)

    return Family(name="contingency_table", key=(k, *key), init=init, update=update,
                  reductions=TableState(counts="sum", invalid=None), merge=merge, shared=shared, check=check)


def _dense_table(counts: torch.Tensor) -> torch.Tensor:
    t = counts.to(torch.float64)
    return t[t.sum(1) > 0][:, t.sum(0) > 0]


def _labels_table(state: LabelState) -> torch.Tensor:
    empty = torch.zeros(0, dtype=torch.int64)
    p = cat_chunks(state.preds, empty)
    t = cat_chunks(state.target, empty)
    if p.is_floating_point():
        keep = ~(p.isnan() | t.isnan())
        p, t = p[keep], t[keep]
    return table(p, t)


def table(preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The float64 contingency table ``[#target labels, #pred labels]`` of two label vectors (finalize only)."""
    if preds.numel() == 0:
        return torch.zeros(0, 0, dtype=torch.float64, device=preds.device)
    ti, r = _dense_ids(target)
    pi, c = _dense_ids(preds)
    flat = torch.bincount(ti * c + pi, minlength=r * c)
    return flat.reshape(r, c).to(torch.float64)


def _dense_ids(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Labels renumbered 0..L-1 in sorted order, and L: one bincount when the id range is small, else a sort."""
    lo, hi = (int(v) for v in torch.aminmax(x))
    if not x.is_floating_point() and hi - lo < max(1 << 20, 4 * x.numel()):
        shifted = x - lo
        present = torch.bincount(shifted, minlength=hi - lo + 1) > 0
        rank = torch.cumsum(present, 0) - 1
        return rank[shifted], int(present.sum())
    values, inverse = torch.unique(x, return_inverse=True)
    return inverse, values.numel()
