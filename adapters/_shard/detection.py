"""Sharded finalize of COCO `mean_average_precision` (``iou_type`` ``"bbox"``, ``"segm"`` or both; ``average``
``"macro"`` or ``"micro"``; ``extended_summary`` too).

COCO's matching runs per (image, class), its accumulation per class over every image; only `_coco.summarize`
(and ``map_per_class``) looks across classes. Images get global ids first (the exclusive prefix of the ranks'
image counts, one ``all_gather`` that also carries each rank's mask width): image order is rank order, as in
one process's joined state.

* ``"macro"``: every detection and ground truth goes to rank ``hash(label) mod world`` (two `comm.route`s): a
  class is whole on one rank, its objects in one process's order (source rank, then update order), which fixes
  the stable score ties as one process does. Masks travel as fixed-width rows: each rank packs its masks into
  the int64 words of `_masks.mask_words` (8 pixels a word), zero-padded to the widest image of any rank; areas
  and intersections are exact pixel counts, the same whatever the padding. Each rank runs `_coco.evaluate` on
  its classes; the per-class precision / recall / score tables (``T x R x A x M`` per class: O(classes), not
  O(objects)) are gathered and put in class order.
* ``"micro"`` (every label one class): an image is whole on its rank, so each rank matches its own images
  (`_coco.matches`, nothing routed). The accumulation runs over every image's detections in one order
  (descending score, then image, then rank in the image: one process's stable order), so the kept detections
  (score, rank in the image, one true / false positive / ignored code per area range and IoU threshold) go
  through a sample sort on ``(-score, source rank, position)``: each rank then holds a contiguous piece of the
  global order, the exclusive prefix of the pieces' true / false positive counts (one ``all_gather``) gives
  each true positive its global count ``c`` and the false positives before it, hence pycocotools' precision
  ``c / (fp + c + eps)``. Each rank buckets its true positives by recall threshold (`_coco.bucket_max`), one
  ``all_reduce`` (max) joins the buckets and the scores read at each threshold (the rank holding the
  ``need``-th true positive gives it), and `_coco.read_out` fills the ``[T, R, 1, A, M]`` tables as one
  process. ``class_metrics`` adds the macro evaluation for the per-class values, as one process does.
* ``extended_summary``: the precision / recall / score tables are the ones above (O(classes x thresholds));
  the ``ious`` matrices are computed where their (image, class) is matched and gathered (keys and flat values):
  every rank returns the whole output, whose size is that of the matrices themselves.

`_coco.summarize` then reads the 12 COCO stats (and the per-class values) off the tables as one process does.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from adapters._shard import comm, sort
from adapters._shard.retrieval import owner
from fmetrics.detection import _coco, _inputs, _masks
from fmetrics.detection.mean_ap import _NAME, RULES, DetectionState, detection_cuts, summary, thresholds
from fmetrics.state import cat_chunks


def _types(args) -> tuple:
    t = args.get("iou_type")
    return (t,) if isinstance(t, str) else tuple(t)


def applies(metric) -> bool:
    r = metric.recipe
    if r is None or not r.module.startswith("fmetrics.detection") or r.qualname != "mean_average_precision":
        return False
    return set(_types(r.arguments)) <= {"bbox", "segm"}


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
    det, gt = [], []  # the object columns besides (image, label, ...): boxes, then mask words
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
    det_img, gt_img = torch.repeat_interleave(img, det_counts), torch.repeat_interleave(img, gt_counts)
    det_labels, gt_labels = cat("det_labels", e(0, dtype=i64)), cat("gt_labels", e(0, dtype=i64))
    crowd = cat("gt_crowd", e(0, dtype=torch.bool)).to(torch.int8)  # (gloo sends no bool)
    objects = ([det_img, det_labels, cat("det_scores", e(0)), *det],
               [gt_img, gt_labels, crowd, cat("gt_area", e(0)), *gt])
    every_class = comm.gather_rows(ctx, torch.unique(torch.cat([det_labels, gt_labels])))
    classes = torch.unique(every_class)
    th = _Thresholds(args, ctx.comm)
    micro, extended = args["average"] == "micro", args["extended_summary"]
    macro = None
    if not micro or args["class_metrics"]:
        d, g = objects
        routed = (comm.route(ctx, d, owner(det_labels, ctx.world)), comm.route(ctx, g, owner(gt_labels, ctx.world)))
        macro = _macro(ctx, *_datasets(types, images, *routed), th, extended and not micro)
    evals = macro
    if micro:
        d, g = objects
        local = ([d[0] - offset, torch.zeros_like(d[1]), *d[2:]], [g[0] - offset, torch.zeros_like(g[1]), *g[2:]])
        evals = {t: _micro(ctx, data, th, int(classes.numel() > 0), extended, offset)
                 for t, data in _datasets(types, det_counts.shape[0], *local)[0].items()}
    out = {}
    for itype in types:
        prefix = "" if len(types) == 1 else f"{itype}_"
        out.update(summary(evals[itype], macro and macro[itype], th.iou, th.max_dets, args["class_metrics"], prefix,
                           dev))
        if extended:
            ev = evals[itype]
            out.update({prefix + "ious": {k: v.to(dev) for k, v in ev.ious.items()}, prefix + "precision":
                        ev.precision.to(dev), prefix + "recall": ev.recall.to(dev), prefix + "scores": ev.scores.to(dev)})
    out["classes"] = classes.to(device=dev, dtype=torch.int32)
    return out


class _Thresholds:
    """The IoU and recall thresholds (float64) and the ascending detection cuts, as `mean_average_precision`'s."""

    def __init__(self, args, device):
        self.iou, self.rec = thresholds(args["iou_thresholds"], args["rec_thresholds"], device)
        self.max_dets = detection_cuts(args["max_detection_thresholds"])


def _datasets(types, images: int, det: list, gt: list):
    """``({iou type: `_coco.Dataset`}, the distinct labels)`` of the objects' columns: detections ``(image,
    label, score, [boxes], [mask words])``, ground truths ``(image, label, crowd, given area, [boxes], [mask
    words])``; the labels become indices into their sorted distinct values."""
    (det_img, det_labels, det_scores, *d), (gt_img, gt_labels, gt_crowd, gt_area, *g) = det, gt
    local = torch.unique(torch.cat([det_labels, gt_labels]))
    pairs = {}
    if "bbox" in types:
        db, gb = d.pop(0), g.pop(0)
        pairs["bbox"] = (db[:, 2] * db[:, 3], gb[:, 2] * gb[:, 3], _coco.box_iou_pairs(db, gb))
    if "segm" in types:
        dw, gw = d.pop(0), g.pop(0)
        da, ga = _masks.pixel_counts(dw).to(torch.float64), _masks.pixel_counts(gw).to(torch.float64)
        pairs["segm"] = (da, ga, _masks.pair_iou(dw, gw, da, ga))
        if "bbox" in types:  # torchmetrics/COCO: with masks, ground-truth areas are mask areas
            pairs["bbox"] = (pairs["bbox"][0], ga, pairs["bbox"][2])
    return {t: _coco.Dataset(images, det_img, torch.searchsorted(local, det_labels), det_scores, det_area,
                             gt_img, torch.searchsorted(local, gt_labels), gt_crowd.bool(),
                             torch.where(gt_area > 0, gt_area, gt_auto), pair_iou)
            for t, (det_area, gt_auto, pair_iou) in pairs.items()}, local


def _macro(ctx: comm.Ctx, datasets: dict, classes: torch.Tensor, th: _Thresholds, ious: bool) -> dict:
    """Per iou type: the `_coco.Evaluation` of every class (class order) from the ``classes`` this rank owns."""
    order = torch.argsort(comm.gather_rows(ctx, classes))
    out = {}
    for itype, data in datasets.items():
        ev = _coco.evaluate(data, th.iou, th.rec, th.max_dets, classes.shape[0], extended_ious=ious, classes=classes)
        tables = (comm.gather_rows(ctx, x.movedim(k, 0))[order].movedim(0, k)
                  for x, k in ((ev.precision, 2), (ev.recall, 1), (ev.scores, 2)))
        out[itype] = _coco.Evaluation(*tables, _gather_ious(ctx, ev.ious) if ious else None)
    return out


def _micro(ctx: comm.Ctx, data: _coco.Dataset, th: _Thresholds, classes: int, ious: bool, offset: int):
    """The `_coco.Evaluation` of every image's objects as one class (``classes``: 1, or 0 when no rank holds an
    object) from this rank's images (``offset``: the global id of its first)."""
    if classes == 0:
        return _coco.evaluate(data, th.iou, th.rec, th.max_dets, 0, extended_ious=ious)
    f64 = torch.float64
    T, R, A, M = th.iou.shape[0], th.rec.shape[0], len(_coco.AREA_RANGES), len(th.max_dets)
    S = A * T
    m = _coco.matches(data, th.iou, th.max_dets, 1, extended_ious=ious)
    code = (m.tps.to(torch.int8) + 2 * m.fps.to(torch.int8)).reshape(S, -1)[:, m.acc].T  # 1: tp, 2: fp, 0: ignored
    score, drank, code = _global_order(ctx, m.d_score[m.acc], m.drank[m.acc], code.contiguous())
    npig = m.npig.clone()
    dist.all_reduce(npig, group=ctx.group)
    npig_seg = npig.expand(A, T).reshape(-1)  # segments (area, threshold), as `_coco._accumulate` with one class
    rec_sorted, rec_order = torch.sort(th.rec, stable=True)
    need = _coco._least_count(rec_sorted[None, :], npig_seg.clamp(min=1).to(f64)[:, None])  # [S, R]
    cuts = [drank < md for md in th.max_dets]
    tp, fp = code == 1, code == 2
    counts = torch.stack([torch.stack([(tp & c[:, None]).sum(0), (fp & c[:, None]).sum(0)]) for c in cuts])
    every = comm.gather_rows(ctx, counts[None])  # (world, M, 2, S)
    below, total = every[: ctx.rank].sum(0), every.sum(0)
    firsts = comm.gather_rows(ctx, torch.tensor([[[float(c.any()), float(score[c][0]) if c.any() else 0.0]
                                                  for c in cuts]], dtype=f64, device=score.device))
    both = torch.stack([torch.zeros((M, S, R), dtype=f64, device=score.device),
                        torch.full((M, S, R), -math.inf, dtype=f64, device=score.device)])
    for mi, cut in enumerate(cuts):
        seg, i = torch.nonzero((tp & cut[:, None]).T).unbind(1)  # this piece's true positives, by segment
        n_tp, first = _coco._segments(seg, S)
        c = below[mi, 0][seg] + torch.arange(seg.shape[0], device=seg.device) - first[seg] + 1
        fps = below[mi, 1][seg] + torch.cumsum(fp & cut[:, None], 0, dtype=torch.int32)[i, seg]
        c_f = c.to(f64)
        both[0, mi] = _coco.bucket_max(need, seg, c, c_f / (fps.to(f64) + c_f + _coco.EPS))
        k = need - below[mi, 0][:, None]  # the need-th true positive is this piece's k-th of its segment
        if seg.numel():
            at = score[i[(first[:, None] + k - 1).clamp(min=0, max=seg.shape[0] - 1)]]
            both[1, mi] = torch.where((k >= 1) & (k <= n_tp[:, None]), at, -math.inf)
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=ctx.group)
    precision = torch.empty((T, R, 1, A, M), dtype=f64, device=score.device)
    recall, scores = torch.empty((T, 1, A, M), dtype=f64, device=score.device), torch.empty_like(precision)
    for mi in range(M):
        has = torch.nonzero(firsts[:, mi, 0] > 0).reshape(-1)
        first_score = firsts[has[0], mi, 1] if has.numel() else torch.zeros((), dtype=f64, device=score.device)
        _coco.read_out(need, _coco.envelope(both[0, mi]), both[1, mi], total[mi, 0],
                       torch.full((S,), has.numel() > 0, device=score.device),
                       first_score.expand(S), npig_seg, rec_order, precision[..., mi], recall[..., mi], scores[..., mi])
    matrices = _gather_ious(ctx, {(i + offset, c): v for (i, c), v in m.ious.items()}) if ious else None
    return _coco.Evaluation(precision, recall, scores, matrices)


def _global_order(ctx: comm.Ctx, score: torch.Tensor, *columns: torch.Tensor):
    """Rows given in this rank's accumulation order (descending score, image, rank), received so that this rank
    holds a contiguous piece of one process's order over every image (ranks ascending): a sample sort on
    ``(-score, source rank, position)`` (unique keys: however many scores tie, the pieces stay balanced), then
    a stable sort by descending score (ties: source rank, then position, as the route delivers them)."""
    f64 = torch.float64
    n = score.shape[0]
    pos = torch.arange(n, dtype=f64, device=score.device)
    take = torch.linspace(0, max(n - 1, 0), min(sort.SAMPLE, n), device=score.device).round().long()
    pooled = comm.gather_rows(ctx, torch.stack([-score[take], torch.full_like(pos[take], ctx.rank), pos[take]], 1))
    for col in (2, 1, 0):  # lexicographic order of the sample: stable sorts from the last key
        pooled = pooled[torch.sort(pooled[:, col], stable=True).indices]
    cut = pooled[torch.arange(1, ctx.world, device=pooled.device) * pooled.shape[0] // ctx.world] \
        if pooled.shape[0] else pooled
    dest = torch.zeros(n, dtype=torch.int64, device=score.device)
    for a, r, p in cut.tolist():
        dest += (-score > a) | ((-score == a) & ((ctx.rank > r) | ((ctx.rank == r) & (pos > p))))
    score, *columns = comm.route(ctx, [score, *columns], dest)
    order = torch.sort(-score, stable=True).indices
    return (score[order], *(c[order] for c in columns))


def _gather_ious(ctx: comm.Ctx, ious: dict) -> dict:
    """Every rank's ``{(image, class): [n_det, n_gt] float32}`` (keys and flat values gathered)."""
    keys = torch.tensor([[i, c, *v.shape] for (i, c), v in ious.items()], dtype=torch.int64,
                        device=ctx.comm).reshape(-1, 4)
    flat = torch.cat([torch.zeros(0, dtype=torch.float32, device=ctx.comm)] + [v.reshape(-1) for v in ious.values()])
    keys, flat = comm.gather_rows(ctx, keys), comm.gather_rows(ctx, flat)
    out, at = {}, 0
    for i, c, nd, ng in keys.tolist():
        out[(i, c)] = flat[at: at + nd * ng].view(nd, ng)
        at += nd * ng
    return out
