"""Detection workloads: COCO mAP and the box IoU family on synthetic COCO-like sets.

bbox mAP: 500 images x 20 ground-truth boxes x 20 classes, 20 detections per image (jittered copies of
ground truths and random boxes, scores in 1/100 steps; 50 images with --quick), and the same at 5,000
images (200 with --quick). segm mAP: 100 images of 64x64 masks, 10 objects each. fmetrics is fed batches
of 50 images (update) and finalizes; pycocotools and faster-coco-eval get their COCO dicts prepared
outside the timed call (their fastest use) and run index, ``evaluate``, ``accumulate``, ``summarize``.
torchmetrics' ``MeanAveragePrecision`` and its IoU modules need torchvision, which cannot be installed
beside torch 2.13 here: their rows are reported as skipped. Every contender returns the 12 COCO summary
numbers, compared to 1e-12.
"""
from __future__ import annotations

import numpy as np
import torch

import fmetrics
from benchmarks.registry import on_device, register
from tests.cases.detection import cocoeval

STATS = ("map", "map_50", "map_75", "map_small", "map_medium", "map_large", "mar_1", "mar_10", "mar_100",
         "mar_small", "mar_medium", "mar_large")
BATCH = 50


def coco_set(n_images: int, n_boxes: int = 20, n_classes: int = 20, seed: int = 0, mask_size: int = 0):
    """``(preds, target)`` lists of per-image dicts, boxes xyxy float32 (masks bool with ``mask_size``)."""
    g = torch.Generator().manual_seed(seed)
    preds, target = [], []
    for _ in range(n_images):
        if mask_size:
            xy = torch.randint(0, mask_size - 8, (n_boxes, 2), generator=g).float()
            wh = torch.randint(4, mask_size // 2, (n_boxes, 2), generator=g).float()
        else:
            xy = torch.rand(n_boxes, 2, generator=g) * 500
            wh = torch.rand(n_boxes, 2, generator=g) * 140 + 4
        gt = torch.cat([xy, xy + wh], 1)
        labels = torch.randint(0, n_classes, (n_boxes,), generator=g)
        copy = torch.rand(n_boxes, generator=g) < 0.75
        jit = gt + torch.randn(n_boxes, 4, generator=g) * wh.repeat(1, 2) * 0.1
        rnd = torch.cat([xy.flip(0), xy.flip(0) + wh], 1)
        det = torch.where(copy[:, None], jit, rnd)
        if mask_size:
            det = det.clamp(0, mask_size - 1)
        dl = torch.where(torch.rand(n_boxes, generator=g) < 0.9, labels, torch.randint(0, n_classes, (n_boxes,),
                                                                                       generator=g))
        scores = torch.randint(0, 100, (n_boxes,), generator=g).float() / 100
        t = {"boxes": gt, "labels": labels}
        p = {"boxes": det, "scores": scores, "labels": dl}
        if mask_size:
            t["masks"], p["masks"] = _box_masks(gt, mask_size), _box_masks(det, mask_size)
        preds.append(p)
        target.append(t)
    return preds, target


def _box_masks(boxes, size):
    r = torch.arange(size, dtype=torch.float32)
    x1, y1, x2, y2 = (boxes[:, i, None] for i in range(4))
    inside_y = (r[None] >= y1) & (r[None] < y2)
    inside_x = (r[None] >= x1) & (r[None] < x2)
    return inside_y[:, :, None] & inside_x[:, None, :]


def coco_dicts(preds, target, iou_type="bbox"):
    """The COCO ground-truth and detection dicts of the set (RLE masks for segm)."""
    images, gts, dts, aid = [], [], [], 1
    labels = sorted({int(v) for d in preds + target for v in d["labels"].tolist()})
    enc = None
    if iou_type == "segm":
        from pycocotools import mask as enc
    for i, (p, t) in enumerate(zip(preds, target)):
        img = {"id": i}
        if iou_type == "segm":
            img.update(height=int(t["masks"].shape[1]), width=int(t["masks"].shape[2]))
        images.append(img)
        for kind, d in (("gt", t), ("dt", p)):
            b = d["boxes"].double()
            xywh = torch.stack([b[:, 0], b[:, 1], b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1).tolist()
            for k in range(d["labels"].shape[0]):
                ann = {"id": aid, "image_id": i, "category_id": int(d["labels"][k])}
                if iou_type == "bbox":
                    ann["bbox"] = xywh[k]
                    ann["area"] = xywh[k][2] * xywh[k][3]
                else:
                    rle = enc.encode(np.asfortranarray(d["masks"][k].numpy().astype(np.uint8)))
                    ann["segmentation"] = rle
                    ann["area"] = float(enc.area(rle))
                if kind == "gt":
                    ann["iscrowd"] = 0
                    gts.append(ann)
                else:
                    ann["score"] = float(d["scores"][k])
                    dts.append(ann)
                aid += 1
    cats = [{"id": c, "name": str(c)} for c in labels]
    return ({"images": images, "annotations": gts, "categories": cats},
            {"images": images, "annotations": dts, "categories": cats})


def cocoeval_run(gt_d, dt_d, iou_type: str, backend: str):
    """The peer: ``backend``'s COCOeval on the dataset dicts (`tests.cases.detection.cocoeval`), its 12 stats."""
    if backend == "pycocotools":
        import pycocotools.cocoeval  # noqa: F401 - ImportError at build: the peer is reported missing
    else:
        import faster_coco_eval  # noqa: F401

    def run():
        ev = cocoeval(gt_d, dt_d, iou_type, backend)
        return torch.tensor(np.asarray(ev.stats[:12], dtype=np.float64))

    return run


def fmetrics_map(preds, target, iou_type="bbox"):
    m = fmetrics.mean_average_precision(iou_type=iou_type)
    batches = [(preds[i:i + BATCH], target[i:i + BATCH]) for i in range(0, len(preds), BATCH)]
    device = preds[0]["boxes"].device if preds and preds[0]["boxes"].device.type != "cpu" else None

    def run():
        s = m.init(device)
        for p, t in batches:
            s = m.update(s, p, t)
        out = m.finalize(s)
        return torch.stack([out[k] for k in STATS])

    return run


def _torchmetrics_map():
    from torchmetrics.detection import MeanAveragePrecision  # noqa: F401 - needs torchvision (absent here)

    raise ImportError("torchmetrics.detection.MeanAveragePrecision is unavailable")


def _map_workload(name, n_images, quick_images, doc, iou_type="bbox", mask_size=0, n_boxes=20,
                  peers=("pycocotools", "faster-coco-eval", "torchmetrics")):
    def images(quick):
        return quick_images if quick else n_images

    @register(f"detection/{name}", domain="detection", samples=lambda quick: images(quick), tolerance=1e-12,
              peers=peers, description=doc)
    def build(quick: bool, device="cpu"):
        preds, target = coco_set(images(quick), n_boxes=n_boxes, mask_size=mask_size)  # COCO tools: host copy
        runs = {"fmetrics": fmetrics_map(*on_device((preds, target), device), iou_type)}
        try:
            gt_d, dt_d = coco_dicts(preds, target, iou_type)
        except ImportError:
            return runs
        for peer, backend in (("pycocotools", "pycocotools"), ("faster-coco-eval", "faster")):
            if peer in peers:
                try:
                    runs[peer] = cocoeval_run(gt_d, dt_d, iou_type, backend)
                except ImportError:
                    pass
        return runs

    return build


_map_workload("map_bbox_500", 500, 50,
              "bbox mAP, 500 images x 20 boxes x 20 classes (50 with --quick) vs pycocotools / faster-coco-eval")
_map_workload("map_bbox_5000", 5000, 200,
              "bbox mAP, 5,000 images x 20 boxes x 20 classes (200 with --quick) vs faster-coco-eval",
              peers=("faster-coco-eval",))
_map_workload("map_segm_100", 100, 20, "segm mAP, 100 images of 64x64 masks x 10 objects (20 with --quick)",
              iou_type="segm", mask_size=64, n_boxes=10)


@register("detection/intersection_over_union", domain="detection", samples=lambda quick: 100 if quick else 500,
          peers=("torchmetrics",))
def iou_family(quick: bool, device="cpu"):
    """Mean IoU / GIoU / DIoU / CIoU of 500 images x 20 boxes (torchmetrics' modules need torchvision: skipped)."""
    preds, target = on_device(coco_set(100 if quick else 500), device)
    device = None if torch.device(device).type == "cpu" else torch.device(device)
    batches = [(preds[i:i + BATCH], target[i:i + BATCH]) for i in range(0, len(preds), BATCH)]
    ms = {k: f() for k, f in (("iou", fmetrics.intersection_over_union),
                              ("giou", fmetrics.generalized_intersection_over_union),
                              ("diou", fmetrics.distance_intersection_over_union),
                              ("ciou", fmetrics.complete_intersection_over_union))}

    def run():
        out = {}
        for k, m in ms.items():
            s = m.init(device)
            for p, t in batches:
                s = m.update(s, p, t)
            out[k] = m.finalize(s)[k]
        return out

    def tm():
        from torchmetrics.detection import IntersectionOverUnion  # noqa: F401 - needs torchvision

    return {"fmetrics": run, "torchmetrics": tm}
