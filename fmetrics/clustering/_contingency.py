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

__all__ = ["TableState", "LabelState", "contingency_family", "table", "check_labels", "tensors"]


class TableState(NamedTuple):
    counts: torch.Tensor  # int64 [K, K]: counts[target, pred]
    invalid: validation.Invalid


class LabelState(NamedTuple):
    preds: tuple  # chunks of labels (int64, or float64 where NaN may appear)
    target: tuple
    invalid: validation.Invalid  # non-finite labels (deferred check)


def tensors(name: str, preds, target) -> tuple[torch.Tensor, torch.Tensor]:
    """``(preds, target)`` when both are tensors; else the error naming the argument (lists are not converted)."""
    for arg, x in (("preds", preds), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise validation.fail(name, arg, "a tensor (convert lists with torch.as_tensor)", type(x).__name__)
    return preds, target


def check_labels(name: str, preds: torch.Tensor, target: torch.Tensor, allow_float: bool = False) -> None:
    """Shape and dtype checks (metadata only)."""
    tensors(name, preds, target)
    if preds.shape != target.shape or preds.dim() != 1:
        raise validation.fail(name, "preds/target", "1-D tensors of one shape",
                              f"{tuple(preds.shape)} and {tuple(target.shape)}")
    for arg, x in (("preds", preds), ("target", target)):
        if x.is_complex() or (x.is_floating_point() and not allow_float) or x.dtype == torch.bool:
            raise validation.fail(name, arg, "integer labels", str(x.dtype))


def _nonfinite(p: torch.Tensor, t: torch.Tensor, keep) -> tuple[torch.Tensor, torch.Tensor]:
    """``(bad rows, the offending value per row)``: a NaN or inf label in a row not left out by ``keep``."""
    finite_p = torch.isfinite(p)
    bad = ~(finite_p & torch.isfinite(t))
    return (bad if keep is None else bad & keep), torch.where(finite_p, t, p)


def _flag_nonfinite(inv: validation.Invalid, p: torch.Tensor, t: torch.Tensor, keep) -> validation.Invalid:
    if not (p.is_floating_point() or t.is_floating_point()):  # integer labels: nothing to flag, one call more
        return validation.invalid_flag(inv, torch.zeros(0, dtype=torch.bool, device=p.device), p)
    return validation.invalid_flag(inv, *_nonfinite(p, t, keep))


def _off_grid(x: torch.Tensor, k: int) -> torch.Tensor:
    """Labels outside ``[0, k)`` or not whole numbers (NaN included)."""
    bad = (x < 0) | (x >= k)
    return bad | (x != x.floor()) if x.is_floating_point() else bad


def contingency_family(name: str, num_clusters: Optional[int], prepare: Optional[Callable] = None,
                       key: tuple = (), allow_float: bool = False, arg: str = "num_clusters",
                       what: str = "labels") -> Family:
    """The family over one label table; ``prepare(preds, target) -> (preds, target, keep)`` maps raw inputs
    to labels (nominal data: NaN handling, one-hot argmax) before counting. ``arg`` names the size argument
    and ``what`` the inputs in errors (nominal data: ``"num_categories"``, ``"categories"``)."""
    if num_clusters is not None and (not isinstance(num_clusters, int) or isinstance(num_clusters, bool)
                                     or num_clusters < 1):
        raise validation.fail(name, arg, "a positive int or None", repr(num_clusters))
    prep = prepare or (lambda p, t: (p, t, None))
    finite_rule = f"{what} must be finite (no NaN or inf)"

    if num_clusters is None:
        def init():
            return LabelState((), (), validation.invalid_init())

        def update(state, preds, target):
            p, t, keep = prep(*tensors(name, preds, target))
            check_labels(name, p, t, allow_float=True)
            invalid = _flag_nonfinite(state.invalid, p, t, keep)
            dtype = torch.float64 if (p.is_floating_point() or t.is_floating_point()) else torch.int64
            if keep is not None:  # dropped rows become NaN; finalize leaves them out
                dtype = torch.float64
                p = torch.where(keep, p.to(dtype), float("nan"))
                t = torch.where(keep, t.to(dtype), float("nan"))
            # a copy the caller cannot change later (to() copies only when the dtype differs)
            return LabelState((p.detach().to(dtype, copy=True),), (t.detach().to(dtype, copy=True),), invalid)

        def merge(a, b):
            return LabelState(a.preds + b.preds, a.target + b.target, validation.invalid_merge(a.invalid, b.invalid))

        def check(preds, target):
            p, t, keep = prep(*tensors(name, preds, target))
            check_labels(name, p, t, allow_float=True)
            for arg, x in (("preds", p), ("target", t)):
                if not x.is_floating_point():
                    continue
                bad = ~torch.isfinite(x) if keep is None else ~torch.isfinite(x) & keep
                if bool(bad.any()):
                    raise ValueError(f"{name}: argument `{arg}`: {finite_rule}; found {validation.quote(x[bad])}")

        def shared(state):
            validation.invalid_report(name, finite_rule, state.invalid)
            return _labels_table(state)

        return Family(name="contingency_labels", key=key, init=init, update=update, merge=merge, check=check,
                      reductions=LabelState(preds="cat", target="cat", invalid=None), shared=shared)

    k = num_clusters
    range_rule = f"{what} must be {'whole numbers ' if allow_float else ''}in [0, {k}) ({arg}={k})"

    def init():
        return TableState(torch.zeros(k, k, dtype=torch.int64), validation.invalid_init())

    def update(state, preds, target):
        p, t, keep = prep(*tensors(name, preds, target))
        check_labels(name, p, t, allow_float=allow_float)
        p, t = p.detach(), t.detach()
        bad = _off_grid(p, k) | _off_grid(t, k)
        if keep is not None:
            bad = bad & keep
        good = ~bad if keep is None else keep & ~bad
        zero = torch.zeros((), dtype=p.dtype, device=p.device)
        flat = torch.where(good, t, zero).to(torch.int64) * k + torch.where(good, p, zero).to(torch.int64)
        counts = state.counts.reshape(-1).index_add(0, flat, good.to(torch.int64)).reshape(k, k)
        worst = torch.where(_off_grid(p, k), p, t)
        return TableState(counts, validation.invalid_flag(state.invalid, bad, worst))

    def merge(a, b):
        return TableState(a.counts + b.counts, validation.invalid_merge(a.invalid, b.invalid))

    def check(preds, target):
        p, t, keep = prep(*tensors(name, preds, target))
        check_labels(name, p, t, allow_float=allow_float)
        bad_p, bad_t = _off_grid(p, k), _off_grid(t, k)
        if keep is not None:
            bad_p, bad_t = bad_p & keep, bad_t & keep
        args = [arg for arg, bad in (("preds", bad_p), ("target", bad_t)) if bool(bad.any())]
        if args:
            raise ValueError(f"{name}: argument `{'` and `'.join(args)}`: {range_rule}; found "
                             f"{validation.quote(torch.cat([p[bad_p], t[bad_t]]))}")

    def shared(state):
        validation.invalid_report(name, range_rule, state.invalid)
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
