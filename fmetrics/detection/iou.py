"""The box IoU family (IoU, GIoU, DIoU, CIoU) over lists of per-image dicts, as torchmetrics' modules."""
from __future__ import annotations

from typing import Callable, Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.detection import _inputs
from fmetrics.detection._boxes import (BOX_FORMATS, box_iou, complete_box_iou, distance_box_iou,
                                       generalized_box_iou, to_xyxy)
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks

__all__ = ["intersection_over_union", "generalized_intersection_over_union", "distance_intersection_over_union",
           "complete_intersection_over_union"]


class PairState(NamedTuple):
    """Every (detection, ground truth) pair's overlap, whether it counts, and its ground-truth label."""

    invalid: tuple  # one validation.Invalid per rule of _inputs.BOX_RULES (deferred checks)
    values: tuple  # float64 [pairs]
    valid: tuple  # bool [pairs]
    column_label: tuple  # int64 [pairs]: the pair's ground-truth label (-1: no ground truth column)
    labels: tuple  # int64: every label seen (detections and ground truths)


TAGS = PairState(None, "cat", "cat", "cat", "cat")


def _init() -> PairState:
    return PairState(_inputs.invalid_init(_inputs.BOX_RULES), (), (), (), ())


def _merge(a: PairState, b: PairState) -> PairState:
    return PairState(_inputs.invalid_merge(a.invalid, b.invalid), *(tuple(x) + tuple(y) for x, y in zip(a[1:], b[1:])))


def _make(kind: str, pair_fn: Callable, lower: float, box_format: str, iou_threshold: Optional[float],
          class_metrics: bool, respect_labels: bool) -> Metric:
    name = {"iou": "intersection_over_union", "giou": "generalized_intersection_over_union",
            "diou": "distance_intersection_over_union", "ciou": "complete_intersection_over_union"}[kind]
    if box_format not in BOX_FORMATS:
        raise validation.fail(name, "box_format", f"one of {BOX_FORMATS}", repr(box_format))
    if iou_threshold is not None and not isinstance(iou_threshold, (int, float)):
        raise validation.fail(name, "iou_threshold", "None or a float", repr(iou_threshold))
    for arg, v in (("class_metrics", class_metrics), ("respect_labels", respect_labels)):
        if not isinstance(v, bool):
            raise validation.fail(name, arg, "a bool", repr(v))

    def update(state: PairState, preds, target) -> PairState:
        if not isinstance(preds, (list, tuple)) or not isinstance(target, (list, tuple)) or len(preds) != len(target):
            raise validation.fail(name, "preds, target", "two lists of dicts of equal length (one per image)")
        vals, valid, cols, labels, raw = [], [], [], [], []
        for i, (p, t) in enumerate(zip(preds, target)):
            db, pl = _image(name, p, f"preds[{i}]", box_format, state, raw)
            gb, tl = _image(name, t, f"target[{i}]", box_format, state, raw)
            n, m = db.shape[0], gb.shape[0]
            dev = db.device
            if n == 0 or m == 0:  # torchmetrics: a square of zeros, one row per box of the non-empty side
                k = max(n, m)
                mat = torch.zeros((k, k), dtype=torch.float64, device=dev)
                ok = torch.eye(k, dtype=torch.bool, device=dev) if respect_labels else \
                    torch.ones((k, k), dtype=torch.bool, device=dev)
                col = (tl if n == 0 else torch.full((k,), -1, dtype=torch.int64, device=dev))[None, :].expand(k, k)
            else:
                mat = pair_fn(db, gb)
                ok = torch.ones((n, m), dtype=torch.bool, device=dev)
                if iou_threshold is not None:
                    ok = ok & ~(mat < iou_threshold)
                if respect_labels:
                    ok = ok & (pl[:, None] == tl[None, :])
                col = tl[None, :].expand(n, m)
            vals.append(mat.reshape(-1))
            valid.append(ok.reshape(-1))
            cols.append(col.reshape(-1))
            labels.extend([tl, pl])
        if not vals:
            return state
        boxes = torch.cat([b for b, _ in raw])
        if _inputs.eager((boxes,)):
            if bool(_inputs.faulty(boxes, box_format)):
                for b, arg in raw:
                    _inputs.check_boxes(name, arg, b, box_format)
            invalid = _inputs.tick(state.invalid)
        else:
            invalid = _inputs.flag_boxes(state.invalid, boxes, box_format)
        return PairState(invalid, (torch.cat(vals),), (torch.cat(valid),), (torch.cat(cols).clone(),),
                         (torch.cat(labels),))

    def finalize(state: PairState) -> dict:
        _inputs.report(name, _inputs.BOX_RULES, state.invalid)
        dev = state.invalid[0].count.device
        v = cat_chunks(state.values, torch.zeros(0, dtype=torch.float64, device=dev))
        ok = cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool, device=dev))
        col = cat_chunks(state.column_label, torch.zeros(0, dtype=torch.int64, device=dev))
        labels = cat_chunks(state.labels, torch.zeros(0, dtype=torch.int64, device=dev))
        zero = torch.zeros((), dtype=torch.float64, device=dev)
        n = ok.sum()
        out = {kind: torch.where(n > 0, torch.where(ok, v, zero).sum() / n.clamp(min=1), zero)}
        if class_metrics:
            for c in torch.unique(labels).tolist():
                sel = ok & (col == c)
                k = sel.sum()
                out[f"{kind}/cl_{c}"] = torch.where(k > 0, torch.where(sel, v, zero).sum() / k.clamp(min=1), zero)
        return out

    return Metric(init=_init, update=update, merge=_merge, finalize=finalize, name=name,
                  state_key=(kind, box_format, iou_threshold, respect_labels), reductions=TAGS,
                  higher_is_better=True, is_differentiable=False, bounds=(lower, 1.0))


def _image(name: str, d, what: str, fmt: str, state: PairState, raw: list):
    """One image's ``(float64 xyxy boxes [n, 4], int64 labels [n])``; ``(boxes as given, argument name)``
    appended to ``raw``."""
    if not isinstance(d, dict) or "boxes" not in d or "labels" not in d:
        raise validation.fail(name, what, "a dict with 'boxes' and 'labels'")
    labels = d["labels"]
    if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.is_complex():
        raise validation.fail(name, f"{what}['labels']", "an integer tensor", getattr(labels, "dtype", labels))
    _inputs.check_device(name, state.invalid[0].count.device,
                         (v for v in d.values() if isinstance(v, torch.Tensor)))
    b = _inputs.as_boxes(name, f"{what}['boxes']", d["boxes"], labels.device).detach()
    b = b.reshape(0, 4) if b.numel() == 0 else b
    labels = labels.reshape(-1)
    if b.dim() != 2 or b.shape[1] != 4 or b.shape[0] != labels.shape[0]:
        raise validation.fail(name, f"{what}['boxes']", f"shape [n, 4] with n = {labels.shape[0]} labels",
                              f"shape {tuple(b.shape)}")
    raw.append((b, f"{what}['boxes']"))
    return to_xyxy(b.to(torch.float64), fmt), labels.to(torch.int64)


_DOC_ARGS = """
    Args:
      box_format: ``"xyxy"`` (default), ``"xywh"`` or ``"cxcywh"``.
      iou_threshold: pairs whose overlap is below it do not count (default ``None``: all count).
      class_metrics: also return ``"<key>/cl_<c>"``: the mean over pairs whose ground truth has label ``c``
        (``0`` for a label with no such pair), for every label seen in detections or ground truths.
      respect_labels: only pairs of equal labels count (default ``True``).

    Inputs:
      ``update(state, preds, target)``: lists (one entry per image) of dicts with ``boxes`` float ``[n, 4]``
      and ``labels`` int ``[n]`` (``boxes`` may be a list of ``[4]`` number lists). An image without detections
      (or ground truths) adds, as in torchmetrics, one zero per box of the other side. NaN / inf or inverted
      boxes are errors (docs/detection.md, "Bad input").

    Returns:
      ``{"<key>": mean over counted pairs (0 without any)}``, float64, plus the per-class entries.
"""


@factory
def intersection_over_union(*, box_format: Literal["xyxy", "xywh", "cxcywh"] = "xyxy",
                            iou_threshold: Optional[float] = None, class_metrics: bool = False,
                            respect_labels: bool = True) -> Metric:
    """Mean IoU of detection / ground-truth box pairs: ``|A n B| / |A u B|`` (key ``"iou"``).
    {args}
    Example::

        >>> preds = [dict(boxes=torch.tensor([[0., 0., 2., 2.]]), labels=torch.tensor([1]))]
        >>> target = [dict(boxes=torch.tensor([[1., 1., 3., 3.]]), labels=torch.tensor([1]))]
        >>> intersection_over_union()(preds, target)["iou"]
        tensor(0.1429, dtype=torch.float64)
    """
    return _make("iou", box_iou, 0.0, box_format, iou_threshold, class_metrics, respect_labels)


@factory
def generalized_intersection_over_union(*, box_format: Literal["xyxy", "xywh", "cxcywh"] = "xyxy",
                                        iou_threshold: Optional[float] = None, class_metrics: bool = False,
                                        respect_labels: bool = True) -> Metric:
    """Mean GIoU of box pairs: ``IoU - (|C| - |A u B|) / |C|``, C the smallest enclosing box (key ``"giou"``).
    {args}
    Example::

        >>> preds = [dict(boxes=torch.tensor([[0., 0., 2., 2.]]), labels=torch.tensor([1]))]
        >>> target = [dict(boxes=torch.tensor([[1., 1., 3., 3.]]), labels=torch.tensor([1]))]
        >>> generalized_intersection_over_union()(preds, target)["giou"]
        tensor(-0.0794, dtype=torch.float64)
    """
    return _make("giou", generalized_box_iou, -1.0, box_format, iou_threshold, class_metrics, respect_labels)


@factory
def distance_intersection_over_union(*, box_format: Literal["xyxy", "xywh", "cxcywh"] = "xyxy",
                                     iou_threshold: Optional[float] = None, class_metrics: bool = False,
                                     respect_labels: bool = True) -> Metric:
    """Mean DIoU of box pairs: ``IoU - rho^2(centers) / c^2``, c the enclosing box's diagonal (key ``"diou"``).
    {args}
    Example::

        >>> preds = [dict(boxes=torch.tensor([[0., 0., 2., 2.]]), labels=torch.tensor([1]))]
        >>> target = [dict(boxes=torch.tensor([[1., 1., 3., 3.]]), labels=torch.tensor([1]))]
        >>> distance_intersection_over_union()(preds, target)["diou"]
        tensor(0.0317, dtype=torch.float64)
    """
    return _make("diou", distance_box_iou, -1.0, box_format, iou_threshold, class_metrics, respect_labels)


@factory
def complete_intersection_over_union(*, box_format: Literal["xyxy", "xywh", "cxcywh"] = "xyxy",
                                     iou_threshold: Optional[float] = None, class_metrics: bool = False,
                                     respect_labels: bool = True) -> Metric:
    """Mean CIoU of box pairs: ``DIoU - alpha v``, v the aspect-ratio term, ``alpha = v / (1 - IoU + v)`` (key ``"ciou"``).
    {args}
    Example::

        >>> preds = [dict(boxes=torch.tensor([[0., 0., 2., 2.]]), labels=torch.tensor([1]))]
        >>> target = [dict(boxes=torch.tensor([[1., 1., 3., 3.]]), labels=torch.tensor([1]))]
        >>> complete_intersection_over_union()(preds, target)["ciou"]
        tensor(0.0317, dtype=torch.float64)
    """
    return _make("ciou", complete_box_iou, -2.0, box_format, iou_threshold, class_metrics, respect_labels)


for _f in (intersection_over_union, generalized_intersection_over_union, distance_intersection_over_union,
           complete_intersection_over_union):
    _f.__doc__ = _f.__doc__.replace("    {args}\n", _DOC_ARGS)
