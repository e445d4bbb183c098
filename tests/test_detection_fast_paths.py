"""mean_average_precision's vectorised matching and accumulation on the cases they treat specially,
against pycocotools' COCOeval arrays bit for bit: IoU ties (the last ground truth of equal IoU wins),
crowd regions, many detections per (image, class) group, recall thresholds in any order and not
reaching 1, and masks of every awkward size (widths not a multiple of 8 or 64, empty and full masks)."""
import numpy as np
import pytest
import torch

from fmetrics.detection import mean_average_precision
from tests.cases.detection import coco_reference, make_coco

pytest.importorskip("pycocotools", reason="the oracle is pycocotools' COCOeval")


def _arrays_equal(out, ref):
    np.testing.assert_array_equal(out["precision"].numpy(), ref[1])
    np.testing.assert_array_equal(out["recall"].numpy(), ref[2])
    np.testing.assert_array_equal(out["scores"].numpy(), ref[3])


def _tied(seed: int, n_images: int = 12):
    """Duplicated ground truths and detections: equal IoUs everywhere, some crowd, many per group."""
    g = torch.Generator().manual_seed(seed)
    preds, target = [], []
    for _ in range(n_images):
        base = torch.rand(4, 2, generator=g) * 100
        wh = torch.randint(10, 60, (4, 2), generator=g).float()
        gt = torch.cat([base, base + wh], 1).repeat(3, 1)  # every box three times
        labels = torch.randint(0, 2, (4,), generator=g).repeat(3)
        crowd = (torch.rand(12, generator=g) < 0.15).long()
        det = (gt[torch.randint(0, 12, (30,), generator=g)]
               + torch.randint(-3, 4, (30, 4), generator=g).float()).clamp(min=0)
        det = torch.cat([det[:, :2], torch.maximum(det[:, 2:], det[:, :2])], 1)
        preds.append({"boxes": det, "scores": torch.randint(0, 5, (30,), generator=g).float() / 5,
                      "labels": torch.randint(0, 2, (30,), generator=g)})
        target.append({"boxes": gt, "labels": labels, "iscrowd": crowd})
    return preds, target


@pytest.mark.parametrize("seed", range(3))
def test_iou_ties_crowd_and_long_groups(seed):
    preds, target = _tied(seed)
    ref = coco_reference(preds, target, "bbox", "xyxy", max_dets=(1, 10, 25))
    out = mean_average_precision(extended_summary=True, max_detection_thresholds=[1, 10, 25])(preds, target)
    _arrays_equal(out, ref)


def test_recall_thresholds_in_any_order():
    preds, target = make_coco(7, n_images=30, n_classes=3, box_format="xyxy", many=40)
    thr = [0.0, 0.05, 0.3, 0.3, 0.55, 0.6]  # ends below 1; a repeated threshold
    ref = coco_reference(preds, target, "bbox", "xyxy", rec_thresholds=thr)
    perm = [4, 0, 5, 2, 1, 3]
    out = mean_average_precision(rec_thresholds=[thr[i] for i in perm], extended_summary=True)(preds, target)
    np.testing.assert_array_equal(out["precision"].numpy(), ref[1][:, perm])
    np.testing.assert_array_equal(out["scores"].numpy(), ref[3][:, perm])
    np.testing.assert_array_equal(out["recall"].numpy(), ref[2])


@pytest.mark.parametrize("hw", [(1, 1), (7, 9), (13, 64), (33, 65), (20, 131)])
def test_mask_sizes(hw):
    h, w = hw
    g = torch.Generator().manual_seed(h * 1000 + w)
    preds, target = [], []
    for i in range(6):
        m, n = int(torch.randint(1, 5, (1,), generator=g)), int(torch.randint(1, 7, (1,), generator=g))
        gt = torch.rand(m, h, w, generator=g) < torch.rand(m, 1, 1, generator=g)
        gt[0] = i % 2 == 0  # a full mask, or an empty one
        src = torch.randint(0, m, (n,), generator=g)
        det = gt[src] ^ (torch.rand(n, h, w, generator=g) < 0.1)
        if n > 1:
            det[1] = False
        labels = torch.randint(0, 2, (m,), generator=g)
        preds.append({"masks": det, "scores": torch.rand(n, generator=g), "labels": labels[src]})
        target.append({"masks": gt, "labels": labels})
    ref = coco_reference(preds, target, "segm")
    out = mean_average_precision(iou_type="segm", extended_summary=True)(preds, target)
    _arrays_equal(out, ref)


@pytest.mark.parametrize("words", [0, 1, 126, 127, 128, 255, 300, 1000])
def test_pixel_counts(words):
    from fmetrics.detection._masks import pixel_counts

    g = torch.Generator().manual_seed(words)
    x = torch.rand(6, words * 8, generator=g) < torch.rand(6, 1, generator=g)
    x[0], x[1] = True, False  # every byte set (the most a block can carry), none
    w = x.view(torch.uint8).view(torch.int64) if words else torch.zeros((6, 0), dtype=torch.int64)
    assert torch.equal(pixel_counts(w), x.sum(1))
