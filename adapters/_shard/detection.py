"""Sharded finalize of COCO `mean_average_precision` (``average="macro"``; ``iou_type`` ``"bbox"``, ``"segm"`` or
both): objects routed by class.

COCO's evaluation is per class: matching runs per (image, class) and the precision / recall accumulation per
class; only `_coco.summarize` (and ``map_per_class``) looks across classes. So:

1. Images get global ids (the exclusive prefix of the ranks' image counts, one ``all_gather`` that also
   carries each rank's mask width): image order is rank order, as in one process's joined state.
2. Every detection and ground truth goes to rank ``hash(label) mod world`` (two `comm.route`s): a class is
   whole on one rank, its objects in one process's order (source rank, then update order), which fixes the
   stable score ties exactly as one process does. Masks travel as fixed-width rows: each rank packs its
   masks into the int64 words of `_masks.mask_words` (8 pixels a word), zero-padded to the widest image of
   any rank, so a mask is one row of ``ceil(max(H * W) / 8)`` words; mask areas and intersections are exact
   pixel counts, the same whatever the padding.
3. Each rank runs `_coco.evaluate` on its classes over the global image ids (once per iou type); the per-class
   precision / recall / score tables (``T x R x A x M`` per class: O(classes), not O(objects)) are gathered
   and put in class order, and `_coco.summarize` reads the 12 COCO stats (and the per-class values) off them
   as one process does.

``average="micro"`` (one merged class: nothing to route by) and ``extended_summary`` (per-(image, class) IoU
matrices) take the gather path.
"""
from __future__ import annotations

import numpy as np
import torch

from adapters._shard import comm
from adapters._shard.retrieval import owner
from fmetrics.detection import _coco, _inputs, _masks
from fmetrics.detection.mean_ap import _NAME, _STATS, RULES, DetectionState
from fmetrics.state import cat_chunks


def _types(args) -> tuple:
    t = args.get("iou_type")
    return (t,) if isinstance(t, str) else tuple(t)


def applies(metric) -> bool:
    r = metric.recipe
    if r is None or not r.module.startswith("fmetrics.detection") or r.qualname != "mean_average_precision":
        return False
    args = r.arguments
    return (set(_types(args)) <= {"bbox", "segm"} and args.get("average") == "macro"
            and not args.get("extended_summary"))


def finalize(ctx: comm.Ctx, metric, state, reduce):
    base = reduce(metric, state._replace(**{f: () for f in DetectionState._fields[1:]}))
    _inputs.report(_NAME, RULES, base.invalid)
    dev = base.invalid[0].count.device
    args = metric.recipe.arguments
    types = _types(args)
    f64, i64 = torch.float64, torch.int64
    e = lambda *shape, dtype=f64: torch.zeros(shape, dtype=dtype, device=ctx.comm)  # noqa: E731
    cat = lambda field, empty: cat_chunks(getattr(state, field), empty).to(ctx.comm)  # noqa: E731
    det_counts, gt_counts = cat("det_counts", e(0, dtype=i64)), cat("gt_counts", e(0, dtype=i64))
    det, gt = [], []  # the routed columns besides (image, label, ...): boxes, then mask words
    if "bbox" in types:
        det.append(cat("det_boxes", e(0, 4)))
        gt.append(cat("gt_boxes", e(0, 4)))
    if "segm" in types:
        hw = cat("image_hw", e(0, 2, dtype=i64))
        det.append(_masks.mask_words(cat("det_masks", e(0, dtype=torch.bool)), det_counts, hw)[0])
        gt.append(_masks.mask_words(cat("gt_masks", e(0, dtype=torch.bool)), gt_counts, hw)[0])
    width = det[-1].shape[1] if "segm" in types else 0
    every = comm.gather_rows(ctx, torch.tensor([[det_counts.shape[0], width]], device=ctx.comm))
    offset, images, width = int(every[: ctx.rank, 0].sum()), int(every[:, 0].sum()), int(every[:, 1].max())
    if images == 0:
        return metric.finalize(base)
    if "segm" in types:
        det[-1], gt[-1] = (torch.nn.functional.pad(w, (0, width - w.shape[1])) for w in (det[-1], gt[-1]))
    img = torch.arange(det_counts.shape[0], device=ctx.comm) + offset
    det_labels, gt_labels = cat("det_labels", e(0, dtype=i64)), cat("gt_labels", e(0, dtype=i64))
    det_img, det_labels, det_scores, *det = comm.route(
        ctx, [torch.repeat_interleave(img, det_counts), det_labels, cat("det_scores", e(0)), *det],
        owner(det_labels, ctx.world))
    crowd = cat("gt_crowd", e(0, dtype=torch.bool)).to(torch.int8)  # (gloo sends no bool)
    gt_img, gt_labels, gt_crowd, gt_area, *gt = comm.route(
        ctx, [torch.repeat_interleave(img, gt_counts), gt_labels, crowd, cat("gt_area", e(0)), *gt],
        owner(gt_labels, ctx.world))
    iou_t = torch.as_tensor(np.linspace(0.5, 0.95, 10) if args["iou_thresholds"] is None
                            else [float(v) for v in args["iou_thresholds"]], dtype=f64, device=ctx.comm)
    rec_t = torch.as_tensor(np.linspace(0.0, 1.0, 101) if args["rec_thresholds"] is None
                            else [float(v) for v in args["rec_thresholds"]], dtype=f64, device=ctx.comm)
    max_dets = (1, 10, 100) if args["max_detection_thresholds"] is None else \
        tuple(sorted(int(v) for v in args["max_detection_thresholds"]))
    classes = torch.unique(torch.cat([det_labels, gt_labels]))
    every_class = comm.gather_rows(ctx, classes)
    order = torch.argsort(every_class)
    pairs = {}
    if "bbox" in types:
        db, gb = det.pop(0), gt.pop(0)
        pairs["bbox"] = (db[:, 2] * db[:, 3], gb[:, 2] * gb[:, 3], _coco.box_iou_pairs(db, gb))
    if "segm" in types:
        dw, gw = det.pop(0), gt.pop(0)
        da, ga = _masks.pixel_counts(dw).to(f64), _masks.pixel_counts(gw).to(f64)
        pairs["segm"] = (da, ga, _masks.pair_iou(dw, gw, da, ga))
        if "bbox" in types:  # torchmetrics/COCO: with masks, ground-truth areas are mask areas
            pairs["bbox"] = (pairs["bbox"][0], ga, pairs["bbox"][2])
    out = {}
    for itype in types:
        det_area, gt_auto, pair_iou = pairs[itype]
        data = _coco.Dataset(images, det_img, torch.searchsorted(classes, det_labels), det_scores, det_area,
                             gt_img, torch.searchsorted(classes, gt_labels), gt_crowd.bool(),
                             torch.where(gt_area > 0, gt_area, gt_auto), pair_iou)
        ev = _coco.evaluate(data, iou_t, rec_t, max_dets, classes.shape[0], classes=classes)
        ev = _coco.Evaluation(*(comm.gather_rows(ctx, x.movedim(k, 0))[order].movedim(0, k)
                                for x, k in ((ev.precision, 2), (ev.recall, 1), (ev.scores, 2))), None)
        out.update(_summary(ev, iou_t, max_dets, args["class_metrics"], dev, "" if len(types) == 1 else f"{itype}_"))
    out["classes"] = every_class[order].to(device=dev, dtype=torch.int32)
    return out


def _summary(ev, iou_t, max_dets, class_metrics: bool, dev, prefix: str) -> dict:
    """One iou type's keys of the output dict of `fmetrics.detection.mean_ap` from the class-ordered evaluation."""
    names = list(_STATS) + [f"mar_{max_dets[0]}", f"mar_{max_dets[1]}", f"mar_{max_dets[2]}",
                            "mar_small", "mar_medium", "mar_large"]
    out = {prefix + k: v.to(dev) for k, v in zip(names, _coco.summarize(ev, iou_t, max_dets))}
    minus_one = torch.tensor(-1.0, dtype=torch.float64, device=dev)
    out[prefix + "map_per_class"], out[prefix + f"mar_{max_dets[-1]}_per_class"] = minus_one, minus_one
    if class_metrics:
        p = ev.precision[:, :, :, 0, -1]
        r = ev.recall[:, :, 0, -1]
        pv = torch.where(p > -1, p, 0).sum((0, 1)) / (p > -1).sum((0, 1))
        rv = torch.where(r > -1, r, 0).sum(0) / (r > -1).sum(0)
        out[prefix + "map_per_class"] = torch.where((p > -1).any(1).any(0), pv, -1.0).to(dev)
        out[prefix + f"mar_{max_dets[-1]}_per_class"] = torch.where((r > -1).any(0), rv, -1.0).to(dev)
    return out
