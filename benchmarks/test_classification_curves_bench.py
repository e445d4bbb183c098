"""Hot paths of the curve metrics, fmetrics vs torchmetrics: one binned update (10^4 scores, 1000
thresholds) and exact binary AUROC over 10^6 scores (updates and compute)."""
import pytest
import torch

import fmetrics

tmc = pytest.importorskip("torchmetrics.classification")


def _scores(n):
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 2, (n,), generator=g)
    return torch.sigmoid(torch.randn(n, generator=g) + 0.8 * target), target


def test_binned_update_fmetrics(benchmark):
    benchmark.group = "curves-binned-update"
    m, (p, t) = fmetrics.binary_auroc(thresholds=1000), _scores(10**4)
    benchmark(m.update, m.init(), p, t)


def test_binned_update_torchmetrics(benchmark):
    benchmark.group = "curves-binned-update"
    m, (p, t) = tmc.BinaryAUROC(thresholds=1000), _scores(10**4)
    benchmark(m.update, p, t)


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
    benchmark(_exact_fm, *_scores(10**6))


def test_exact_auroc_torchmetrics(benchmark):
    benchmark.group = "curves-exact-auroc-1e6"
    benchmark(_exact_tm, *_scores(10**6))
