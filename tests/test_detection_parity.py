"""mean_average_precision vs pycocotools / faster-coco-eval COCOeval on randomized COCO-like sets."""
import numpy as np
import pytest
import torch

from fmetrics.detection import mean_average_precision
from tests.cases.detection import STAT_KEYS, coco_reference, make_coco


def _run(seed, backend, average="macro", n_images=25, slow=False):
    fmt = ("xyxy", "xywh", "cxcywh")[seed % 3]
    segm = seed % 4 == 3
    preds, target = make_coco(seed, n_images=n_images, n_classes=1 + (seed * 7) % 80 if slow else 1 + seed % 9,
                              box_format=fmt, many=130 if seed % 2 else 0, masks=segm, size=32)
    it = "segm" if segm else "bbox"
    stats, prec, rec, sc = coco_reference(preds, target, it, fmt, backend=backend, average=average)
    out = mean_average_precision(box_format=fmt, iou_type=it, average=average, extended_summary=True)(preds, target)
    mine = np.array([out[k].item() for k in STAT_KEYS])
    np.testing.assert_allclose(mine, stats, rtol=0, atol=1e-12)
    if backend == "pycocotools":  # the arrays bit for bit
        np.testing.assert_array_equal(out["precision"].numpy(), prec)
        np.testing.assert_array_equal(out["recall"].numpy(), rec)
        np.testing.assert_array_equal(out["scores"].numpy(), sc)
    else:  # faster-coco-eval's precision differs from pycocotools' by an ulp in places
        np.testing.assert_allclose(out["precision"].numpy(), prec, rtol=0, atol=1e-15)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("average", ["macro", "micro"])
def test_parity_pycocotools(seed, average):
    pytest.importorskip("pycocotools", reason="the oracle is pycocotools' COCOeval")
    _run(seed, "pycocotools", average)


@pytest.mark.parametrize("seed", range(4))
def test_parity_faster_coco_eval(seed):
    pytest.importorskip("pycocotools", reason="RLE encoding of the reference masks")
    pytest.importorskip("faster_coco_eval", reason="the oracle is faster-coco-eval's COCOeval_faster")
    _run(seed, "faster")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 24))
def test_parity_pycocotools_many(seed):
    pytest.importorskip("pycocotools", reason="the oracle is pycocotools' COCOeval")
    _run(seed, "pycocotools", n_images=60, slow=True)


def test_per_class_and_thresholds():
    pytest.importorskip("pycocotools", reason="the oracle is pycocotools' COCOeval")
    preds, target = make_coco(5, n_images=20, n_classes=4, box_format="xyxy", many=40)
    kw = dict(iou_thresholds=[0.3, 0.5, 0.77], rec_thresholds=[0.0, 0.25, 0.5, 0.75, 1.0], max_dets=(2, 5, 100))
    out = mean_average_precision(iou_thresholds=kw["iou_thresholds"], rec_thresholds=kw["rec_thresholds"],
                                 max_detection_thresholds=[100, 2, 5], class_metrics=True)(preds, target)
    stats = coco_reference(preds, target, "bbox", "xyxy", **kw)[0]
    assert out["map_75"].item() == -1 and stats[2] == -1
    np.testing.assert_allclose([out[k].item() for k in ("map", "map_50", "mar_2", "mar_5", "mar_100")],
                               stats[[0, 1, 6, 7, 8]], rtol=0, atol=1e-12)
    classes = out["classes"].tolist()
    for i, c in enumerate(classes):
        s = coco_reference(preds, target, "bbox", "xyxy", cat_ids=[c], **kw)[0]
        assert abs(out["map_per_class"][i].item() - s[0]) <= 1e-12
        assert abs(out["mar_100_per_class"][i].item() - s[8]) <= 1e-12


def test_empty_inputs():
    m = mean_average_precision()
    out = m.finalize(m.init())
    assert out["map"].item() == -1 and out["classes"].numel() == 0
    preds = [dict(boxes=torch.zeros(0, 4), scores=torch.zeros(0), labels=torch.zeros(0, dtype=torch.long))]
    target = [dict(boxes=torch.tensor([[0.0, 0.0, 10.0, 10.0]]), labels=torch.tensor([1]))]
    out = m(preds, target)
    assert out["map"].item() == 0 and out["mar_100"].item() == 0


def test_bad_inputs():
    m = mean_average_precision()
    with pytest.raises(ValueError, match="mean_average_precision"):
        m.update(m.init(), [dict(boxes=torch.zeros(1, 4), labels=torch.tensor([0]))], [])
    with pytest.raises(ValueError, match="box_format"):
        mean_average_precision(box_format="xy")
