"""Law-suite cases and oracle data for the detection metrics.

`make_coco` draws COCO-like sets (crowd regions, images without ground truth
or without detections, tied scores, degenerate boxes, areas around the 32^2
and 96^2 borders, an image with more detections than ``max_det``, random
masks); `coco_reference` runs pycocotools' (or faster-coco-eval's)
``COCOeval`` on the same data, built the way torchmetrics builds it.
"""
from __future__ import annotations

import contextlib
import io

import numpy as np
import torch

from fmetrics import detection as fm
from tests.cases import Case, random_splits


def _to_format(xywh: torch.Tensor, fmt: str) -> torch.Tensor:
    x, y, w, h = xywh.unbind(-1)
    if fmt == "xywh":
        return xywh.clone()
    if fmt == "xyxy":
        return torch.stack([x, y, x + w, y + h], -1)
    return torch.stack([x + w / 2, y + h / 2, w, h], -1)


def _to_xywh(b: torch.Tensor, fmt: str) -> torch.Tensor:
    """torchvision's ``box_convert(b, fmt, "xywh")`` (through corners, in the boxes' dtype)."""
    if fmt == "xywh":
        return b
    if fmt == "cxcywh":
        cx, cy, w, h = b.unbind(-1)
        b = torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)
    x1, y1, x2, y2 = b.unbind(-1)
    return torch.stack([x1, y1, x2 - x1, y2 - y1], -1)


def _sides(g, n):
    """Box sides: a mix of uniform sizes and sides near 32 and 96 (areas around the COCO borders)."""
    kind = torch.randint(0, 4, (n,), generator=g)
    uni = torch.rand(n, generator=g) * 150 + 1
    near32 = 32 + (torch.randint(-2, 3, (n,), generator=g)).float() * 0.5
    near96 = 96 + (torch.randint(-2, 3, (n,), generator=g)).float() * 0.5
    return torch.where(kind == 0, near32, torch.where(kind == 1, near96, uni))


def make_coco(seed: int, n_images: int = 30, n_classes: int = 5, max_gt: int = 8, max_det: int = 12,
              box_format: str = "xywh", masks: bool = False, size: int = 48, many: int = 0, crowd: float = 0.08,
              area: bool = True, image_ties: bool = True, degenerate: float = 0.04):
    """``(preds, target)`` lists of per-image dicts (float32 boxes in ``box_format``).

    ``image_ties=False``: scores tie only inside an image (an image-specific offset): COCO breaks
    cross-image ties by image order, which a shuffled re-batching changes.
    """
    g = torch.Generator().manual_seed(seed)
    preds, target = [], []
    for i in range(n_images):
        m = int(torch.randint(0, max_gt + 1, (1,), generator=g))
        if i % 7 == 3:
            m = 0
        n = int(torch.randint(0, max_det + 1, (1,), generator=g))
        if i % 9 == 5:
            n = 0
        if many and i == 1:
            n = many
        if masks:
            gt_m = _random_masks(g, m, size)
            gt_boxes = torch.zeros(m, 4)
        else:
            w, h = _sides(g, m), _sides(g, m)
            h = torch.where(torch.rand(m, generator=g) < 0.5, w, h)  # square boxes: areas right at the borders
            w = torch.where(torch.rand(m, generator=g) < degenerate, torch.zeros(m), w)  # degenerate
            xy = torch.rand(m, 2, generator=g) * 300
            gt_boxes = torch.cat([xy, w[:, None], h[:, None]], 1).float()
        labels = torch.randint(0, n_classes, (m,), generator=g)
        t = {"boxes": _to_format(gt_boxes, box_format), "labels": labels}
        if crowd:
            t["iscrowd"] = (torch.rand(m, generator=g) < crowd).long()
        if area and i % 3 == 0:
            t["area"] = torch.where(torch.rand(m, generator=g) < 0.7,
                                    (torch.rand(m, generator=g) * 120) ** 2, torch.zeros(m))
        if masks:
            t["masks"] = gt_m
        # detections: jittered copies of ground truths and random boxes
        src = torch.randint(0, max(m, 1), (n,), generator=g)
        copy = (torch.rand(n, generator=g) < 0.7) & (m > 0)
        if masks:
            rnd = _random_masks(g, n, size)
            if m:
                shifted = torch.roll(gt_m[src], shifts=(int(torch.randint(-2, 3, (1,), generator=g)),), dims=(1,))
                flip = torch.rand(n, size, size, generator=g) < 0.05
                det_m = torch.where(copy[:, None, None], shifted ^ flip, rnd)
            else:
                det_m = rnd
            det_boxes = torch.zeros(n, 4)
        else:
            jit = gt_boxes[src] * (1 + 0.15 * torch.randn(n, 4, generator=g)) if m else torch.zeros(n, 4)
            w, h = _sides(g, n), _sides(g, n)
            rnd = torch.cat([torch.rand(n, 2, generator=g) * 300, w[:, None], h[:, None]], 1)
            det_boxes = torch.where(copy[:, None], jit.abs(), rnd).float()
        dl = torch.where(copy & (torch.rand(n, generator=g) < 0.85), labels[src] if m else src,
                         torch.randint(0, n_classes, (n,), generator=g))
        scores = torch.randint(0, 25, (n,), generator=g).float() / 25  # many ties
        if not image_ties:
            scores = scores + i * 1e-4
        p = {"boxes": _to_format(det_boxes, box_format), "scores": scores, "labels": dl}
        if masks:
            p["masks"] = det_m
        preds.append(p)
        target.append(t)
    return preds, target


def _random_masks(g, n, size):
    """Random rectangles with holes (some empty masks)."""
    yy = torch.arange(size)[:, None]
    xx = torch.arange(size)[None, :]
    out = torch.zeros(n, size, size, dtype=torch.bool)
    for k in range(n):
        x0, y0 = (int(v) for v in torch.randint(0, size, (2,), generator=g))
        w, h = (int(v) for v in torch.randint(0, size // 2, (2,), generator=g))
        rect = (xx >= x0) & (xx < x0 + w) & (yy >= y0) & (yy < y0 + h)
        out[k] = rect & (torch.rand(size, size, generator=g) < 0.9)
    return out


def coco_datasets(preds, target, iou_type="bbox", box_format="xywh", average="macro"):
    """The ground-truth and detection COCO dicts torchmetrics would build (``area`` <= 0: from box or mask)."""
    from pycocotools import mask as mask_utils

    labels = sorted({int(v) for d in preds + target for v in d["labels"].tolist()})
    if average == "micro":
        labels = [0] if labels else []
    images, gts, dts = [], [], []
    aid = 1
    for i, (p, t) in enumerate(zip(preds, target)):
        img = {"id": i}
        if iou_type == "segm":
            hw = (t["masks"] if t["masks"].shape[0] else p["masks"]).shape[1:]
            img.update(height=int(hw[0]), width=int(hw[1]))
        images.append(img)
        for kind, d in (("gt", t), ("dt", p)):
            n = d["labels"].shape[0]
            boxes = _to_xywh(d["boxes"], box_format).tolist() if iou_type == "bbox" else None
            rles = [mask_utils.encode(np.asfortranarray(m.numpy().astype(np.uint8))) for m in d["masks"]] \
                if iou_type == "segm" else None
            for k in range(n):
                ann = {"id": aid, "image_id": i, "category_id": 0 if average == "micro" else int(d["labels"][k])}
                auto = boxes[k][2] * boxes[k][3] if boxes is not None else float(mask_utils.area(rles[k]))
                if boxes is not None:
                    ann["bbox"] = boxes[k]
                else:
                    ann["segmentation"] = rles[k]
                if kind == "gt":
                    given = float(d["area"][k]) if "area" in d else 0.0
                    ann["area"] = given if given > 0 else auto
                    ann["iscrowd"] = int(d["iscrowd"][k]) if "iscrowd" in d else 0
                    gts.append(ann)
                else:
                    ann["area"] = auto
                    ann["score"] = float(d["scores"][k])
                    dts.append(ann)
                aid += 1
    cats = [{"id": c, "name": str(c)} for c in labels]
    info = {"description": "fmetrics test"}
    return ({"images": images, "annotations": gts, "categories": cats, "info": info},
            {"images": images, "annotations": dts, "categories": cats, "info": info})


def cocoeval(gt_d: dict, dt_d: dict, iou_type: str, backend: str, **params):
    """``COCOeval`` of ground-truth and detection dataset dicts, evaluated, accumulated and summarized
    (quietly) by ``backend`` (``"pycocotools"`` or faster-coco-eval); ``params`` set ``ev.params`` fields."""
    if backend == "pycocotools":
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval
    else:
        from faster_coco_eval import COCO
        from faster_coco_eval import COCOeval_faster as COCOeval
    with contextlib.redirect_stdout(io.StringIO()):
        gt, dt = COCO(), COCO()
        gt.dataset, dt.dataset = gt_d, dt_d
        gt.createIndex()
        dt.createIndex()
        ev = COCOeval(gt, dt, iou_type)
        for key, value in params.items():
            setattr(ev.params, key, value)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def coco_reference(preds, target, iou_type="bbox", box_format="xywh", backend="pycocotools", iou_thresholds=None,
                   rec_thresholds=None, max_dets=(1, 10, 100), average="macro", cat_ids=None):
    """``(stats[12], precision, recall, scores)`` of ``COCOeval`` (pycocotools or faster-coco-eval)."""
    gt_d, dt_d = coco_datasets(preds, target, iou_type, box_format, average)
    params = {"maxDets": list(max_dets)}
    if iou_thresholds is not None:
        params["iouThrs"] = np.array(iou_thresholds, dtype=np.float64)
    if rec_thresholds is not None:
        params["recThrs"] = np.array(rec_thresholds, dtype=np.float64)
    if cat_ids is not None:
        params["catIds"] = list(cat_ids)
    ev = cocoeval(gt_d, dt_d, iou_type, backend, **params)
    return (np.asarray(ev.stats[:12], dtype=np.float64), np.asarray(ev.eval["precision"]),
            np.asarray(ev.eval["recall"]), np.asarray(ev.eval["scores"]))


STAT_KEYS = ("map", "map_50", "map_75", "map_small", "map_medium", "map_large", "mar_1", "mar_10", "mar_100",
             "mar_small", "mar_medium", "mar_large")


def map_reference(iou_type="bbox", box_format="xywh", average="macro", class_metrics=False, **kw):
    """A `check_metric` reference: the summary numbers of pycocotools (``classes`` from the labels)."""

    def reference(preds, target):
        stats = coco_reference(preds, target, iou_type, box_format, average=average, **kw)[0]
        out = {k: torch.tensor(float(v), dtype=torch.float64) for k, v in zip(STAT_KEYS, stats)}
        labels = sorted({int(v) for d in preds + target for v in d["labels"].tolist()})
        if class_metrics:
            per = [coco_reference(preds, target, iou_type, box_format, cat_ids=[c], **kw)[0] for c in labels]
            out["map_per_class"] = torch.tensor([s[0] for s in per], dtype=torch.float64)
            out["mar_100_per_class"] = torch.tensor([s[8] for s in per], dtype=torch.float64)
        else:
            out["map_per_class"] = torch.tensor(-1.0, dtype=torch.float64)
            out["mar_100_per_class"] = torch.tensor(-1.0, dtype=torch.float64)
        out["classes"] = torch.tensor(labels, dtype=torch.int32)
        return out

    return reference


def _batches(seed, **kw):
    preds, target = make_coco(seed, image_ties=False, **kw)
    g = torch.Generator().manual_seed(seed)
    edges = [0, *random_splits(len(preds), 4, g), len(preds)]
    return [(preds[a:b], target[a:b]) for a, b in zip(edges[:-1], edges[1:])]


_TRACE_WHY = ("compile epoch: inputs are Python lists of per-image dicts; a compiled update specializes on the list "
              "length (Python structure, not a tensor shape), so each distinct number of images per batch compiles "
              "once")
_MAP_LAWS = ("purity", "reference", "split invariance", "merge identity", "merge order", "merge associativity",
             "distributed equivalence", "vmap", "no host sync", "compile", "serialization")


def _map_case(id, kwargs, data, ref_kwargs=None):
    ref = dict(iou_type=kwargs.get("iou_type", "bbox"), box_format=kwargs.get("box_format", "xyxy"),
               average=kwargs.get("average", "macro"), class_metrics=kwargs.get("class_metrics", False))
    ref.update(ref_kwargs or {})
    return Case(id, fm.mean_average_precision, kwargs, lambda s: _batches(s, **data),
                reference=map_reference(**ref),
                check={"laws": _MAP_LAWS, "rtol": 0, "atol": 0, "reference_rtol": 0, "reference_atol": 1e-12},
                why=_TRACE_WHY)


def _pair_value(kind, a, b):
    """IoU / GIoU / DIoU / CIoU of two xyxy boxes from the published definitions (float64 scalars)."""
    import math

    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])  # noqa: E731
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = area(a) + area(b) - inter
    iou = inter / union
    cw = max(a[2], b[2]) - min(a[0], b[0])
    ch = max(a[3], b[3]) - min(a[1], b[1])
    if kind == "iou":
        return iou
    if kind == "giou":
        return iou - (cw * ch - union) / (cw * ch)
    rho2 = ((a[0] + a[2]) / 2 - (b[0] + b[2]) / 2) ** 2 + ((a[1] + a[3]) / 2 - (b[1] + b[3]) / 2) ** 2
    diou = iou - rho2 / (cw ** 2 + ch ** 2 + 1e-7)
    if kind == "diou":
        return diou
    v = 4 / math.pi ** 2 * (math.atan((a[2] - a[0]) / (a[3] - a[1])) - math.atan((b[2] - b[0]) / (b[3] - b[1]))) ** 2
    return diou - v / (1 - iou + v + 1e-7) * v


def iou_reference(kind, box_format="xyxy", iou_threshold=None, class_metrics=False, respect_labels=True):
    """torchmetrics' IntersectionOverUnion-family semantics, pair by pair in Python."""

    def reference(preds, target):
        pairs = []  # (value, gt label or None)
        for p, t in zip(preds, target):
            db = _to_xywh(p["boxes"].double(), box_format)
            gb = _to_xywh(t["boxes"].double(), box_format)
            db = torch.cat([db[:, :2], db[:, :2] + db[:, 2:]], 1).tolist()
            gb = torch.cat([gb[:, :2], gb[:, :2] + gb[:, 2:]], 1).tolist()
            pl, tl = p["labels"].tolist(), t["labels"].tolist()
            if not db or not gb:
                k = max(len(db), len(gb))
                for i in range(k):
                    for j in range(k):
                        if i == j or not respect_labels:
                            pairs.append((0.0, tl[j] if not db else None))
                continue
            for i, a in enumerate(db):
                for j, b in enumerate(gb):
                    v = _pair_value(kind, a, b)
                    if iou_threshold is not None and v < iou_threshold:
                        continue
                    if respect_labels and pl[i] != tl[j]:
                        continue
                    pairs.append((v, tl[j]))
        out = {kind: torch.tensor(np.mean([v for v, _ in pairs]) if pairs else 0.0, dtype=torch.float64)}
        if class_metrics:
            for c in sorted({int(v) for d in preds + target for v in d["labels"].tolist()}):
                vs = [v for v, lab in pairs if lab == c]
                out[f"{kind}/cl_{c}"] = torch.tensor(np.mean(vs) if vs else 0.0, dtype=torch.float64)
        return out

    return reference


_IOU_FACTORIES = {"iou": fm.intersection_over_union, "giou": fm.generalized_intersection_over_union,
                  "diou": fm.distance_intersection_over_union, "ciou": fm.complete_intersection_over_union}


def _iou_case(kind, kwargs, fmt="xyxy"):
    data = dict(n_images=10, box_format=fmt, n_classes=3, crowd=0, area=False, degenerate=0.0)
    return Case(f"{kind}-{'-'.join(f'{k}={v}' for k, v in kwargs.items()) or 'default'}", _IOU_FACTORIES[kind],
                {"box_format": fmt, **kwargs}, lambda s: _batches(s, **data),
                reference=iou_reference(kind, fmt, **kwargs),
                check={"laws": _MAP_LAWS, "reference_rtol": 1e-9, "reference_atol": 1e-12}, why=_TRACE_WHY)


CASES = [
    _iou_case("iou", {}),
    _iou_case("iou", {"iou_threshold": 0.3, "class_metrics": True}, "xywh"),
    _iou_case("giou", {"respect_labels": False}, "cxcywh"),
    _iou_case("giou", {"class_metrics": True}),
    _iou_case("diou", {}),
    _iou_case("diou", {"iou_threshold": 0.1}, "xywh"),
    _iou_case("ciou", {}),
    _iou_case("ciou", {"class_metrics": True, "respect_labels": False}),

    _map_case("map-bbox-xyxy", {}, dict(n_images=10, box_format="xyxy", many=130)),
    _map_case("map-bbox-xywh-classes", {"box_format": "xywh", "class_metrics": True},
              dict(n_images=12, box_format="xywh", n_classes=4)),
    _map_case("map-bbox-cxcywh-micro", {"box_format": "cxcywh", "average": "micro"},
              dict(n_images=12, box_format="cxcywh")),
    _map_case("map-segm", {"iou_type": "segm"}, dict(n_images=6, masks=True, size=20)),
]


# ---------------------------------------------------------------- panoptic quality

PQ_THINGS, PQ_STUFFS = (0, 1, 3), (6, 7)


def make_panoptic(seed: int, n: int = 12, size: int = 16, block: int = 4, unknown: bool = True):
    """``(preds, target)`` panoptic maps ``[n, size, size, 2]`` of (category, instance) per pixel.

    Target: blocks of random things (instances 1-3), stuff (random instance ids, ignored) and, with
    ``unknown``, an unknown category 9 (void). Preds: the target with some blocks relabelled (other
    instance / category, unknown 9 when ``unknown``) and pixel noise, so IoUs land on both sides of 0.5.
    """
    g = torch.Generator().manual_seed(seed)
    cats = torch.tensor(list(PQ_THINGS) + list(PQ_STUFFS) + ([9] if unknown else []))
    k = size // block

    def blocks(shape):
        return torch.nn.functional.interpolate(shape[:, None].float(), scale_factor=block, mode="nearest")[:, 0].long()

    tc = cats[torch.randint(0, len(cats), (n, k, k), generator=g)]
    ti = torch.randint(1, 4, (n, k, k), generator=g)
    target = torch.stack([blocks(tc), blocks(ti)], -1)
    pc = torch.where(torch.rand(n, k, k, generator=g) < 0.25, cats[torch.randint(0, len(cats), (n, k, k),
                                                                               generator=g)], tc)
    pi = torch.where(torch.rand(n, k, k, generator=g) < 0.25, torch.randint(1, 4, (n, k, k), generator=g), ti)
    preds = torch.stack([blocks(pc), blocks(pi)], -1)
    noise = torch.rand(n, size, size, generator=g) < 0.15
    preds[..., 0] = torch.where(noise, cats[torch.randint(0, len(cats), (n, size, size), generator=g)], preds[..., 0])
    stuff_pix = torch.isin(preds[..., 0], torch.tensor(PQ_STUFFS))
    preds[..., 1] = torch.where(stuff_pix, torch.randint(0, 50, (n, size, size), generator=g), preds[..., 1])
    if n > 2:
        target[2] = torch.tensor([6, 0])  # one image of a single stuff segment
        preds[1, :, :, 0] = torch.where(preds[1, :, :, 0] == 9, 0, preds[1, :, :, 0])
    return preds, target


def pq_reference(modified: bool = False, **kwargs):
    """torchmetrics' functional panoptic_quality / modified_panoptic_quality on all the data at once."""

    def reference(preds, target):
        import torchmetrics.functional.detection as tmd

        if modified:
            return tmd.modified_panoptic_quality(preds, target, **kwargs)
        return tmd.panoptic_quality(preds, target, **kwargs)

    return reference


def _pq_batches(seed, **kw):
    preds, target = make_panoptic(seed, **kw)
    g = torch.Generator().manual_seed(seed)
    edges = [0, *random_splits(preds.shape[0], 4, g), preds.shape[0]]
    return [(preds[a:b], target[a:b]) for a, b in zip(edges[:-1], edges[1:])]


def _pq_case(id, factory, kwargs, modified=False, unknown=True):
    kw = {"things": set(PQ_THINGS), "stuffs": set(PQ_STUFFS), **kwargs}
    # torchmetrics adds float32 IoUs into its float64 sums: agreement to float32 precision
    return Case(id, factory, kw, lambda s: _pq_batches(s, unknown=unknown), reference=pq_reference(modified, **kw),
                check={"reference_rtol": 1e-6, "reference_atol": 1e-7, "rtol": 1e-12, "atol": 1e-12})


CASES += [
    _pq_case("pq-default", fm.panoptic_quality, {}, unknown=False),
    _pq_case("pq-unknown-sq-rq", fm.panoptic_quality, {"allow_unknown_preds_category": True,
                                                       "return_sq_and_rq": True}),
    _pq_case("pq-per-class", fm.panoptic_quality, {"allow_unknown_preds_category": True, "return_per_class": True}),
    _pq_case("pq-per-class-sq-rq", fm.panoptic_quality, {"allow_unknown_preds_category": True,
                                                         "return_per_class": True, "return_sq_and_rq": True}),
    _pq_case("modified-pq", fm.modified_panoptic_quality, {"allow_unknown_preds_category": True}, modified=True),
    _pq_case("modified-pq-known", fm.modified_panoptic_quality, {}, modified=True, unknown=False),
]
