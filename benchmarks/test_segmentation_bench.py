"""Segmentation overlap / distance hot paths: fmetrics vs torchmetrics on one batch; each timed result is checked
against torchmetrics' value."""
import pytest
import torch

import fmetrics
from benchmarks.segmentation import class_maps

tms = pytest.importorskip("torchmetrics.segmentation", reason="the peer is torchmetrics")

CASES = [("mean_iou", fmetrics.mean_iou, "MeanIoU", {}),
         ("dice_score", fmetrics.dice_score, "DiceScore", {}),
         ("dice_score_global", fmetrics.dice_score, "DiceScore", {"aggregation_level": "global", "average": "micro"})]


@pytest.mark.parametrize("name,factory,tm_class,kw", CASES, ids=[c[0] for c in CASES])
def test_overlap_fmetrics(benchmark, name, factory, tm_class, kw):
    benchmark.group = f"segmentation-{name}"
    ((p, t),) = class_maps(1, per_batch=2, side=500)
    m = factory(num_classes=10, input_format="index", **kw)
    got = benchmark(lambda: m.finalize(m.update(m.init(), p, t)))
    want = getattr(tms, tm_class)(num_classes=10, input_format="index", **kw)(p, t).double()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,factory,tm_class,kw", CASES, ids=[c[0] for c in CASES])
def test_overlap_torchmetrics(benchmark, name, factory, tm_class, kw):
    benchmark.group = f"segmentation-{name}"
    ((p, t),) = class_maps(1, per_batch=2, side=500)
    got = benchmark(lambda: getattr(tms, tm_class)(num_classes=10, input_format="index", **kw)(p, t))
    want = factory(num_classes=10, input_format="index", **kw)(p, t)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


def test_hausdorff_fmetrics(benchmark):
    benchmark.group = "segmentation-hausdorff"
    ((p, t),) = class_maps(1, per_batch=8, side=64, classes=3, seed=1)
    got = benchmark(fmetrics.hausdorff_distance(num_classes=3, input_format="index"), p, t)
    want = tms.HausdorffDistance(num_classes=3, input_format="index")(p, t).double()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_hausdorff_torchmetrics(benchmark):
    benchmark.group = "segmentation-hausdorff"
    ((p, t),) = class_maps(1, per_batch=8, side=64, classes=3, seed=1)
    got = benchmark(tms.HausdorffDistance(num_classes=3, input_format="index"), p, t)
    want = fmetrics.hausdorff_distance(num_classes=3, input_format="index")(p, t)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
