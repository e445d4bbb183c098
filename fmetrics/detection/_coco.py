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
and IoU threshold; the accumulation is one segmented pass over all
(area, threshold, category) segments.
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
    # (det index [P, D], gt index [P, G], crowd [P, G]) -> IoU [P, D, G] float64 (pairs share an image)
    pair_iou: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class Evaluation(NamedTuple):
    precision: torch.Tensor  # [T, R, K, A, M] float64, -1 where undefined
    recall: torch.Tensor  # [T, K, A, M]
    scores: torch.Tensor  # [T, R, K, A, M]
    ious: Optional[dict]  # {(image, class): [n_det, n_gt]} when asked


def box_iou_pairs(det_boxes: torch.Tensor, gt_boxes: torch.Tensor):
    """pycocotools' ``bbIou`` on xywh float64 boxes, as a `Dataset.pair_iou`."""

    def pair_iou(di, gi, crowd):
        d = det_boxes[di]  # [P, D, 4]
        g = gt_boxes[gi]  # [P, G, 4]
        dx, dy, dw, dh = (d[..., i, None] for i in range(4))  # [P, D, 1]
        gx, gy, gw, gh = (g[:, None, :, i] for i in range(4))  # [P, 1, G]
        da = dw * dh
        ga = gw * gh
        w = torch.minimum(dw + dx, gw + gx) - torch.maximum(dx, gx)
        h = torch.minimum(dh + dy, gh + gy) - torch.maximum(dy, gy)
        inter = w * h
        union = torch.where(crowd[:, None, :], da, da + ga - inter)
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


def evaluate(data: Dataset, iou_thresholds: torch.Tensor, rec_thresholds: torch.Tensor, max_dets: tuple,
             num_classes: int, extended_ious: bool = False, classes: Optional[torch.Tensor] = None) -> Evaluation:
    """pycocotools' evaluate + accumulate over ``num_classes`` categories (labels ``0..K-1``).

    ``iou_thresholds``/``rec_thresholds`` are float64 tensors; ``max_dets`` is sorted ascending.
    """
    dev = data.det_score.device
    f64 = torch.float64
    T, R, K, A, M = iou_thresholds.shape[0], rec_thresholds.shape[0], num_classes, len(AREA_RANGES), len(max_dets)
    I = data.num_images
    max_det = int(max_dets[-1])
    precision = -torch.ones((T, R, K, A, M), dtype=f64, device=dev)
    recall = -torch.ones((T, K, A, M), dtype=f64, device=dev)
    scores = -torch.ones((T, R, K, A, M), dtype=f64, device=dev)
    if K == 0:
        return Evaluation(precision, recall, scores, {} if extended_ious else None)
    lo = torch.tensor([a[0] for a in AREA_RANGES], dtype=f64, device=dev)
    hi = torch.tensor([a[1] for a in AREA_RANGES], dtype=f64, device=dev)

    # ---- ground truths: group key (class, image), kept in input order inside a group
    G_all = data.gt_img.shape[0]
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
        gd = dcount[groups]
        # groups by descending detection count: at rank r only a prefix is still active
        perm = torch.sort(gd, descending=True, stable=True).indices
        groups, gd = groups[perm], gd[perm]
        gg = gcount[groups]
        P = groups.shape[0]
        D, G = int(gd[0]), int(gg.max())
        dstart = torch.cumsum(dcount, 0) - dcount
        gstart = torch.cumsum(gcount, 0) - gcount
        ar_d = torch.arange(D, device=dev)
        ar_g = torch.arange(G, device=dev)
        d_valid = ar_d[None, :] < gd[:, None]  # [P, D]
        g_valid = ar_g[None, :] < gg[:, None]
        dpos = (dstart[groups][:, None] + ar_d[None, :]).clamp(max=max(N - 1, 0))  # position in sorted dets
        dpos = torch.where(d_valid, dpos, torch.zeros_like(dpos))
        gpos = (gstart[groups][:, None] + ar_g[None, :]).clamp(max=max(G_all - 1, 0))
        gpos = torch.where(g_valid, gpos, torch.zeros_like(gpos))
        di = dorder[dpos]  # det index [P, D]
        gi = gorder[gpos]  # gt index [P, G]
        crowd = data.gt_crowd[gi] & g_valid
        iou = data.pair_iou(di, gi, crowd)  # [P, D, G]
        if extended_ious:
            gl = torch.stack([groups // I, groups % I], 1).tolist()
            for p, (k, img) in enumerate(gl):
                cls = int(classes[k]) if classes is not None else k
                ious_out[(img, cls)] = iou[p, : int(gd[p]), : int(gg[p])].float()
        ig = g_ignore.T[gi].permute(0, 2, 1)  # [P, A, G]
        ig = ig & g_valid[:, None, :]
        thr = torch.clamp(iou_thresholds, max=1 - 1e-10)[None, None, :, None]  # [1, 1, T, 1]
        gtm = torch.zeros((P, A, T, G), dtype=torch.bool, device=dev)
        m_out = torch.zeros((P, A, T, D), dtype=torch.bool, device=dev)
        ig_out = torch.zeros((P, A, T, D), dtype=torch.bool, device=dev)
        ar1 = (ar_g + 1)[None, None, None, :]
        active = (P - torch.searchsorted(gd.flip(0), ar_d, side="right")).tolist()  # groups with gd > r
        neg_inf = torch.tensor(-float("inf"), dtype=f64, device=dev)
        for r in range(D):
            n = active[r]
            io = iou[:n, r, None, None, :]  # [n, 1, 1, G]
            cr = crowd[:n, None, None, :]
            elig = g_valid[:n, None, None, :] & (io >= thr) & (~gtm[:n] | cr)
            igr = ig[:n, :, None, :]
            t1 = elig & ~igr
            choose = torch.where(t1.any(-1, keepdim=True), t1, elig)
            vals = torch.where(choose, io, neg_inf)
            best = vals.amax(-1, keepdim=True)
            pick = choose & (vals == best)
            idx = (pick * ar1).amax(-1) - 1  # last index among the best: [n, A, T]
            hit = idx >= 0
            idx0 = idx.clamp(min=0)
            m_out[:n, :, :, r] = hit
            ig_out[:n, :, :, r] = torch.gather(igr.expand(-1, -1, T, -1), 3, idx0[..., None])[..., 0] & hit
            gtm[:n] |= torch.nn.functional.one_hot(idx0, G).bool() & hit[..., None]
        # back to sorted detection positions
        flat_pos = dpos[d_valid]  # [sum gd]
        matched[:, :, flat_pos] = m_out.permute(1, 2, 0, 3)[:, :, d_valid]
        match_ig[:, :, flat_pos] = ig_out.permute(1, 2, 0, 3)[:, :, d_valid]

    d_area = data.det_area[dorder]
    out_area = (d_area[None, :] < lo[:, None]) | (d_area[None, :] > hi[:, None])  # [A, N]
    d_ig = match_ig | (~matched & out_area[:, None, :])
    tps = matched & ~d_ig
    fps = ~matched & ~d_ig
    d_class = dkey_s // I
    d_img = dkey_s % I
    d_score = data.det_score[dorder]
    # accumulation order: class, -score, image, rank (a stable sort of the (class, image, rank) order)
    a1 = torch.sort(-d_score, stable=True).indices
    a2 = torch.sort(d_class[a1], stable=True).indices
    acc = a1[a2]
    done = {}
    for mi, md in enumerate(max_dets):
        sel = acc[drank[acc] < int(md)]
        if sel.shape[0] in done:  # the same detections as a larger cut: the same numbers
            j = done[sel.shape[0]]
            precision[..., mi], recall[..., mi], scores[..., mi] = precision[..., j], recall[..., j], scores[..., j]
            continue
        done[sel.shape[0]] = mi
        _accumulate(tps[:, :, sel], fps[:, :, sel], d_class[sel], d_score[sel], npig, K, rec_thresholds,
                    precision[:, :, :, :, mi], recall[:, :, :, mi], scores[:, :, :, :, mi])
    return Evaluation(precision, recall, scores, ious_out)


def _accumulate(tps, fps, cls, score, npig, K, rec_thr, precision, recall, scores):
    """Fills ``precision``/``scores`` [T, R, K, A] and ``recall`` [T, K, A] (views) from flags [A, T, N]."""
    A, T, N = tps.shape
    R = rec_thr.shape[0]
    dev = tps.device
    f64 = torch.float64
    S = A * T * K
    seg = ((torch.arange(A, device=dev)[:, None, None] * T + torch.arange(T, device=dev)[None, :, None]) * K
           + cls[None, None, :]).reshape(-1)  # nondecreasing
    counts, starts = _segments(seg, S)
    tp_c = torch.cumsum(tps.reshape(-1).to(torch.int64), 0)
    fp_c = torch.cumsum(fps.reshape(-1).to(torch.int64), 0)
    base = starts[seg]
    tp_prev = torch.where(base > 0, tp_c[(base - 1).clamp(min=0)], torch.zeros_like(base))
    fp_prev = torch.where(base > 0, fp_c[(base - 1).clamp(min=0)], torch.zeros_like(base))
    tp = (tp_c - tp_prev).to(f64)
    fp = (fp_c - fp_prev).to(f64)
    npig_seg = npig[:, None, :].expand(A, T, K).reshape(-1)  # [S]
    npig_f = npig_seg.clamp(min=1).to(f64)  # segments without ground truth are -1 below
    pr = tp / (fp + tp + EPS)
    if seg.numel():
        env = _segmented_suffix_max(pr, seg, int(counts.max()))
        # left searchsorted of the recall thresholds in rc = tp / npig, on integers: the first position
        # whose tp reaches `need`, the least integer with need / npig >= threshold (in float64, as numpy)
        need = _least_count(rec_thr[None, :], npig_f[:, None])  # [S, R]
        tp_i = tp.to(torch.int64)
        width = int(tp_i.max()) + 2
        key = seg * width + tp_i
        q_key = torch.arange(S, device=dev)[:, None] * width + need.clamp(max=width - 1)
        pos = torch.searchsorted(key, q_key.reshape(-1), side="left").reshape(S, R)
        inside = (pos < (starts + counts)[:, None]) & (need < width - 1)
        posc = pos.clamp(max=seg.numel() - 1)
        s_score = score[None, None, :].expand(A, T, N).reshape(-1)
        q = torch.where(inside, env[posc], torch.zeros((), dtype=f64, device=dev))
        ss = torch.where(inside, s_score[posc], torch.zeros((), dtype=f64, device=dev))
        last_tp = tp[(starts + counts - 1).clamp(min=0)]
        last = torch.where(counts > 0, last_tp / npig_f, torch.zeros((), dtype=f64, device=dev))
    else:
        q = torch.zeros((S, R), dtype=f64, device=dev)
        ss = torch.zeros((S, R), dtype=f64, device=dev)
        last = torch.zeros(S, dtype=f64, device=dev)
    defined = (npig_seg > 0)
    q = torch.where(defined[:, None], q, -torch.ones((), dtype=f64, device=dev))
    ss = torch.where(defined[:, None], ss, -torch.ones((), dtype=f64, device=dev))
    last = torch.where(defined, last, -torch.ones((), dtype=f64, device=dev))
    # [A, T, K, R] -> precision [T, R, K, A]
    precision.copy_(q.reshape(A, T, K, R).permute(1, 3, 2, 0))
    scores.copy_(ss.reshape(A, T, K, R).permute(1, 3, 2, 0))
    recall.copy_(last.reshape(A, T, K).permute(1, 2, 0))


def _segmented_suffix_max(x: torch.Tensor, seg: torch.Tensor, longest: int) -> torch.Tensor:
    """``out[i] = max(x[i:end of i's segment])`` by doubling (log2(longest) elementwise passes, exact)."""
    out = x.clone()
    k = 1
    while k < longest:
        same = seg[:-k] == seg[k:]
        out[:-k] = torch.where(same, torch.maximum(out[:-k], out[k:]), out[:-k])
        k *= 2
    return out


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
