"""COCO bbox / segm mAP: fmetrics vs pycocotools vs faster-coco-eval on one set; every timed result is checked
against pycocotools' summary numbers (1e-12)."""
import numpy as np
import pytest

from benchmarks.detection import coco_dicts, coco_set, cocoeval_run, fmetrics_map

pytest.importorskip("pycocotools", reason="the reference is pycocotools' COCOeval")

N_IMAGES = 100


@pytest.fixture(scope="module")
def bbox():
    preds, target = coco_set(N_IMAGES)
    gt_d, dt_d = coco_dicts(preds, target)
    return preds, target, gt_d, dt_d, cocoeval_run(gt_d, dt_d, "bbox", "pycocotools")().numpy()


@pytest.fixture(scope="module")
def segm():
    preds, target = coco_set(20, n_boxes=10, mask_size=64)
    gt_d, dt_d = coco_dicts(preds, target, "segm")
    return preds, target, gt_d, dt_d, cocoeval_run(gt_d, dt_d, "segm", "pycocotools")().numpy()


def _check(value, want):
    np.testing.assert_allclose(np.asarray(value), want, rtol=0, atol=1e-12)


def test_map_bbox_fmetrics(benchmark, bbox):
    benchmark.group = "detection-map-bbox"
    preds, target, _, _, want = bbox
    _check(benchmark(fmetrics_map(preds, target)), want)


def test_map_bbox_pycocotools(benchmark, bbox):
    benchmark.group = "detection-map-bbox"
    _, _, gt_d, dt_d, want = bbox
    _check(benchmark(cocoeval_run(gt_d, dt_d, "bbox", "pycocotools")), want)


def test_map_bbox_faster_coco_eval(benchmark, bbox):
    pytest.importorskip("faster_coco_eval")
    benchmark.group = "detection-map-bbox"
    _, _, gt_d, dt_d, want = bbox
    _check(benchmark(cocoeval_run(gt_d, dt_d, "bbox", "faster")), want)


def test_map_segm_fmetrics(benchmark, segm):
    benchmark.group = "detection-map-segm"
    preds, target, _, _, want = segm
    _check(benchmark(fmetrics_map(preds, target, "segm")), want)


def test_map_segm_faster_coco_eval(benchmark, segm):
    pytest.importorskip("faster_coco_eval")
    benchmark.group = "detection-map-segm"
    _, _, gt_d, dt_d, want = segm
    _check(benchmark(cocoeval_run(gt_d, dt_d, "segm", "faster")), want)
