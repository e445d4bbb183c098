"""Bad input to the detection metrics (issue 28): a clear error with the state intact, or a deferred error.

Oracles: pycocotools' COCOeval on the good data (mean_average_precision) and the pair-by-pair reference
from the published definitions (IoU family, tests/cases/detection.py), or hand calculations written here.
"""
import numpy as np
import pytest
import torch

from fmetrics import validation
from fmetrics.detection import (complete_intersection_over_union, distance_intersection_over_union,
                                generalized_intersection_over_union, intersection_over_union,
                                mean_average_precision)
from tests.cases.detection import STAT_KEYS, coco_reference, iou_reference, make_coco

NAN, INF = float("nan"), float("inf")


def _map_values(out) -> np.ndarray:
    return np.array([out[k].item() for k in STAT_KEYS])


def _good(fmt):
    return make_coco(3, n_images=6, n_classes=3, box_format=fmt, crowd=0.0)


def _with_box(data, i, row, box):
    """A copy of ``data`` (a list of per-image dicts) whose image ``i`` has ``box`` as its box ``row``."""
    out = [dict(d) for d in data]
    boxes = out[i]["boxes"].clone()
    boxes[row] = torch.tensor(box)
    out[i]["boxes"] = boxes
    return out


# a bad box per (format, rule): non-finite, or inverted in that format's terms
BAD_BOXES = [
    ("xyxy", [NAN, 1.0, 5.0, 5.0], "finite"),
    ("xywh", [1.0, INF, 5.0, 5.0], "finite"),
    ("cxcywh", [1.0, 1.0, -INF, 5.0], "finite"),
    ("xyxy", [10.0, 1.0, 5.0, 5.0], "x1 <= x2 and y1 <= y2"),
    ("xyxy", [1.0, 10.0, 5.0, 5.0], "x1 <= x2 and y1 <= y2"),
    ("xywh", [1.0, 1.0, -2.0, 5.0], "width and height >= 0"),
    ("cxcywh", [10.0, 10.0, 4.0, -0.5], "width and height >= 0"),
]


@pytest.mark.parametrize("side", ["preds", "target"])
@pytest.mark.parametrize("fmt, box, rule", BAD_BOXES)
def test_map_rejects_bad_boxes_and_keeps_the_state(fmt, box, rule, side):
    """Today NaN / inf / inverted boxes are accepted (a NaN ground-truth box gives 0.5 where pycocotools gives 1)."""
    pytest.importorskip("pycocotools", reason="the oracle is pycocotools' COCOeval")
    preds, target = _good(fmt)
    m = mean_average_precision(box_format=fmt)
    s = m.update(m.init(), preds[:3], target[:3])
    bad_p, bad_t = (_with_box(preds[3:], 1, 0, box), target[3:]) if side == "preds" else \
        (preds[3:], _with_box(target[3:], 1, 0, box))
    with pytest.raises(ValueError, match=rf"mean_average_precision: argument `{side}\[1\]\['boxes'\]` expected "
                                         rf".*{rule}"):
        m.update(s, bad_p, bad_t)
    s = m.update(s, preds[3:], target[3:])  # the caller's state still takes the good batch
    ref = coco_reference(preds, target, "bbox", fmt)[0]
    np.testing.assert_allclose(_map_values(m.finalize(s)), ref, rtol=0, atol=1e-12)


def test_map_nan_ground_truth_box_single_image():
    """The issue's example: one detection equal to its ground truth (pycocotools: mAP 1), then a NaN box."""
    m = mean_average_precision()
    preds = [dict(boxes=torch.tensor([[0.0, 0.0, 10.0, 10.0]]), scores=torch.tensor([0.9]), labels=torch.tensor([0]))]
    target = [dict(boxes=torch.tensor([[0.0, 0.0, 10.0, 10.0], [NAN, 0.0, 5.0, 5.0]]), labels=torch.tensor([0, 0]))]
    with pytest.raises(ValueError, match=r"target\[0\]\['boxes'\]` expected finite boxes .*got nan"):
        m(preds, target)
    target[0]["boxes"], target[0]["labels"] = target[0]["boxes"][:1], target[0]["labels"][:1]
    assert m(preds, target)["map"].item() == pytest.approx(1.0, abs=1e-12)  # a perfect detection: AP = 1


def test_map_rejects_nan_scores_and_nonfinite_areas():
    m = mean_average_precision()
    preds, target = _good("xyxy")
    s = m.update(m.init(), preds[:2], target[:2])
    bad = [dict(p) for p in preds[2:]]
    bad[1]["scores"] = torch.where(torch.arange(bad[1]["scores"].numel()) == 0, NAN, bad[1]["scores"])
    with pytest.raises(ValueError, match=r"argument `preds\[1\]\['scores'\]` expected scores that are not NaN, got nan"):
        m.update(s, bad, target[2:])
    bad = [dict(t) for t in target[2:]]
    bad[0]["area"] = torch.full((bad[0]["labels"].numel(),), INF)  # image 2: 5 ground truths
    with pytest.raises(ValueError, match=r"argument `target\[0\]\['area'\]` expected finite areas .*got inf"):
        m.update(s, preds[2:], bad)
    assert m.finalize(m.update(s, preds[2:], target[2:]))["map"].item() == \
        pytest.approx(coco_reference(preds, target, "bbox", "xyxy")[0][0], abs=1e-12)


@pytest.mark.parametrize("how", ["deferred", "compiled"])
def test_map_deferred_error_names_the_first_offender(how):
    """On accelerators / under compile the update counts bad entries; finalize raises naming the first."""
    m = mean_average_precision(box_format="xywh")
    preds, target = _good("xywh")
    s = m.update(m.init(), preds[:2], target[:2])
    bad_p = _with_box(preds[2:4], 1, 0, [1.0, 1.0, -3.0, 5.0])
    if how == "deferred":
        with validation.mode("deferred"):
            s = m.update(s, bad_p, target[2:4])
    else:
        torch._dynamo.reset()
        try:
            s = torch.compile(m.update, backend="eager", fullgraph=True)(s, bad_p, target[2:4])
        finally:
            torch._dynamo.reset()
    with pytest.raises(ValueError, match=r"mean_average_precision: 1 input entry broke the rule: boxes must not be "
                                         r"inverted .* the first was -3 in update call 2"):
        m.finalize(s)
    with validation.mode("deferred"):  # NaN scores counted too
        bad = [dict(p) for p in preds[4:]]
        bad[0]["scores"] = torch.full_like(bad[0]["scores"], NAN)
        s = m.update(m.init(), bad, target[4:])
    with pytest.raises(ValueError, match="scores must not be NaN; the first was nan in update call 1"):
        m.finalize(s)


def test_map_boxes_as_lists():
    """Today a list of boxes fails with "'list' object has no attribute 'numel'"; it is read as a float64 tensor."""
    pytest.importorskip("pycocotools", reason="the oracle is pycocotools' COCOeval")
    preds, target = _good("xyxy")
    as_lists = lambda data: [{**d, "boxes": d["boxes"].tolist()} for d in data]  # noqa: E731
    out = mean_average_precision()(as_lists(preds), as_lists(target))
    np.testing.assert_allclose(_map_values(out), coco_reference(preds, target, "bbox", "xyxy")[0], rtol=0, atol=1e-6)
    preds[0]["boxes"] = [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 1.0]]  # ragged
    with pytest.raises(ValueError, match=r"mean_average_precision: argument `preds\[0\]\['boxes'\]` expected a float "
                                         r"tensor \[n, 4\] or a list of \[4\] number lists"):
        mean_average_precision()(preds, target)
    preds[0]["boxes"] = [[1.0, 0.0, 0.0, 1.0]] * preds[0]["labels"].numel()  # inverted, as a list
    with pytest.raises(ValueError, match="inverted box"):
        mean_average_precision()(preds, target)


@pytest.mark.parametrize("iou_type", ["bbox", "segm"])
def test_map_state_device_is_checked(iou_type):
    """A fresh state (today only chunk fields, no device) took meta inputs and finalize failed with torch's error."""
    preds, target = make_coco(1, n_images=3, masks=iou_type == "segm", size=8)
    m = mean_average_precision(iou_type=iou_type, box_format="xywh")
    meta = lambda data: [{k: v.to("meta") for k, v in d.items()} for d in data]  # noqa: E731
    with pytest.raises(ValueError, match="mean_average_precision: an input is on meta but the state is on cpu"):
        m.update(m.init(), meta(preds), meta(target))
    s = m.update(m.init(), preds[:2], target[:2])  # segm: no box chunk to read a device from
    with pytest.raises(ValueError, match="mean_average_precision: an input is on meta but the state is on cpu"):
        m.update(s, meta(preds[2:]), meta(target[2:]))
    m.finalize(m.update(s, preds[2:], target[2:]))  # the state is intact


# ---------------------------------------------------------------- the IoU family

IOU_FAMILY = [(intersection_over_union, "iou"), (generalized_intersection_over_union, "giou"),
              (distance_intersection_over_union, "diou"), (complete_intersection_over_union, "ciou")]


def _pair():
    preds = [dict(boxes=torch.tensor([[0.0, 0.0, 2.0, 2.0]]), labels=torch.tensor([1]))]
    target = [dict(boxes=torch.tensor([[1.0, 1.0, 3.0, 3.0]]), labels=torch.tensor([1]))]
    return preds, target


@pytest.mark.parametrize("factory, key", IOU_FAMILY)
@pytest.mark.parametrize("fmt, box, rule", BAD_BOXES)
def test_iou_family_rejects_bad_boxes_and_keeps_the_state(factory, key, fmt, box, rule):
    preds, target = make_coco(4, n_images=4, n_classes=2, box_format=fmt, crowd=0.0, area=False, degenerate=0.0)
    m = factory(box_format=fmt)
    s = m.update(m.init(), preds[:2], target[:2])
    bad = _with_box(target[2:], 0, 0, box) if target[2]["boxes"].shape[0] else _with_box(preds[2:], 0, 0, box)
    args = (preds[2:], bad) if target[2]["boxes"].shape[0] else (bad, target[2:])
    with pytest.raises(ValueError, match=rf"{m.name}: argument `(preds|target)\[0\]\['boxes'\]` expected .*{rule}"):
        m.update(s, *args)
    got = m.finalize(m.update(s, preds[2:], target[2:]))[key]
    want = iou_reference(key, fmt)(preds, target)[key]
    assert got.item() == pytest.approx(want.item(), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("factory, key", IOU_FAMILY)
def test_iou_family_lists_device_and_deferred(factory, key):
    preds, target = _pair()
    m = factory()
    # boxes as lists: [0,0,2,2] vs [1,1,3,3]: IoU = 1 / 7 (intersection 1, union 4 + 4 - 1)
    listed = m([dict(preds[0], boxes=[[0, 0, 2, 2]])], [dict(target[0], boxes=[[1, 1, 3, 3]])])[key]
    assert listed.item() == pytest.approx(m(preds, target)[key].item(), abs=1e-15)
    if key == "iou":
        assert listed.item() == pytest.approx(1 / 7, abs=1e-15)
    with pytest.raises(ValueError, match=rf"{m.name}: argument `target\[0\]\['boxes'\]` expected a float tensor"):
        m(preds, [dict(target[0], boxes=[["a", 1, 3, 3]])])
    with pytest.raises(ValueError, match=rf"{m.name}: argument `preds\[0\]\['boxes'\]` expected shape \[n, 4\]"):
        m([dict(preds[0], boxes=torch.zeros(1, 3))], target)
    meta = [{k: v.to("meta") for k, v in d.items()} for d in preds]
    with pytest.raises(ValueError, match=rf"{m.name}: an input is on meta but the state is on cpu"):
        m.update(m.init(), meta, target)
    s = m.update(m.init(), preds, target)
    with validation.mode("deferred"):
        s = m.update(s, [dict(preds[0], boxes=torch.tensor([[0.0, NAN, 2.0, 2.0]]))], target)
    with pytest.raises(ValueError, match=rf"{m.name}: 1 input entry broke the rule: boxes must be finite .*"
                                         r"the first was nan in update call 2"):
        m.finalize(s)


def test_iou_inverted_box_value_today_is_silently_wrong():
    """Why inverted boxes are errors: [2,2,0,0] has area (0-2)(0-2) = 4 but IoU 0 with itself (not 1)."""
    m = intersection_over_union()
    box = [dict(boxes=torch.tensor([[2.0, 2.0, 0.0, 0.0]]), labels=torch.tensor([0]))]
    with pytest.raises(ValueError, match="inverted box"):
        m(box, box)


# ---------------------------------------------------------------- panoptic quality


@pytest.mark.parametrize("options", [{}, {"return_sq_and_rq": True}, {"modified": True}])
def test_panoptic_empty_input_is_nan_with_a_warning(options):
    """No segment of a known category: PQ = sum IoU / (TP + FP/2 + FN/2) = 0/0 for every category, so NaN;
    docs/conventions.md ("Empty input") adds a UserWarning (today NaN without one)."""
    from fmetrics.detection import modified_panoptic_quality, panoptic_quality

    options = dict(options)
    factory = modified_panoptic_quality if options.pop("modified", False) else panoptic_quality
    m = factory(things={0, 1}, stuffs={6}, **options)
    void = torch.full((1, 4, 4, 2), 9)  # only void pixels (an unknown category)
    for s in (m.init(), m.update(m.init(), torch.zeros(0, 4, 4, 2, dtype=torch.long), torch.zeros(0, 4, 4, 2,
                                                                                                 dtype=torch.long))):
        with pytest.warns(UserWarning, match=rf"{m.name}: no segment of a known category was seen"):
            assert torch.isnan(m.finalize(s)).all()
    m = factory(things={0, 1}, stuffs={6}, allow_unknown_preds_category=True, **options)
    with pytest.warns(UserWarning, match="no segment of a known category"):
        assert torch.isnan(m(void, void)).all()
