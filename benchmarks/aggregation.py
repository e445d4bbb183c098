"""Aggregation workloads: a stream of 200 batches of 4096x16 floats (25 with --quick).

fmetrics' ``init / update* / finalize`` against torchmetrics' ``update* / compute``,
both with their default ``nan_strategy="warn"``; and the four running
statistics as one collection against a ``MetricCollection``.
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

ROWS, COLS = 4096, 16


def _batches(quick: bool) -> int:
    return 25 if quick else 200


def _samples(quick: bool) -> int:
    return _batches(quick) * ROWS


def _bytes(quick: bool) -> int:
    return _batches(quick) * ROWS * COLS * 4  # float32 values, one pass


def _data(quick: bool) -> list[tuple[torch.Tensor]]:
    return [(b,) for b in torch.randn(_batches(quick), ROWS, COLS).unbind(0)]


def _torchmetrics(cls_name: str, batches):
    import torchmetrics

    return torchmetrics_run(getattr(torchmetrics, cls_name), batches)


def _workload(name: str, factory, tm_class: str, doc: str):
    @register(f"aggregation/{name}", domain="aggregation", samples=_samples, bytes=_bytes,
              peers=("torchmetrics",), description=doc)
    def build(quick: bool, device="cpu"):
        batches = on_device(_data(quick), device)
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
