"""Aggregation workloads: a stream of 200 batches of 4096x16 floats (25 with --quick), and for the
large-batch rows 8 batches of 2^22 floats (2 with --quick).

fmetrics' ``init / update* / finalize`` against torchmetrics' ``update* / compute``,
both with their default ``nan_strategy="warn"``; and the four running
statistics as one collection against a ``MetricCollection``.
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

ROWS, COLS = 4096, 16
LARGE = 2**22  # entries in a batch of the *_large rows: a float64 copy of it (32 MiB) is mapped afresh per call


def _batches(quick: bool, large: bool = False) -> int:
    if large:
        return 2 if quick else 8
    return 25 if quick else 200


def _samples(quick: bool, large: bool = False) -> int:
    return _batches(quick, large) * (LARGE if large else ROWS)


def _bytes(quick: bool, large: bool = False) -> int:
    return _batches(quick, large) * (LARGE if large else ROWS * COLS) * 4  # float32 values, one pass


def _data(quick: bool, large: bool = False) -> list[tuple[torch.Tensor]]:
    shape = (_batches(quick, large), LARGE) if large else (_batches(quick), ROWS, COLS)
    return [(b,) for b in torch.randn(shape).unbind(0)]


def _torchmetrics(cls_name: str, batches):
    import torchmetrics

    return torchmetrics_run(getattr(torchmetrics, cls_name), batches)


def _workload(name: str, factory, tm_class: str, doc: str, large: bool = False):
    @register(f"aggregation/{name}", domain="aggregation", samples=lambda quick: _samples(quick, large),
              bytes=lambda quick: _bytes(quick, large), peers=("torchmetrics",), description=doc)
    def build(quick: bool, device="cpu"):
        batches = on_device(_data(quick, large), device)
        runs = {"fmetrics": fmetrics_run(factory(), batches)}
        try:
            runs["torchmetrics"] = _torchmetrics(tm_class, batches)
        except ImportError:
            pass
        return runs

    return build


_workload("mean", fmetrics.mean, "MeanMetric", "running mean of 4096x16 batches vs MeanMetric")
_workload("sum", fmetrics.sum, "SumMetric", "running sum of 4096x16 batches vs SumMetric")
_workload("max", fmetrics.max, "MaxMetric", "running max of 4096x16 batches vs MaxMetric")
_workload("cat", fmetrics.cat, "CatMetric", "concatenation of 4096x16 batches vs CatMetric")
_workload("sum_large", fmetrics.sum, "SumMetric", "running sum of batches of 2^22 floats vs SumMetric", large=True)
_workload("mean_large", fmetrics.mean, "MeanMetric", "running mean of batches of 2^22 floats vs MeanMetric",
          large=True)


COLLECTION = {"mean": ("mean", "MeanMetric"), "sum": ("sum", "SumMetric"), "min": ("min", "MinMetric"),
              "max": ("max", "MaxMetric")}


@register("aggregation/collection", domain="aggregation", samples=_samples, bytes=_bytes, peers=("torchmetrics",))
def collection(quick: bool, device="cpu"):
    """mean, sum, min and max of 4096x16 batches as one collection vs MetricCollection"""
    batches = on_device(_data(quick), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.collection(
        {k: getattr(fmetrics, f)() for k, (f, _) in COLLECTION.items()}, prefix="val/"), batches)}
    try:
        import torchmetrics
    except ImportError:
        return runs

    runs["torchmetrics"] = torchmetrics_run(
        lambda: torchmetrics.MetricCollection({k: getattr(torchmetrics, cls)() for k, (_, cls) in COLLECTION.items()},
                                              prefix="val/"), batches)
    return runs
