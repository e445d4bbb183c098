"""COCO mean average precision / recall in pure torch (no pycocotools at run time)."""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch

from fmetrics import validation
from fmetrics.detection import _coco, _inputs
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
    if max_detection_thresholds is None:
        max_dets = (1, 10, 100)
    else:
        if len(max_detection_thresholds) != 3 or any(int(v) != v or v < 1 for v in max_detection_thresholds):
            raise validation.fail(_NAME, "max_detection_thresholds", "None or a list of three positive ints",
                                  repr(max_detection_thresholds))
        max_dets = tuple(sorted(int(v) for v in max_detection_thresholds))
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


def _boxes(x, n, what, i, box_format, device, raw: list):
    """``x`` checked as ``[n, 4]`` (appended to ``raw`` as given) and converted to float64 xywh."""
    x = _inputs.as_boxes(_NAME, f"{what}[{i}]['boxes']", x, device)
    x = x.reshape(0, 4) if x.numel() == 0 and x.dim() == 1 else x
    _check_rows(x, n, what, "boxes", i, 2)
    if x.shape[-1] != 4:
        raise validation.fail(_NAME, f"{what}[{i}]['boxes']", "shape [n, 4]", f"shape {tuple(x.shape)}")
    raw.append(x)
    if not x.is_floating_point():
        x = x.double()
    return to_xywh(x.detach(), box_format).to(torch.float64)


def _ints_on(values: list, device: torch.device) -> torch.Tensor:
    """Python ints as an int64 vector on ``device``, one fill each: a host-to-device copy would sync a GPU."""
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
        n = labels.reshape(-1).shape[0]
        device = labels.device
        _check_rows(scores.reshape(-1) if isinstance(scores, torch.Tensor) else scores, n, "preds", "scores", i)
        out["det_labels"].append(labels.reshape(-1).to(torch.int64, copy=True))
        out["det_scores"].append(scores.detach().reshape(-1).to(torch.float64, copy=True))
        glabels = t["labels"]
        if not isinstance(glabels, torch.Tensor) or glabels.is_floating_point() or glabels.is_complex():
            raise validation.fail(_NAME, f"target[{i}]['labels']", "an integer tensor",
                                  getattr(glabels, "dtype", glabels))
        m = glabels.reshape(-1).shape[0]
        out["gt_labels"].append(glabels.reshape(-1).to(torch.int64, copy=True))
        det_n.append(n)
        gt_n.append(m)
        if bbox:
            out["det_boxes"].append(_boxes(_get(p, "boxes", i, "preds"), n, "preds", i, box_format, device, raw))
            out["gt_boxes"].append(_boxes(_get(t, "boxes", i, "target"), m, "target", i, box_format, device, raw))
        crowd = t.get("iscrowd")
        crowd = torch.zeros(m, dtype=torch.bool, device=device) if crowd is None else crowd.reshape(-1).to(torch.bool)
        _check_rows(crowd, m, "target", "iscrowd", i)
        out["gt_crowd"].append(crowd.clone())
        area = t.get("area")
        area = torch.zeros(m, dtype=torch.float64, device=device) if area is None else \
            area.detach().reshape(-1).to(torch.float64, copy=True)
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
            out["det_masks"].append(pm.detach().reshape(-1).to(torch.bool, copy=True))
            out["gt_masks"].append(tm.detach().reshape(-1).to(torch.bool, copy=True))
    if device is None:  # no image in this batch
        return state
    out["det_counts"] = [_ints_on(det_n, device)]
    out["gt_counts"] = [_ints_on(gt_n, device)]
    if segm:
        out["image_hw"] = [_ints_on([v for shape in hw for v in shape], device).reshape(-1, 2)]
    chunks = [(torch.cat(out[f]),) if out[f] else () for f in DetectionState._fields[1:]]
    new = DetectionState(state.invalid, *chunks)
    boxes = torch.cat(raw).detach() if raw else torch.zeros((0, 4), dtype=torch.float64, device=device)
    scores, area = torch.cat(out["det_scores"]), torch.cat(out["gt_area"])
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


def _mask_pairs(det_masks, det_counts, gt_masks, gt_counts, hw):
    """Per image, the intersection counts of every detection mask with every ground-truth mask."""
    device = det_masks.device
    hwp = (hw[:, 0] * hw[:, 1])
    d_off = torch.cumsum(det_counts * hwp, 0) - det_counts * hwp
    g_off = torch.cumsum(gt_counts * hwp, 0) - gt_counts * hwp
    pair_n = det_counts * gt_counts
    p_off = torch.cumsum(pair_n, 0) - pair_n
    inter = torch.zeros(int(pair_n.sum()), dtype=torch.float64, device=device)
    det_area = torch.zeros(int(det_counts.sum()), dtype=torch.float64, device=device)
    gt_area = torch.zeros(int(gt_counts.sum()), dtype=torch.float64, device=device)
    if det_masks.numel():
        dm = det_masks.reshape(-1)
        det_area = _per_mask_sums(dm, det_counts, hwp)
    if gt_masks.numel():
        gt_area = _per_mask_sums(gt_masks.reshape(-1), gt_counts, hwp)
    rows = torch.nonzero(pair_n > 0).squeeze(1).tolist()
    if rows:
        dc, gc, px, do, go, po = (x.tolist() for x in (det_counts, gt_counts, hwp, d_off, g_off, p_off))
        for i in rows:
            hwi = px[i]
            a = det_masks[do[i]: do[i] + dc[i] * hwi].reshape(dc[i], hwi)
            b = gt_masks[go[i]: go[i] + gc[i] * hwi].reshape(gc[i], hwi)
            dt = torch.float32 if hwi < 2 ** 24 else torch.float64
            inter[po[i]: po[i] + dc[i] * gc[i]] = (a.to(dt) @ b.to(dt).T).reshape(-1).to(torch.float64)
    return inter, p_off, det_area, gt_area


def _mask_areas(det_masks, det_counts, gt_masks, gt_counts, hw):
    hwp = hw[:, 0] * hw[:, 1]
    return _per_mask_sums(det_masks, det_counts, hwp), _per_mask_sums(gt_masks, gt_counts, hwp)


def _per_mask_sums(flat, counts, hwp):
    sizes = torch.repeat_interleave(hwp, counts)
    if sizes.numel() == 0:
        return torch.zeros(0, dtype=torch.float64, device=flat.device)
    owner = torch.repeat_interleave(torch.arange(sizes.shape[0], device=flat.device), sizes)
    return torch.zeros(sizes.shape[0], dtype=torch.float64, device=flat.device).index_add_(
        0, owner, flat.to(torch.float64))


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
    # defaults: numpy's linspace values bit for bit (pycocotools' float64 defaults)
    iou_t = torch.as_tensor(np.linspace(0.5, 0.95, 10) if iou_thr is None else iou_thr, dtype=f64, device=dev)
    rec_t = torch.as_tensor(np.linspace(0.0, 1.0, 101) if rec_thr is None else rec_thr, dtype=f64, device=dev)
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
                gt_auto = _mask_areas(*_masks(s, dev))[1]
        else:
            inter, p_off, det_area, gt_auto = _mask_pairs(*_masks(s, dev))
            pair_iou = _mask_iou(inter, p_off, det_counts, gt_counts, det_img, det_area, gt_auto)
        gt_area = torch.where(gt_area_given > 0, gt_area_given, gt_auto)
        ev, stats = None, None
        if I > 0:
            evals = {}
            for mode in {average, "macro" if class_metrics else average}:
                if mode == "macro":
                    dl, gl, K = torch.searchsorted(classes, det_labels), torch.searchsorted(classes, gt_labels), \
                        classes.shape[0]
                else:
                    dl, gl, K = torch.zeros_like(det_labels), torch.zeros_like(gt_labels), int(classes.numel() > 0)
                data = _coco.Dataset(I, det_img, dl, det_scores, det_area, gt_img, gl, gt_crowd, gt_area, pair_iou)
                evals[mode] = _coco.evaluate(data, iou_t, rec_t, max_dets, K, extended_ious=extended and mode == average,
                                             classes=classes if mode == "macro" else None)
            ev = evals[average]
            stats = _coco.summarize(ev, iou_t, max_dets)
        else:
            stats = [torch.tensor(-1.0, dtype=f64, device=dev)] * 12
        names = list(_STATS) + [f"mar_{max_dets[0]}", f"mar_{max_dets[1]}", f"mar_{max_dets[2]}",
                                "mar_small", "mar_medium", "mar_large"]
        for k, v in zip(names, stats):
            out[prefix + k] = v
        if extended and ev is not None:
            out[prefix + "ious"] = ev.ious
            out[prefix + "precision"] = ev.precision
            out[prefix + "recall"] = ev.recall
            out[prefix + "scores"] = ev.scores
        if class_metrics and I > 0:
            mac = evals["macro"]
            p = mac.precision[:, :, :, 0, -1]
            r = mac.recall[:, :, 0, -1]
            pv = torch.where(p > -1, p, 0).sum((0, 1)) / (p > -1).sum((0, 1))
            rv = torch.where(r > -1, r, 0).sum(0) / (r > -1).sum(0)
            out[prefix + "map_per_class"] = torch.where((p > -1).any(1).any(0), pv, -1.0)
            out[prefix + f"mar_{max_dets[-1]}_per_class"] = torch.where((r > -1).any(0), rv, -1.0)
        else:
            out[prefix + "map_per_class"] = torch.tensor(-1.0, dtype=f64, device=dev)
            out[prefix + f"mar_{max_dets[-1]}_per_class"] = torch.tensor(-1.0, dtype=f64, device=dev)
    out["classes"] = classes.to(torch.int32)
    return out


def _masks(s: DetectionState, dev):
    e = lambda dtype: torch.zeros(0, dtype=dtype, device=dev)  # noqa: E731
    hw = cat_chunks(s.image_hw, torch.zeros((0, 2), dtype=torch.int64, device=dev))
    return (cat_chunks(s.det_masks, e(torch.bool)), cat_chunks(s.det_counts, e(torch.int64)),
            cat_chunks(s.gt_masks, e(torch.bool)), cat_chunks(s.gt_counts, e(torch.int64)), hw)


def _mask_iou(inter, p_off, det_counts, gt_counts, det_img, det_area, gt_area):
    dstart = torch.cumsum(det_counts, 0) - det_counts
    gstart = torch.cumsum(gt_counts, 0) - gt_counts

    def pair_iou(di, gi, crowd):
        img = det_img[di]  # [P]
        idx = p_off[img] + (di - dstart[img]) * gt_counts[img] + (gi - gstart[img])
        i = inter[idx.clamp(max=max(inter.shape[0] - 1, 0))] if inter.numel() else torch.zeros(
            idx.shape, dtype=torch.float64, device=idx.device)
        da, ga = det_area[di], gt_area[gi]
        u = torch.where(crowd, da, da + ga - i)
        return torch.where(i > 0, i / u, torch.zeros((), dtype=torch.float64, device=i.device))

    return pair_iou
