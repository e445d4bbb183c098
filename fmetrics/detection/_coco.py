"""COCO evaluation (pycocotools' ``COCOeval.evaluate / accumulate / summarize``) in batched torch.

The semantics follow pycocotools to the letter:

* per (image, category) the detections are sorted by descending score
  (stable: ties keep their input order) and cut at the largest max-detection
  threshold; ground truths keep their order;
* a ground truth is *ignored* for an area range when it is a crowd region or
  its area lies outside the range; a detection is matched greedily, in score
  order, to the unmatched non-ignored ground truth of highest IoU (the last
  one on IoU ties) with IoU >= min(t, 1 - 1e-10), and only when there is none
  to an ignored one (a crowd region may absorb any number of detections);
  a detection matched to an ignored ground truth, or unmatched with an area
  outside the range, is ignored;
* per (category, area range, max detections) the detections of every image
  (each image's first ``max_det`` of that category) are sorted by descending
  score (stable, image order then rank), precision is made monotone from the
  right and read at the recall thresholds by a left ``searchsorted``; ``-1``
  marks a category without non-ignored ground truth.

Where pycocotools loops over images, detections and ground truths in Python,
this module loops over the detection *rank* inside an (image, category) group
(at most ``max_det`` steps), each step batched over every group, area range
and IoU threshold on the flat (detection, ground truth) pairs of that rank
(`_match`); the accumulation reads only the true positives (`_accumulate`).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

#: pycocotools' ``areaRng``: all, small, medium, large (``1e5 ** 2`` as the open end)
AREA_RANGES = ((0.0, 1e5 ** 2), (0.0, 32.0 ** 2), (32.0 ** 2, 96.0 ** 2), (96.0 ** 2, 1e5 ** 2))
#: numpy's ``np.spacing(1)``, added to ``tp + fp`` by pycocotools
EPS = 2.220446049250313e-16


class Dataset(NamedTuple):
    """One iou type's view of the data: flat per-object tensors, images as integer ids."""

    num_images: int
    det_img: torch.Tensor  # int64 [Nd]
    det_label: torch.Tensor  # int64 [Nd]
    det_score: torch.Tensor  # float64 [Nd]
    det_area: torch.Tensor  # float64 [Nd]
    gt_img: torch.Tensor  # int64 [Ng]
    gt_label: torch.Tensor  # int64 [Ng]
    gt_crowd: torch.Tensor  # bool [Ng]
    gt_area: torch.Tensor  # float64 [Ng]
    # (det index [P], gt index [P], gt crowd [P]) -> IoU [P] float64 (each pair shares an image)
    pair_iou: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class Evaluation(NamedTuple):
    precision: torch.Tensor  # [T, R, K, A, M] float64, -1 where undefined
    recall: torch.Tensor  # [T, K, A, M]
    scores: torch.Tensor  # [T, R, K, A, M]
    ious: Optional[dict]  # {(image, class): [n_det, n_gt]} when asked


def box_iou_pairs(det_boxes: torch.Tensor, gt_boxes: torch.Tensor):
    """pycocotools' ``bbIou`` on xywh float64 boxes, as a `Dataset.pair_iou`."""

    def pair_iou(di, gi, crowd):
        dx, dy, dw, dh = det_boxes[di].unbind(1)  # [P] each
        gx, gy, gw, gh = gt_boxes[gi].unbind(1)
        da = dw * dh
        w = torch.minimum(dw + dx, gw + gx) - torch.maximum(dx, gx)
        h = torch.minimum(dh + dy, gh + gy) - torch.maximum(dy, gy)
        inter = w * h
        union = torch.where(crowd, da, da + gw * gh - inter)
        iou = inter / union
        return torch.where((w <= 0) | (h <= 0), torch.zeros((), dtype=iou.dtype, device=iou.device), iou)

    return pair_iou


def _segments(key: torch.Tensor, num: int):
    """Counts and start offsets of the values ``0..num-1`` in the sorted ``key``."""
    counts = torch.bincount(key, minlength=num)
    starts = torch.cumsum(counts, 0) - counts
    return counts, starts


def _rank_in_group(sorted_key: torch.Tensor, num: int) -> torch.Tensor:
    counts, starts = _segments(sorted_key, num)
    return torch.arange(sorted_key.shape[0], device=sorted_key.device) - starts[sorted_key]


class Matches(NamedTuple):
    """COCO's matching of one `Dataset`: per kept detection (``N``, sorted by class, image, -score, rank)."""

    tps: torch.Tensor  # bool [A, T, N]: a true positive (matched, not ignored)
    fps: torch.Tensor  # bool [A, T, N]: a false positive (unmatched, not ignored)
    d_class: torch.Tensor  # int64 [N]
    d_score: torch.Tensor  # float64 [N]
    drank: torch.Tensor  # int64 [N]: rank of the detection in its (image, class) by score
    acc: torch.Tensor  # int64 [N]: accumulation order (class, -score, image, rank)
    npig: torch.Tensor  # int64 [A, K]: non-ignored ground truths per area range and class
    ious: Optional[dict]  # {(image, class): [n_det, n_gt]} when asked


def evaluate(data: Dataset, iou_thresholds: torch.Tensor, rec_thresholds: torch.Tensor, max_dets: tuple,
             num_classes: int, extended_ious: bool = False, classes: Optional[torch.Tensor] = None) -> Evaluation:
    """pycocotools' evaluate + accumulate over ``num_classes`` categories (labels ``0..K-1``).

    ``iou_thresholds``/``rec_thresholds`` are float64 tensors; ``max_dets`` is sorted ascending.
    """
    dev = data.det_score.device
    f64 = torch.float64
    T, R, K, A, M = iou_thresholds.shape[0], rec_thresholds.shape[0], num_classes, len(AREA_RANGES), len(max_dets)
    precision = -torch.ones((T, R, K, A, M), dtype=f64, device=dev)
    recall = -torch.ones((T, K, A, M), dtype=f64, device=dev)
    scores = -torch.ones((T, R, K, A, M), dtype=f64, device=dev)
    if K == 0:
        return Evaluation(precision, recall, scores, {} if extended_ious else None)
    m = matches(data, iou_thresholds, max_dets, K, extended_ious, classes)
    done = {}
    for mi, md in enumerate(max_dets):
        sel = m.acc[m.drank[m.acc] < int(md)]
        if sel.shape[0] in done:  # the same detections as a larger cut: the same numbers
            j = done[sel.shape[0]]
            precision[..., mi], recall[..., mi], scores[..., mi] = precision[..., j], recall[..., j], scores[..., j]
            continue
        done[sel.shape[0]] = mi
        _accumulate(m.tps[:, :, sel], m.fps[:, :, sel], m.d_class[sel], m.d_score[sel], m.npig, K, rec_thresholds,
                    precision[:, :, :, :, mi], recall[:, :, :, mi], scores[:, :, :, :, mi])
    return Evaluation(precision, recall, scores, m.ious)


def matches(data: Dataset, iou_thresholds: torch.Tensor, max_dets: tuple, num_classes: int,
            extended_ious: bool = False, classes: Optional[torch.Tensor] = None) -> Matches:
    """COCO's greedy matching of every (image, class) group (``num_classes >= 1``), before the accumulation."""
    dev = data.det_score.device
    f64 = torch.float64
    T, K, A = iou_thresholds.shape[0], num_classes, len(AREA_RANGES)
    I = data.num_images
    max_det = int(max_dets[-1])
    lo = torch.tensor([a[0] for a in AREA_RANGES], dtype=f64, device=dev)
    hi = torch.tensor([a[1] for a in AREA_RANGES], dtype=f64, device=dev)

    # ---- ground truths: group key (class, image), kept in input order inside a group
    gkey = data.gt_label * I + data.gt_img
    gorder = torch.sort(gkey, stable=True).indices
    gkey_s = gkey[gorder]
    # ignored per area range [A, Ng]
    g_ignore = data.gt_crowd[None, :] | (data.gt_area[None, :] < lo[:, None]) | (data.gt_area[None, :] > hi[:, None])
    npig = torch.zeros((A, K), dtype=torch.int64, device=dev)
    npig.index_add_(1, data.gt_label, (~g_ignore).to(torch.int64))

    # ---- detections: sorted by (class, image, -score, input order), cut at max_det per group
    dkey = data.det_label * I + data.det_img
    o1 = torch.sort(-data.det_score, stable=True).indices
    o2 = torch.sort(dkey[o1], stable=True).indices
    dorder = o1[o2]
    dkey_s = dkey[dorder]
    drank = _rank_in_group(dkey_s, K * I)
    keep = drank < max_det
    dorder, dkey_s, drank = dorder[keep], dkey_s[keep], drank[keep]
    N = dorder.shape[0]

    # ---- groups with both detections and ground truths need matching
    dcount = torch.bincount(dkey_s, minlength=K * I)
    gcount = torch.bincount(gkey_s, minlength=K * I)
    both = (dcount > 0) & (gcount > 0)
    groups = torch.nonzero(both).squeeze(1)
    matched = torch.zeros((A, T, N), dtype=torch.bool, device=dev)
    match_ig = torch.zeros((A, T, N), dtype=torch.bool, device=dev)
    ious_out = {} if extended_ious else None
    if groups.numel():
        _match(data, groups, dcount, gcount, dorder, gorder, g_ignore, iou_thresholds, classes, I,
               matched, match_ig, ious_out)

    d_area = data.det_area[dorder]
    out_area = (d_area[None, :] < lo[:, None]) | (d_area[None, :] > hi[:, None])  # [A, N]
    d_ig = match_ig | (~matched & out_area[:, None, :])
    d_class = dkey_s // I
    d_score = data.det_score[dorder]
    # accumulation order: class, -score, image, rank (a stable sort of the (class, image, rank) order)
    a1 = torch.sort(-d_score, stable=True).indices
    a2 = torch.sort(d_class[a1], stable=True).indices
    return Matches(matched & ~d_ig, ~matched & ~d_ig, d_class, d_score, drank, a1[a2], npig, ious_out)


def _match(data: Dataset, groups, dcount, gcount, dorder, gorder, g_ignore, iou_thresholds, classes, I,
           matched, match_ig, ious_out) -> None:
    """COCO's greedy matching of every (class, image) group, written into ``matched`` / ``match_ig`` [A, T, N].

    The groups are sorted by descending detection count, so the detections of rank ``r`` belong to a
    prefix of them, and their pairs with the ground truths are a prefix ``q < qn[r]`` of the groups'
    ground truths laid out flat (group order, input order inside a group). A step matches every rank-``r``
    detection at once: the chosen ground truth is the maximum of one int64 key per eligible pair,
    ``not ignored << top | IoU rank << jbits | local index`` (the IoU's dense rank keeps its order and
    ties exactly; the local index makes the last of equal IoUs win, as pycocotools).
    """
    dev = dcount.device
    A, T = g_ignore.shape[0], iou_thresholds.shape[0]
    gd = dcount[groups]
    perm = torch.sort(gd, descending=True, stable=True).indices
    groups, gd = groups[perm], gd[perm]
    gg = gcount[groups]
    P, D, G = groups.shape[0], int(gd[0]), int(gg.max())
    dstart = (torch.cumsum(dcount, 0) - dcount)[groups]  # first sorted-detection position of each group
    gstart = (torch.cumsum(gcount, 0) - gcount)[groups]
    gq = torch.repeat_interleave(torch.arange(P, device=dev), gg)  # flat ground truth -> group
    gfirst = torch.cumsum(gg, 0) - gg
    Q = gq.shape[0]
    lj = torch.arange(Q, device=dev) - gfirst[gq]  # local index inside the group
    gi_q = gorder[gstart[gq] + lj]
    crowd_q = data.gt_crowd[gi_q]
    nig_q = (~g_ignore[:, gi_q]).to(torch.int64)  # [A, Q]
    active = P - torch.searchsorted(gd.flip(0), torch.arange(D, device=dev), side="right")  # groups with gd > r
    qn = torch.cumsum(gg, 0)[active - 1]  # pairs of rank r
    offs = torch.cumsum(qn, 0) - qn
    pair_r = torch.repeat_interleave(torch.arange(D, device=dev), qn)
    pair_q = torch.arange(pair_r.shape[0], device=dev) - offs[pair_r]
    iou = data.pair_iou(dorder[dstart[gq[pair_q]] + pair_r], gi_q[pair_q], crowd_q[pair_q])  # [pairs]
    if ious_out is not None:
        full = torch.zeros((P, D, G), dtype=iou.dtype, device=dev)
        full[gq[pair_q], pair_r, lj[pair_q]] = iou
        for p, (k, img) in enumerate(torch.stack([groups // I, groups % I], 1).tolist()):
            cls = int(classes[k]) if classes is not None else k
            ious_out[(img, cls)] = full[p, : int(gd[p]), : int(gg[p])].float()
    rank = torch.unique(iou, return_inverse=True)[1]
    jbits = G.bit_length()
    top = jbits + int(rank.max()).bit_length()
    base = (rank << jbits) | lj[pair_q]
    thr = torch.clamp(iou_thresholds, max=1 - 1e-10)[:, None]  # [T, 1]
    gtm = torch.zeros((A, T, Q + 1), dtype=torch.bool, device=dev)  # matched ground truths (+ a spare column)
    for r, (n, s0, m) in enumerate(zip(active.tolist(), offs.tolist(), qn.tolist())):
        elig = (iou[s0:s0 + m] >= thr) & (~gtm[:, :, :m] | crowd_q[:m])  # [A, T, m]
        key = torch.where(elig, base[s0:s0 + m] | (nig_q[:, None, :m] << top), -1)
        best = torch.full((A, T, n), -1, dtype=torch.int64, device=dev)
        best.scatter_reduce_(2, gq[:m].expand(A, T, m), key, "amax")
        hit = best >= 0
        pos = dstart[:n] + r
        matched[:, :, pos] = hit
        match_ig[:, :, pos] = hit & ((best >> top) == 0)
        gtm.scatter_(2, torch.where(hit, gfirst[:n] + (best & ((1 << jbits) - 1)), Q), True)


def _accumulate(tps, fps, cls, score, npig, K, rec_thr, precision, recall, scores):
    """Fills ``precision``/``scores`` [T, R, K, A] and ``recall`` [T, K, A] (views) from flags [A, T, N].

    Segments are (area, threshold, class) runs of the score-ranked detections. pycocotools' precision at
    position ``i`` is ``tp_i / (fp_i + tp_i + eps)``; it only rises at a true positive, so the envelope
    ``max_{j >= i}`` and its read-out at the first position whose ``tp`` reaches the recall threshold's
    count ``need`` (the ``need``-th true positive) need the true positives alone: the ``c``-th one's
    precision goes to the bucket of the last threshold with ``need <= c``, and a suffix maximum over
    the ``R`` buckets gives every threshold's value (exact: maxima of the same float64 numbers).
    """
    A, T, N = tps.shape
    dev = tps.device
    f64 = torch.float64
    S = A * T * K
    rec_sorted, rec_order = torch.sort(rec_thr, stable=True)
    R = rec_thr.shape[0]
    ccount, cstart = _segments(cls, K)
    seg_class = torch.arange(S, device=dev) % K
    npig_seg = npig[:, None, :].expand(A, T, K).reshape(-1)  # [S]
    npig_f = npig_seg.clamp(min=1).to(f64)  # segments without ground truth are -1 below
    # left searchsorted of the recall thresholds in rc = tp / npig, on integers: the least count `need`
    # with need / npig >= threshold (in float64, as numpy); nondecreasing along R
    need = _least_count(rec_sorted[None, :], npig_f[:, None])  # [S, R]
    row, n = torch.nonzero(tps.reshape(A * T, N)).unbind(1)  # true positives, in (a, t, rank) order
    seg = row * K + cls[n]  # nondecreasing
    n_tp, first = _segments(seg, S)
    c = torch.arange(seg.shape[0], device=dev) - first[seg] + 1  # the c-th true positive of its segment
    fpc = torch.cumsum(fps.reshape(A * T, N), 1, dtype=torch.int32)
    cs = cstart[cls[n]]
    fp = fpc[row, n] - fpc[row, cs] + fps.reshape(A * T, N)[row, cs].to(torch.int32)  # false positives so far
    tp_f = c.to(f64)
    pr = tp_f / (fp.to(f64) + tp_f + EPS)
    if seg.numel():
        ss = score[n][(first[:, None] + need - 1).clamp(min=0, max=seg.numel() - 1)]
    else:
        ss = torch.zeros((S, R), dtype=f64, device=dev)
    first_score = score[cstart[seg_class].clamp(max=max(N - 1, 0))] if N else torch.zeros(S, dtype=f64, device=dev)
    read_out(need, envelope(bucket_max(need, seg, c, pr)), ss, n_tp, ccount[seg_class] > 0, first_score, npig_seg,
             rec_order, precision, recall, scores)


def read_out(need, q, ss, n_tp, nonempty, first_score, npig_seg, rec_order, precision, recall, scores) -> None:
    """Writes ``precision``/``scores`` [T, R, K, A] and ``recall`` [T, K, A] from the per-segment ``[S, R]``
    envelope ``q`` and the score of the ``need``-th true positive ``ss`` (read where ``need <= n_tp``), the
    true positive counts ``n_tp`` [S], whether the segment's class has detections and its first score; ``-1``
    where the segment has no non-ignored ground truth; the recall thresholds back in their given order."""
    A, T, K, R = precision.shape[3], precision.shape[0], precision.shape[2], precision.shape[1]
    dev = q.device
    ss = torch.where(need == 0, torch.where(nonempty, first_score, 0.0)[:, None],
                     torch.where(need <= n_tp[:, None], ss, 0.0))
    last = torch.where(nonempty, n_tp.to(torch.float64) / npig_seg.clamp(min=1).to(torch.float64), 0.0)
    defined = npig_seg > 0
    q = torch.where(defined[:, None], q, -1.0)
    ss = torch.where(defined[:, None], ss, -1.0)
    last = torch.where(defined, last, -1.0)
    unsort = torch.empty_like(rec_order)
    unsort[rec_order] = torch.arange(R, device=dev)
    # [A, T, K, R] -> precision [T, R, K, A]
    precision.copy_(q[:, unsort].reshape(A, T, K, R).permute(1, 3, 2, 0))
    scores.copy_(ss[:, unsort].reshape(A, T, K, R).permute(1, 3, 2, 0))
    recall.copy_(last.reshape(A, T, K).permute(1, 2, 0))


def bucket_max(need: torch.Tensor, seg: torch.Tensor, c: torch.Tensor, pr: torch.Tensor) -> torch.Tensor:
    """float64 ``[S, R]``: per segment and recall threshold, the largest precision ``pr`` of the true positives
    (the ``c``-th of segment ``seg``) whose bucket is that threshold, the last one with ``need <= c`` (0 where
    none); `envelope` turns it into the interpolated precision."""
    S, R = need.shape
    width = int(need.max()) + 2 if need.numel() else 2
    bounds = (torch.arange(S, device=need.device)[:, None] * width + need).reshape(-1)
    bucket = torch.searchsorted(bounds, seg * width + c.clamp(max=width - 1), side="right") - 1
    bucket = torch.where(bucket >= seg * R, bucket, S * R)  # c below every need: no threshold reads it
    bmax = torch.zeros(S * R + 1, dtype=torch.float64, device=need.device).scatter_reduce_(0, bucket, pr, "amax")
    return bmax[:-1].reshape(S, R)


def envelope(bmax: torch.Tensor) -> torch.Tensor:
    """The suffix maximum along the recall thresholds (pycocotools' precision made monotone from the right)."""
    return bmax.flip(1).cummax(1).values.flip(1)


def _least_count(thr: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """The least integer ``c >= 0`` with ``c / n >= thr`` in float64 (numpy's comparison of ``tp / npig``)."""
    c = torch.ceil(thr * n).clamp(min=0)
    for _ in range(2):
        c = torch.where((c >= 1) & ((c - 1) / n >= thr), c - 1, c)
    for _ in range(2):
        c = torch.where(c / n >= thr, c, c + 1)
    return c.to(torch.int64)


def summarize(ev: Evaluation, iou_thresholds: torch.Tensor, max_dets: tuple) -> list:
    """pycocotools' ``summarize()`` stats (12 values): mean over entries > -1, else -1."""

    def mean(s):
        v = s[s > -1]
        return v.mean() if v.numel() else torch.tensor(-1.0, dtype=torch.float64, device=s.device)

    def ap(area=0, thr=None, m=-1):
        s = ev.precision
        if thr is not None:
            s = s[iou_thresholds == thr]
        return mean(s[:, :, :, area, m])

    def ar(area=0, m=-1):
        return mean(ev.recall[:, :, area, m])

    # pycocotools' stats[0] reads maxDets=100 literally: -1 when 100 is not a threshold
    first = ap(m=max_dets.index(100)) if 100 in max_dets else torch.tensor(-1.0, dtype=torch.float64,
                                                                          device=ev.precision.device)
    return [first, ap(thr=0.5), ap(thr=0.75), ap(1), ap(2), ap(3), ar(m=0), ar(m=1), ar(m=2), ar(1), ar(2), ar(3)]
