"""Hot paths of the aggregation metrics: one update on a 4096x16 batch, and a 20-batch stream."""
import pytest
import torch

import fmetrics
from benchmarks._checks import ROUNDS, assert_agrees, fresh, updated, workload_tolerance

torchmetrics = pytest.importorskip("torchmetrics")

CASES = [("mean", fmetrics.mean, "MeanMetric"), ("sum", fmetrics.sum, "SumMetric"), ("max", fmetrics.max, "MaxMetric")]
params = pytest.mark.parametrize("name,factory,tm_class", CASES, ids=[c[0] for c in CASES])


def _fmetrics_stream(factory, batches):
    m = factory()

    def run():
        s = m.init()
        for b in batches:
            s = m.update(s, b)
        return m.finalize(s)

    return run


def _torchmetrics_stream(tm_class, batches):
    def run():
        m = getattr(torchmetrics, tm_class)()
        for b in batches:
            m.update(b)
        return m.compute()

    return run


@params
def test_update_fmetrics(benchmark, name, factory, tm_class):
    benchmark.group = f"aggregation-{name}-update"
    m, x = factory(), torch.randn(4096, 16)
    state = benchmark(m.update, m.init(), x)
    assert_agrees(m.finalize(state), getattr(torchmetrics, tm_class)()(x), workload_tolerance(f"aggregation/{name}"))


@params
def test_update_torchmetrics(benchmark, name, factory, tm_class):
    benchmark.group = f"aggregation-{name}-update"
    x = torch.randn(4096, 16)
    metric = benchmark.pedantic(updated, setup=fresh(getattr(torchmetrics, tm_class), x), rounds=ROUNDS, iterations=1)
    assert_agrees(metric.compute(), factory()(x), workload_tolerance(f"aggregation/{name}"))


@params
@pytest.mark.parametrize("library", ["fmetrics", "torchmetrics"])
def test_stream(benchmark, library, name, factory, tm_class):
    benchmark.group = f"aggregation-{name}-stream"
    batches = list(torch.randn(20, 4096, 16).unbind(0))
    run = _fmetrics_stream(factory, batches) if library == "fmetrics" else _torchmetrics_stream(tm_class, batches)
    value = benchmark(run)
    expected = _torchmetrics_stream(tm_class, batches)()
    torch.testing.assert_close(value.float(), expected, rtol=1e-5, atol=1e-5)
