"""Panoptic quality (Kirillov et al. 2019) and its modified variant (Porzi et al. 2019), as torchmetrics.

The state is per-category sums: TP / FP / FN counts (int64) and the IoU sum of matched segments (float64),
sum-mergeable. `update` matches segments with static shapes (sorts, scatters; no Python loop over segments,
no host sync), batched over the images of the batch.
"""
from __future__ import annotations

import warnings
from typing import Collection, NamedTuple

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["panoptic_quality", "modified_panoptic_quality"]


class PanopticState(NamedTuple):
    iou_sum: torch.Tensor  # float64 [C]: IoU sum of matched segments (modified: of every overlapping stuff pair)
    true_positives: torch.Tensor  # int64 [C] (modified, stuff: number of target segments)
    false_positives: torch.Tensor  # int64 [C]
    false_negatives: torch.Tensor  # int64 [C]
    invalid: validation.Invalid  # prediction pixels of an unknown category (allow_unknown_preds_category=False)


_RULE = "prediction categories in `things` or `stuffs` (allow_unknown_preds_category=False)"


def _parse(name, things, stuffs):
    out = []
    for arg, v in (("things", things), ("stuffs", stuffs)):
        try:
            vals = list(v)
        except TypeError:
            raise validation.fail(name, arg, "a collection of int category ids", repr(v)) from None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
            raise validation.fail(name, arg, "a collection of int category ids", repr(v))
        out.append(tuple(sorted(set(vals))))
    t, s = out
    if set(t) & set(s):
        raise validation.fail(name, "things, stuffs", "disjoint sets of category ids",
                              f"{sorted(set(t) & set(s))} in both")
    if not t and not s:
        raise validation.fail(name, "things, stuffs", "at least one category id", "two empty collections")
    return t, s


def _check_shapes(name, preds, target):
    for arg, x in (("preds", preds), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise validation.fail(name, arg, "a tensor", type(x).__name__)
        if x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
            raise validation.fail(name, arg, "an integer tensor of (category_id, instance_id) pairs", x.dtype)
    if preds.shape != target.shape:
        raise validation.fail(name, "preds, target", "equal shapes", f"{tuple(preds.shape)} and {tuple(target.shape)}")
    if preds.dim() < 3 or preds.shape[-1] != 2:
        raise validation.fail(name, "preds", "shape [B, *spatial, 2] (category_id, instance_id per pixel)",
                              tuple(preds.shape))


def _dense_rank(key: torch.Tensor) -> torch.Tensor:
    """Per row, the rank of each entry among the row's distinct values ([B, N] -> [B, N] in [0, N))."""
    sv, order = torch.sort(key, dim=1)
    new = torch.cat([torch.ones_like(sv[:, :1], dtype=torch.bool), sv[:, 1:] != sv[:, :-1]], dim=1)
    ranks = torch.cumsum(new.to(torch.int64), 1) - 1
    return torch.zeros_like(ranks).scatter(1, order, ranks)


def _family(name: str, things: tuple, stuffs: tuple, allow_unknown: bool, modified: bool) -> Family:
    nt, ns = len(things), len(stuffs)
    n_cat = nt + ns  # continuous ids: things sorted, then stuffs sorted; n_cat is "void"
    sorted_ids = sorted(things + stuffs)
    cont_of = {c: i for i, c in enumerate(things)}
    cont_of.update({c: nt + i for i, c in enumerate(stuffs)})
    table = torch.tensor([sorted_ids, [cont_of[c] for c in sorted_ids]], dtype=torch.int64)  # ids, continuous ids
    table_on = {table.device: table}
    known_ids = set(sorted_ids)

    def ids_on(dev: torch.device) -> torch.Tensor:
        """The id table on ``dev``, copied there once (a host-to-device copy in each update syncs a GPU)."""
        t = table_on.get(dev)
        if t is None:
            t = table.to(dev)
            if not torch.compiler.is_compiling():
                table_on[dev] = t
        return t

    def colors(x: torch.Tensor):
        """([B, N] continuous category (void = n_cat), [B, N] instance id (0 for stuff and void))."""
        n = 1
        for d in x.shape[1:-1]:
            n *= d
        cat = x[..., 0].reshape(x.shape[0], n).to(torch.int64).contiguous()
        inst = x[..., 1].reshape(x.shape[0], n).to(torch.int64)
        ids, lut = ids_on(x.device)
        pos = torch.searchsorted(ids, cat).clamp(max=len(sorted_ids) - 1)
        known = ids.gather(0, pos.reshape(-1)).reshape(pos.shape) == cat
        cont = torch.where(known, lut.gather(0, pos.reshape(-1)).reshape(pos.shape), n_cat)
        inst = torch.where(known & (cont < nt), inst, 0)
        return cont, inst, known

    def init() -> PanopticState:
        z = lambda dtype: torch.zeros(n_cat, dtype=dtype)  # noqa: E731
        return PanopticState(z(torch.float64), z(torch.int64), z(torch.int64), z(torch.int64),
                             validation.invalid_init())

    def check(preds, target):
        _check_shapes(name, preds, target)
        if allow_unknown:
            return
        cat = preds[..., 0].reshape(-1)
        ids = torch.tensor(sorted_ids, dtype=cat.dtype)
        bad = ~torch.isin(cat, ids)
        if bool(bad.any()):
            raise ValueError(f"{name}: argument `preds` expected {_RULE}; found unknown categories "
                             f"{validation.quote(cat[bad])} (known: {sorted(known_ids)})")

    def update(s: PanopticState, preds: torch.Tensor, target: torch.Tensor) -> PanopticState:
        _check_shapes(name, preds, target)
        preds, target = preds.detach(), target.detach()
        pc, pi, pknown = colors(preds)
        tc, ti, _ = colors(target)
        n = pc.shape[1]
        rp = _dense_rank(pc * n + _dense_rank(pi))  # color ids, dense per image: [B, N] in [0, N)
        rt = _dense_rank(tc * n + _dense_rank(ti))
        ones = torch.ones_like(rp)
        zeros = torch.zeros_like(rp)
        parea = zeros.scatter_add(1, rp, ones)  # pixels per pred color
        tarea = zeros.scatter_add(1, rt, ones)
        tvoid, pvoid = tc == n_cat, pc == n_cat
        p_in_void = zeros.scatter_add(1, rp, tvoid.to(torch.int64))  # pred color pixels on target void
        t_in_void = zeros.scatter_add(1, rt, pvoid.to(torch.int64))  # target color pixels on pred void
        void_cat = torch.full_like(rp, n_cat)
        pcat_r = void_cat.scatter(1, rp, pc)  # category of each pred color (n_cat where unused)
        tcat_r = void_cat.scatter(1, rt, tc)
        # (pred color, target color) pairs with their intersection, one slot per distinct pair
        key, _ = torch.sort(rp * n + rt, dim=1)
        new = torch.cat([torch.ones_like(key[:, :1], dtype=torch.bool), key[:, 1:] != key[:, :-1]], dim=1)
        seg = torch.cumsum(new.to(torch.int64), 1) - 1
        inter = zeros.scatter_add(1, seg, ones)
        pair = zeros.scatter(1, seg, key)
        pr, tr = pair // max(n, 1), pair % max(n, 1)
        pcat, tcat = pcat_r.gather(1, pr), tcat_r.gather(1, tr)
        cand = (inter > 0) & (tcat != n_cat) & (pcat == tcat)
        union = parea.gather(1, pr) - p_in_void.gather(1, pr) + tarea.gather(1, tr) - t_in_void.gather(1, tr) - inter
        iou = inter.to(torch.float64) / union.clamp(min=1).to(torch.float64)
        is_stuff = (tcat >= nt) & (tcat < n_cat)
        plain = ~is_stuff if modified else torch.ones_like(cand)
        match = cand & plain & (2 * inter > union)
        counted = match | (cand & ~plain) if modified else match  # modified: every overlapping stuff pair
        pm = zeros.scatter_add(1, pr, match.to(torch.int64)) > 0
        tm = zeros.scatter_add(1, tr, match.to(torch.int64)) > 0
        tcolor = (tarea > 0) & (tcat_r != n_cat)
        pcolor = (parea > 0) & (pcat_r != n_cat)
        t_plain = tcat_r < nt if modified else torch.ones_like(tcolor)
        p_plain = pcat_r < nt if modified else torch.ones_like(pcolor)
        fn = tcolor & t_plain & ~tm & (2 * t_in_void <= tarea)
        fp = pcolor & p_plain & ~pm & (2 * p_in_void <= parea)
        tp = match.to(torch.int64)

        def per_cat(cat, val, dtype):
            return torch.zeros(n_cat + 1, dtype=dtype, device=cat.device).scatter_add(
                0, cat.reshape(-1), val.reshape(-1).to(dtype))[:n_cat]

        tp_c = per_cat(tcat, tp, torch.int64)
        if modified:  # stuff: TP counts the target segments
            tp_c = tp_c + per_cat(tcat_r, tcolor & ~t_plain, torch.int64)
        iou_c = per_cat(tcat, torch.where(counted, iou, 0.0), torch.float64)
        bad = ~pknown if not allow_unknown else torch.zeros_like(pknown)
        return PanopticState(s.iou_sum + iou_c, s.true_positives + tp_c,
                             s.false_positives + per_cat(pcat_r, fp, torch.int64),
                             s.false_negatives + per_cat(tcat_r, fn, torch.int64),
                             validation.invalid_flag(s.invalid, bad, preds[..., 0]))

    def merge(a: PanopticState, b: PanopticState) -> PanopticState:
        return PanopticState(a.iou_sum + b.iou_sum, a.true_positives + b.true_positives,
                             a.false_positives + b.false_positives, a.false_negatives + b.false_negatives,
                             validation.invalid_merge(a.invalid, b.invalid))

    def shared(s: PanopticState):
        validation.invalid_report(name, _RULE, s.invalid)
        tp = s.true_positives.to(torch.float64)
        sq = torch.where(tp > 0, s.iou_sum / tp.clamp(min=1), 0.0)
        den = tp + 0.5 * s.false_positives.to(torch.float64) + 0.5 * s.false_negatives.to(torch.float64)
        rq = torch.where(den > 0, tp / torch.where(den > 0, den, 1.0), 0.0)
        return sq * rq, sq, rq, den > 0

    tags = PanopticState("sum", "sum", "sum", "sum", None)
    return Family(name="panoptic_quality", key=(things, stuffs, allow_unknown, modified), init=init, update=update,
                  reductions=tags, merge=merge, shared=shared, check=check)


def _warn_empty(name: str, seen: torch.Tensor) -> None:
    """Warns when no category was seen: the average is then NaN (docs/conventions.md, "Empty input")."""
    if not bool(seen.any()):
        warnings.warn(f"{name}: no segment of a known category was seen (empty input); the value is undefined "
                      "and set to NaN", UserWarning, stacklevel=4)


def _mean(x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean over the categories seen (``NaN`` when none was)."""
    k = keep.sum()
    return torch.where(k > 0, torch.where(keep, x, 0.0).sum() / k.clamp(min=1), torch.nan)


@factory
def panoptic_quality(*, things: Collection[int], stuffs: Collection[int], allow_unknown_preds_category: bool = False,
                     return_sq_and_rq: bool = False, return_per_class: bool = False) -> Metric:
    """Panoptic quality: ``PQ = sum_TP IoU / (TP + FP/2 + FN/2) = SQ * RQ`` per category, averaged.

    A predicted and a target segment of one category match when their IoU exceeds 0.5 (pixels
    on void, i.e. an unknown category, leave the union); unmatched segments count as FP / FN
    unless more than half of them lies on void. ``SQ = sum_TP IoU / TP``, ``RQ = TP / (TP +
    FP/2 + FN/2)``; the average runs over the categories with ``TP + FP + FN > 0`` (torchmetrics'
    ``panoptic_quality``).

    Args:
      things: category ids of countable things (instances are told apart by ``instance_id``; required).
      stuffs: category ids of uncountable stuff (``instance_id`` ignored; required; disjoint from ``things``).
      allow_unknown_preds_category: a prediction category in neither set is void (``True``) or an error
        (``False``, default). Unknown target categories are always void (ignored).
      return_sq_and_rq: also return SQ and RQ (default ``False``).
      return_per_class: per-category values instead of the average (default ``False``).

    Inputs:
      ``update(state, preds, target)``: integer tensors ``[B, *spatial, 2]`` holding per pixel
      ``(category_id, instance_id)``; every image of the batch is matched on its own.

    Returns:
      float64: a scalar; ``[3]`` (PQ, SQ, RQ) with ``return_sq_and_rq``; ``[1, C]`` with
      ``return_per_class``; ``[C, 3]`` with both. Categories are ordered things (sorted), then
      stuffs (sorted). ``NaN`` and a ``UserWarning`` for the average when no category was seen.

    Example::

        >>> preds = torch.tensor([[[[6, 0], [0, 0], [6, 0], [6, 0]],
        ...                        [[0, 0], [0, 0], [6, 0], [0, 1]],
        ...                        [[0, 0], [0, 0], [6, 0], [0, 1]],
        ...                        [[0, 0], [7, 0], [6, 0], [1, 0]],
        ...                        [[0, 0], [7, 0], [7, 0], [7, 0]]]])
        >>> target = torch.tensor([[[[6, 0], [0, 1], [6, 0], [0, 1]],
        ...                         [[0, 1], [0, 1], [6, 0], [0, 1]],
        ...                         [[0, 1], [0, 1], [6, 0], [1, 0]],
        ...                         [[0, 1], [7, 0], [1, 0], [1, 0]],
        ...                         [[0, 1], [7, 0], [7, 0], [7, 0]]]])
        >>> panoptic_quality(things={0, 1}, stuffs={6, 7})(preds, target)
        tensor(0.5463, dtype=torch.float64)
        >>> panoptic_quality(things={0, 1}, stuffs={6, 7}, return_sq_and_rq=True)(preds, target)
        tensor([0.5463, 0.6111, 0.6667], dtype=torch.float64)
    """
    name = "panoptic_quality"
    t, s = _parse(name, things, stuffs)
    for arg, v in (("allow_unknown_preds_category", allow_unknown_preds_category),
                   ("return_sq_and_rq", return_sq_and_rq), ("return_per_class", return_per_class)):
        if not isinstance(v, bool):
            raise validation.fail(name, arg, "a bool", repr(v))
    fam = _family(name, t, s, allow_unknown_preds_category, False)

    def finish(prepared):
        pq, sq, rq, seen = prepared
        if return_per_class:
            return torch.stack((pq, sq, rq), dim=-1) if return_sq_and_rq else pq.reshape(1, -1)
        _warn_empty(name, seen)
        if return_sq_and_rq:
            return torch.stack((_mean(pq, seen), _mean(sq, seen), _mean(rq, seen)))
        return _mean(pq, seen)

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))


@factory
def modified_panoptic_quality(*, things: Collection[int], stuffs: Collection[int],
                              allow_unknown_preds_category: bool = False) -> Metric:
    """Modified panoptic quality (PQ-dagger): things as in PQ; a stuff category scores ``sum IoU / |S_c|``.

    For stuff, every overlapping (prediction, target) pair of the category adds its IoU (no 0.5
    threshold) and ``|S_c|`` counts the target segments of the category (one per image where
    present); stuff has no FP / FN. The average runs over categories with ``TP + FP + FN > 0``
    (torchmetrics' ``modified_panoptic_quality``, Porzi et al. 2019).

    Args:
      things: category ids of countable things (instances are told apart by ``instance_id``; required).
      stuffs: category ids of uncountable stuff (``instance_id`` ignored; required; disjoint from ``things``).
      allow_unknown_preds_category: a prediction category in neither set is void (``True``) or an error
        (``False``, default). Unknown target categories are always void (ignored).

    Inputs:
      ``update(state, preds, target)``: integer tensors ``[B, *spatial, 2]`` holding per pixel
      ``(category_id, instance_id)``; every image of the batch is matched on its own.

    Returns:
      float64 scalar (``NaN`` and a ``UserWarning`` when no category was seen).

    Example::

        >>> preds = torch.tensor([[[0, 0], [0, 1], [6, 0], [7, 0], [0, 2], [1, 0]]])
        >>> target = torch.tensor([[[0, 1], [0, 0], [6, 0], [7, 0], [6, 0], [255, 0]]])
        >>> modified_panoptic_quality(things={0, 1}, stuffs={6, 7})(preds, target)
        tensor(0.7667, dtype=torch.float64)
    """
    name = "modified_panoptic_quality"
    t, s = _parse(name, things, stuffs)
    if not isinstance(allow_unknown_preds_category, bool):
        raise validation.fail(name, "allow_unknown_preds_category", "a bool", repr(allow_unknown_preds_category))
    fam = _family(name, t, s, allow_unknown_preds_category, True)

    def finish(prepared):
        _warn_empty(name, prepared[3])
        return _mean(prepared[0], prepared[3])

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))
