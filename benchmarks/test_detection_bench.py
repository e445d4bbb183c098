"""COCO bbox / segm mAP: fmetrics vs pycocotools vs faster-coco-eval on one set; every timed result is checked
against pycocotools' summary numbers (1e-12)."""
import pytest

from benchmarks._checks import assert_agrees, workload_tolerance
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


BBOX, SEGM = workload_tolerance("detection/map_bbox_500"), workload_tolerance("detection/map_segm_100")


def test_map_bbox_fmetrics(benchmark, bbox):
    benchmark.group = "detection-map-bbox"
    preds, target, _, _, want = bbox
    assert_agrees(benchmark(fmetrics_map(preds, target)), want, BBOX)


def test_map_bbox_pycocotools(benchmark, bbox):
    benchmark.group = "detection-map-bbox"
    _, _, gt_d, dt_d, want = bbox
    assert_agrees(benchmark(cocoeval_run(gt_d, dt_d, "bbox", "pycocotools")), want, BBOX)


def test_map_bbox_faster_coco_eval(benchmark, bbox):
    pytest.importorskip("faster_coco_eval")
    benchmark.group = "detection-map-bbox"
    _, _, gt_d, dt_d, want = bbox
    assert_agrees(benchmark(cocoeval_run(gt_d, dt_d, "bbox", "faster")), want, BBOX)


def test_map_segm_fmetrics(benchmark, segm):
    benchmark.group = "detection-map-segm"
    preds, target, _, _, want = segm
    assert_agrees(benchmark(fmetrics_map(preds, target, "segm")), want, SEGM)


def test_map_segm_faster_coco_eval(benchmark, segm):
    pytest.importorskip("faster_coco_eval")
    benchmark.group = "detection-map-segm"
    _, _, gt_d, dt_d, want = segm
    assert_agrees(benchmark(cocoeval_run(gt_d, dt_d, "segm", "faster")), want, SEGM)
