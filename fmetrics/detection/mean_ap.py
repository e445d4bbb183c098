"""COCO mean average precision / recall in pure torch (no pycocotools at run time)."""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch

from fmetrics import validation
from fmetrics.detection import _coco, _inputs, _masks
from fmetrics.detection._boxes import BOX_FORMATS, to_xywh
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks

__all__ = ["mean_average_precision"]

_NAME = "mean_average_precision"
_STATS = ("map", "map_50", "map_75", "map_small", "map_medium", "map_large")
RULES = (*_inputs.BOX_RULES, "scores must not be NaN", "target area must be finite (no NaN or inf)")


class DetectionState(NamedTuple):
    """Per-object tensors of every image seen, as chunks (one chunk per `update`), and the bad-input records."""

    invalid: tuple  # one validation.Invalid per rule of RULES (deferred checks; first: the state's device)
    det_boxes: tuple  # float64 [n, 4], xywh
    det_scores: tuple  # float64 [n]
    det_labels: tuple  # int64 [n]
    det_masks: tuple  # bool, every mask of an image flattened
    det_counts: tuple  # int64 [images]: detections per image
    gt_boxes: tuple
    gt_labels: tuple
    gt_crowd: tuple  # bool [n]
    gt_area: tuple  # float64 [n], 0 where not given
    gt_masks: tuple
    gt_counts: tuple
    image_hw: tuple  # int64 [images, 2]: mask height and width (0, 0 without masks)


TAGS = DetectionState(None, *("cat",) * (len(DetectionState._fields) - 1))


def _init() -> DetectionState:
    return DetectionState(_inputs.invalid_init(RULES), *((),) * (len(DetectionState._fields) - 1))


def _merge(a: DetectionState, b: DetectionState) -> DetectionState:
    """Chunks joined, bad-input records merged."""
    return DetectionState(_inputs.invalid_merge(a.invalid, b.invalid),
                          *(tuple(x) + tuple(y) for x, y in zip(a[1:], b[1:])))


def _default(values, default):
    return default if values is None else [float(v) for v in values]


def detection_cuts(max_detection_thresholds) -> tuple:
    """The three ``max_detection_thresholds``, ascending (default ``(1, 10, 100)``); raises on anything else."""
    if max_detection_thresholds is None:
        return (1, 10, 100)
    if len(max_detection_thresholds) != 3 or any(int(v) != v or v < 1 for v in max_detection_thresholds):
        raise validation.fail(_NAME, "max_detection_thresholds", "None or a list of three positive ints",
                              repr(max_detection_thresholds))
    return tuple(sorted(int(v) for v in max_detection_thresholds))


def thresholds(iou_thresholds, rec_thresholds, device) -> tuple:
    """``(iou, recall)`` thresholds as float64 tensors on ``device``: the given values, or pycocotools' float64
    defaults (numpy's linspace values bit for bit)."""
    iou, rec = _default(iou_thresholds, None), _default(rec_thresholds, None)
    return (torch.as_tensor(np.linspace(0.5, 0.95, 10) if iou is None else iou, dtype=torch.float64, device=device),
            torch.as_tensor(np.linspace(0.0, 1.0, 101) if rec is None else rec, dtype=torch.float64, device=device))


def summary(ev, per_class, iou_t: torch.Tensor, max_dets: tuple, class_metrics: bool, prefix: str, dev) -> dict:
    """One iou type's keys of the output, on ``dev``: the 12 COCO stats of the evaluation ``ev`` (``None``: no
    image, every stat -1), then ``map_per_class`` / ``mar_{max}_per_class`` from the macro evaluation
    ``per_class`` with ``class_metrics`` (else -1)."""
    minus_one = torch.tensor(-1.0, dtype=torch.float64, device=dev)
    stats = [minus_one] * 12 if ev is None else _coco.summarize(ev, iou_t, max_dets)
    names = list(_STATS) + [f"mar_{max_dets[0]}", f"mar_{max_dets[1]}", f"mar_{max_dets[2]}",
                            "mar_small", "mar_medium", "mar_large"]
    out = {prefix + k: v.to(dev) for k, v in zip(names, stats)}
    out[prefix + "map_per_class"], out[prefix + f"mar_{max_dets[-1]}_per_class"] = minus_one, minus_one
    if class_metrics and per_class is not None:
        p = per_class.precision[:, :, :, 0, -1]
        r = per_class.recall[:, :, 0, -1]
        pv = torch.where(p > -1, p, 0).sum((0, 1)) / (p > -1).sum((0, 1))
        rv = torch.where(r > -1, r, 0).sum(0) / (r > -1).sum(0)
        out[prefix + "map_per_class"] = torch.where((p > -1).any(1).any(0), pv, -1.0).to(dev)
        out[prefix + f"mar_{max_dets[-1]}_per_class"] = torch.where((r > -1).any(0), rv, -1.0).to(dev)
    return out


@factory
def mean_average_precision(
    *,
    box_format: Literal["xyxy", "xywh", "cxcywh"] = "xyxy",
    iou_type: Union[Literal["bbox", "segm"], Sequence[str]] = "bbox",
    iou_thresholds: Optional[Sequence[float]] = None,
    rec_thresholds: Optional[Sequence[float]] = None,
    max_detection_thresholds: Optional[Sequence[int]] = None,
    class_metrics: bool = False,
    extended_summary: bool = False,
    average: Literal["macro", "micro"] = "macro",
) -> Metric:
    """COCO mean average precision (mAP) and recall (mAR) of object detections, exactly as pycocotools.

    ``AP`` of a class is the mean, over the recall thresholds, of the interpolated
    precision ``p_interp(r) = max_{r' >= r} p(r')`` of its score-ranked detections;
    ``map`` averages it over IoU thresholds and classes (entries ``-1``, classes
    without ground truth, excluded); ``mar_k`` averages the recall reached with
    the ``k`` best detections per image and class. Matching is COCO's greedy
    matching: crowd regions absorb detections without counting, ground truths
    outside an area range are ignored, at most ``max_det`` detections per image
    and class count (docs/detection.md).

    Args:
      box_format: layout of ``boxes``: ``"xyxy"`` (corners, default), ``"xywh"``
        (top-left corner, width, height; COCO's) or ``"cxcywh"`` (center, size).
      iou_type: ``"bbox"`` (default: IoU of boxes), ``"segm"`` (IoU of the
        boolean ``masks``), or both as ``("bbox", "segm")``; with both, every
        output key is prefixed ``bbox_`` / ``segm_``.
      iou_thresholds: IoU thresholds (default: pycocotools' ``0.5:0.05:0.95``, float64).
      rec_thresholds: recall thresholds (default: ``0:0.01:1``, 101 points, float64).
      max_detection_thresholds: three ints, detections kept per image and class
        (default ``[1, 10, 100]``; sorted).
      class_metrics: also return ``map_per_class`` and ``mar_{max}_per_class``
        (default ``False``: both ``-1``).
      extended_summary: also return ``ious`` (``{(image, class): [n_det, n_gt]}``),
        ``precision`` ``[T, R, K, A, M]``, ``recall`` ``[T, K, A, M]`` and ``scores``
        ``[T, R, K, A, M]`` (A: all, small, medium, large; M: max detections).
      average: ``"macro"`` (default: per class, then averaged) or ``"micro"``
        (every label merged into one class before matching).

    Inputs:
      ``update(state, preds, target)`` with two equally long lists (one entry per
      image) of dicts: ``preds[i]`` has ``boxes`` float ``[n, 4]`` (for bbox),
      ``masks`` bool ``[n, H, W]`` (for segm), ``scores`` float ``[n]``, ``labels``
      int ``[n]``; ``target[i]`` has ``boxes`` / ``masks``, ``labels`` and optionally
      ``iscrowd`` (0/1 ``[m]``) and ``area`` (float ``[m]``; values <= 0 mean "from
      the box or mask"). ``boxes`` may be a list of ``[4]`` number lists (read as float64). NaN / inf or
      inverted boxes, NaN scores and non-finite areas are errors (docs/detection.md, "Bad input").

    Returns:
      A dict with torchmetrics' keys: ``map, map_50, map_75, map_small,
      map_medium, map_large, mar_1, mar_10, mar_100, mar_small, mar_medium,
      mar_large, map_per_class, mar_100_per_class, classes`` (float64; ``classes``
      int32), ``-1`` where undefined.

    Example::

        >>> preds = [dict(boxes=torch.tensor([[258.0, 41.0, 606.0, 285.0]]),
        ...               scores=torch.tensor([0.536]), labels=torch.tensor([0]))]
        >>> target = [dict(boxes=torch.tensor([[214.0, 41.0, 562.0, 285.0]]), labels=torch.tensor([0]))]
        >>> out = mean_average_precision()(preds, target)
        >>> round(out["map"].item(), 4), round(out["map_50"].item(), 4), round(out["mar_100"].item(), 4)
        (0.6, 1.0, 0.6)
    """
    if box_format not in BOX_FORMATS:
        raise validation.fail(_NAME, "box_format", f"one of {BOX_FORMATS}", repr(box_format))
    types = (iou_type,) if isinstance(iou_type, str) else tuple(iou_type)
    if not types or any(t not in ("bbox", "segm") for t in types) or len(set(types)) != len(types):
        raise validation.fail(_NAME, "iou_type", "'bbox', 'segm' or a tuple of both", repr(iou_type))
    iou_thr = _default(iou_thresholds, None)
    rec_thr = _default(rec_thresholds, None)
    for arg, v in (("iou_thresholds", iou_thr), ("rec_thresholds", rec_thr)):
        if v is not None and (not v or any(not 0 <= x <= 1 for x in v)):
            raise validation.fail(_NAME, arg, "None or a non-empty list of floats in [0, 1]", repr(v))
    max_dets = detection_cuts(max_detection_thresholds)
    for arg, v in (("class_metrics", class_metrics), ("extended_summary", extended_summary)):
        if not isinstance(v, bool):
            raise validation.fail(_NAME, arg, "a bool", repr(v))
    if average not in ("macro", "micro"):
        raise validation.fail(_NAME, "average", "'macro' or 'micro'", repr(average))

    def update(state: DetectionState, preds, target) -> DetectionState:
        return _update(state, preds, target, box_format, types)

    def finalize(state: DetectionState) -> dict:
        return _finalize(state, types, iou_thr, rec_thr, max_dets, class_metrics, extended_summary, average)

    return Metric(init=_init, update=update, merge=_merge, finalize=finalize, name=_NAME,
                  state_key=("detection", box_format, types), reductions=TAGS, higher_is_better=True,
                  is_differentiable=False, bounds=(-1.0, 1.0))


# ------------------------------------------------------------------ update


def _get(d, key: str, i: int, what: str):
    if not isinstance(d, dict):
        raise validation.fail(_NAME, what, "a list of dicts (one per image)", f"{type(d).__name__} at index {i}")
    if key not in d:
        raise validation.fail(_NAME, what, f"a dict with key {key!r} in every entry",
                              f"keys {sorted(d)} at index {i}")
    return d[key]


def _check_rows(x, n, what, key, i, dims=1):
    if not isinstance(x, torch.Tensor):
        raise validation.fail(_NAME, f"{what}[{i}][{key!r}]", "a tensor", type(x).__name__)
    if x.dim() != dims or x.shape[0] != n:
        raise validation.fail(_NAME, f"{what}[{i}][{key!r}]", f"{dims} dims with {n} rows",
                              f"shape {tuple(x.shape)}")


def _boxes(x, n, what, i, device, raw: list):
    """``x`` checked as ``[n, 4]`` (appended to ``raw`` as given)."""
    x = _inputs.as_boxes(_NAME, f"{what}[{i}]['boxes']", x, device)
    x = x.reshape(0, 4) if x.numel() == 0 and x.dim() == 1 else x
    _check_rows(x, n, what, "boxes", i, 2)
    if x.shape[-1] != 4:
        raise validation.fail(_NAME, f"{what}[{i}]['boxes']", "shape [n, 4]", f"shape {tuple(x.shape)}")
    raw.append(x)
    return x


def _xywh(xs: list, box_format: str) -> torch.Tensor:
    """Float64 xywh boxes of the images' ``[n, 4]`` boxes, converted in their own dtype (integers: float64)."""
    if len({x.dtype for x in xs}) > 1:
        return torch.cat([_xywh([x], box_format) for x in xs])
    x = torch.cat(xs).detach()
    return to_xywh(x if x.is_floating_point() else x.double(), box_format).to(torch.float64)


def _joined(xs: list, dtype: torch.dtype, sizes: list, device) -> torch.Tensor:
    """The images' vectors as one new ``dtype`` tensor (``None``: ``size`` zeros); one conversion per image
    only when their dtypes differ."""
    if all(x is None for x in xs):
        return torch.zeros(sum(sizes), dtype=dtype, device=device)
    xs = [torch.zeros(m, dtype=dtype, device=device) if x is None else x for x, m in zip(xs, sizes)]
    if len({x.dtype for x in xs}) > 1:
        xs = [x.to(dtype) for x in xs]
    return torch.cat(xs).detach().to(dtype)


def _ints_on(values: list, device: torch.device) -> torch.Tensor:
    """Python ints as an int64 vector on ``device``; off the CPU one fill each: a host-to-device copy would
    sync an accelerator."""
    if device.type == "cpu":
        return torch.tensor(values, dtype=torch.int64)
    return torch.stack([torch.full((), v, dtype=torch.int64, device=device) for v in values])


def _tensors(*dicts):
    return (v for d in dicts for v in d.values() if isinstance(v, torch.Tensor))


def _update(state: DetectionState, preds, target, box_format: str, types: tuple) -> DetectionState:
    if not isinstance(preds, (list, tuple)) or not isinstance(target, (list, tuple)):
        raise validation.fail(_NAME, "preds, target", "lists of dicts (one per image)",
                              f"{type(preds).__name__} and {type(target).__name__}")
    if len(preds) != len(target):
        raise validation.fail(_NAME, "preds, target", "lists of equal length", f"{len(preds)} and {len(target)}")
    bbox, segm = "bbox" in types, "segm" in types
    out = {f: [] for f in DetectionState._fields}
    det_n, gt_n, hw, raw = [], [], [], []
    device = None
    for i, (p, t) in enumerate(zip(preds, target)):
        labels = _get(p, "labels", i, "preds")
        scores = _get(p, "scores", i, "preds")
        _get(t, "labels", i, "target")
        _inputs.check_device(_NAME, state.invalid[0].count.device, _tensors(p, t))
        if not isinstance(labels, torch.Tensor) or labels.is_floating_point() or labels.is_complex():
            raise validation.fail(_NAME, f"preds[{i}]['labels']", "an integer tensor", getattr(labels, "dtype", labels))
        labels = labels.reshape(-1)
        n = labels.shape[0]
        device = labels.device
        scores = scores.reshape(-1) if isinstance(scores, torch.Tensor) else scores
        _check_rows(scores, n, "preds", "scores", i)
        out["det_labels"].append(labels)
        out["det_scores"].append(scores)
        glabels = t["labels"]
        if not isinstance(glabels, torch.Tensor) or glabels.is_floating_point() or glabels.is_complex():
            raise validation.fail(_NAME, f"target[{i}]['labels']", "an integer tensor",
                                  getattr(glabels, "dtype", glabels))
        glabels = glabels.reshape(-1)
        m = glabels.shape[0]
        out["gt_labels"].append(glabels)
        det_n.append(n)
        gt_n.append(m)
        if bbox:
            out["det_boxes"].append(_boxes(_get(p, "boxes", i, "preds"), n, "preds", i, device, raw))
            out["gt_boxes"].append(_boxes(_get(t, "boxes", i, "target"), m, "target", i, device, raw))
        crowd = t.get("iscrowd")
        if crowd is not None:
            crowd = crowd.reshape(-1).to(torch.bool)
            _check_rows(crowd, m, "target", "iscrowd", i)
        out["gt_crowd"].append(crowd)
        area = t.get("area")
        if area is not None:
            area = area.reshape(-1)
            _check_rows(area, m, "target", "area", i)
        out["gt_area"].append(area)
        if segm:
            pm = _get(p, "masks", i, "preds")
            tm = _get(t, "masks", i, "target")
            _check_rows(pm, n, "preds", "masks", i, 3)
            _check_rows(tm, m, "target", "masks", i, 3)
            shape = tuple(pm.shape[1:]) if n else tuple(tm.shape[1:])
            if m and n and tuple(tm.shape[1:]) != tuple(pm.shape[1:]):
                raise validation.fail(_NAME, f"preds[{i}]['masks']", f"the size of target[{i}]['masks'] {tuple(tm.shape[1:])}",
                                      f"{tuple(pm.shape[1:])}")
            hw.append(shape)
            out["det_masks"].append(pm.reshape(-1))
            out["gt_masks"].append(tm.reshape(-1))
    if device is None:  # no image in this batch
        return state
    joined = {"det_labels": (torch.int64, det_n), "det_scores": (torch.float64, det_n),
              "gt_labels": (torch.int64, gt_n), "gt_crowd": (torch.bool, gt_n), "gt_area": (torch.float64, gt_n)}
    for f, (dtype, sizes) in joined.items():
        out[f] = [_joined(out[f], dtype, sizes, device)]
    if bbox:
        out["det_boxes"], out["gt_boxes"] = [_xywh(out["det_boxes"], box_format)], [_xywh(out["gt_boxes"], box_format)]
    if segm:
        out["det_masks"] = [_joined(out["det_masks"], torch.bool, det_n, device)]
        out["gt_masks"] = [_joined(out["gt_masks"], torch.bool, gt_n, device)]
        out["image_hw"] = [_ints_on([v for shape in hw for v in shape], device).reshape(-1, 2)]
    out["det_counts"] = [_ints_on(det_n, device)]
    out["gt_counts"] = [_ints_on(gt_n, device)]
    chunks = [tuple(out[f]) for f in DetectionState._fields[1:]]
    new = DetectionState(state.invalid, *chunks)
    boxes = torch.cat(raw).detach() if raw else torch.zeros((0, 4), dtype=torch.float64, device=device)
    scores, area = out["det_scores"][0], out["gt_area"][0]
    if _inputs.eager((boxes, scores, area)):
        if _faulty(boxes, scores, area, box_format):
            _raise_first(preds, target, box_format, bbox)
        return new._replace(invalid=_inputs.tick(state.invalid))
    inv = state.invalid
    inv = (*_inputs.flag_boxes(inv[:2], boxes, box_format),
           validation.invalid_flag(inv[2], torch.isnan(scores), scores),
           validation.invalid_flag(inv[3], ~torch.isfinite(area), area))
    return new._replace(invalid=inv)


def _faulty(boxes, scores, area, box_format) -> bool:
    """Whether a value rule is broken in the batch (one host read: eager CPU only)."""
    return bool(_inputs.faulty(boxes, box_format) | torch.isnan(scores).any() | (~torch.isfinite(area)).any())


def _raise_first(preds, target, box_format, bbox) -> None:
    """Raises quoting the first image's offending entries (eager CPU; the batch broke a rule)."""
    for i, (p, t) in enumerate(zip(preds, target)):
        if bbox:
            for d, what in ((p, "preds"), (t, "target")):
                arg = f"{what}[{i}]['boxes']"
                _inputs.check_boxes(_NAME, arg, _inputs.as_boxes(_NAME, arg, d["boxes"], None), box_format)
        scores = p["scores"].reshape(-1)
        if torch.isnan(scores).any():
            raise validation.fail(_NAME, f"preds[{i}]['scores']", "scores that are not NaN",
                                  validation.quote(scores[torch.isnan(scores)]))
        area = t.get("area")
        if area is not None and not torch.isfinite(area).all():
            raise validation.fail(_NAME, f"target[{i}]['area']", "finite areas (no NaN or inf)",
                                  validation.quote(area[~torch.isfinite(area)]))


# ------------------------------------------------------------------ finalize


def _finalize(s: DetectionState, types, iou_thr, rec_thr, max_dets, class_metrics, extended, average) -> dict:
    _inputs.report(_NAME, RULES, s.invalid)
    dev = s.invalid[0].count.device
    f64, i64 = torch.float64, torch.int64
    e = lambda *shape, dtype=f64: torch.zeros(shape, dtype=dtype, device=dev)  # noqa: E731
    det_counts = cat_chunks(s.det_counts, e(0, dtype=i64))
    gt_counts = cat_chunks(s.gt_counts, e(0, dtype=i64))
    det_labels = cat_chunks(s.det_labels, e(0, dtype=i64))
    gt_labels = cat_chunks(s.gt_labels, e(0, dtype=i64))
    det_scores = cat_chunks(s.det_scores, e(0))
    gt_crowd = cat_chunks(s.gt_crowd, e(0, dtype=torch.bool))
    gt_area_given = cat_chunks(s.gt_area, e(0))
    I = det_counts.shape[0]
    det_img = torch.repeat_interleave(torch.arange(I, device=dev), det_counts)
    gt_img = torch.repeat_interleave(torch.arange(I, device=dev), gt_counts)
    classes = torch.unique(torch.cat([det_labels, gt_labels]))
    iou_t, rec_t = thresholds(iou_thr, rec_thr, dev)
    out: dict = {}
    for itype in types:
        prefix = "" if len(types) == 1 else f"{itype}_"
        if itype == "bbox":
            db = cat_chunks(s.det_boxes, e(0, 4))
            gb = cat_chunks(s.gt_boxes, e(0, 4))
            det_area = db[:, 2] * db[:, 3]
            gt_auto = gb[:, 2] * gb[:, 3]
            pair_iou = _coco.box_iou_pairs(db, gb)
            if "segm" in types:  # torchmetrics/COCO: ground-truth areas are mask areas
                gt_auto = _masks.mask_words(*_mask_set(s.gt_masks, gt_counts, s, dev))[1]
        else:
            det_words, det_area = _masks.mask_words(*_mask_set(s.det_masks, det_counts, s, dev))
            gt_words, gt_auto = _masks.mask_words(*_mask_set(s.gt_masks, gt_counts, s, dev))
            pair_iou = _masks.pair_iou(det_words, gt_words, det_area, gt_auto)
        gt_area = torch.where(gt_area_given > 0, gt_area_given, gt_auto)
        evals = {}
        if I > 0:
            for mode in {average, "macro" if class_metrics else average}:
                if mode == "macro":
                    dl, gl, K = torch.searchsorted(classes, det_labels), torch.searchsorted(classes, gt_labels), \
                        classes.shape[0]
                else:
                    dl, gl, K = torch.zeros_like(det_labels), torch.zeros_like(gt_labels), int(classes.numel() > 0)
                data = _coco.Dataset(I, det_img, dl, det_scores, det_area, gt_img, gl, gt_crowd, gt_area, pair_iou)
                evals[mode] = _coco.evaluate(data, iou_t, rec_t, max_dets, K, extended_ious=extended and mode == average,
                                             classes=classes if mode == "macro" else None)
        ev = evals.get(average)
        out.update(summary(ev, evals.get("macro"), iou_t, max_dets, class_metrics, prefix, dev))
        if extended and ev is not None:
            out[prefix + "ious"] = ev.ious
            out[prefix + "precision"] = ev.precision
            out[prefix + "recall"] = ev.recall
            out[prefix + "scores"] = ev.scores
    out["classes"] = classes.to(torch.int32)
    return out


def _mask_set(chunks: tuple, counts: torch.Tensor, s: DetectionState, dev):
    """``(flat masks, masks per image, [H, W] per image)`` of one side (detections or ground truths)."""
    hw = cat_chunks(s.image_hw, torch.zeros((0, 2), dtype=torch.int64, device=dev))
    return cat_chunks(chunks, torch.zeros(0, dtype=torch.bool, device=dev)), counts, hw
