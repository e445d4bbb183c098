"""Hot paths of the curve metrics, fmetrics vs torchmetrics: one binned update (10^4 scores, 1000
thresholds) and exact binary AUROC over 10^6 scores (updates and compute)."""
import pytest
import torch

import fmetrics
from benchmarks._checks import ROUNDS, assert_agrees, fresh, updated, workload_tolerance

tmc = pytest.importorskip("torchmetrics.classification")


def _scores(n):
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 2, (n,), generator=g)
    return torch.sigmoid(torch.randn(n, generator=g) + 0.8 * target), target


def test_binned_update_fmetrics(benchmark):
    benchmark.group = "curves-binned-update"
    m, (p, t) = fmetrics.binary_auroc(thresholds=1000), _scores(10**4)
    state = benchmark(m.update, m.init(), p, t)
    want = tmc.BinaryAUROC(thresholds=1000)(p, t)
    assert_agrees(m.finalize(state), want, workload_tolerance("classification/binary_auroc_binned"))


def test_binned_update_torchmetrics(benchmark):
    benchmark.group = "curves-binned-update"
    p, t = _scores(10**4)
    setup = fresh(lambda: tmc.BinaryAUROC(thresholds=1000), p, t)
    metric = benchmark.pedantic(updated, setup=setup, rounds=ROUNDS, iterations=1)
    want = fmetrics.binary_auroc(thresholds=1000)(p, t)
    assert_agrees(metric.compute(), want, workload_tolerance("classification/binary_auroc_binned"))


def _exact_fm(p, t):
    m = fmetrics.binary_auroc()
    s = m.init()
    for a, b in zip(p.chunk(10), t.chunk(10)):
        s = m.update(s, a, b)
    return m.finalize(s)


def _exact_tm(p, t):
    m = tmc.BinaryAUROC()
    for a, b in zip(p.chunk(10), t.chunk(10)):
        m.update(a, b)
    return m.compute()


def test_exact_auroc_fmetrics(benchmark):
    benchmark.group = "curves-exact-auroc-1e6"
    data = _scores(10**6)
    value = benchmark(_exact_fm, *data)
    assert_agrees(value, _exact_tm(*data), workload_tolerance("classification/binary_auroc_exact_1e6"))


def test_exact_auroc_torchmetrics(benchmark):
    benchmark.group = "curves-exact-auroc-1e6"
    data = _scores(10**6)
    value = benchmark(_exact_tm, *data)
    assert_agrees(value, _exact_fm(*data), workload_tolerance("classification/binary_auroc_exact_1e6"))
