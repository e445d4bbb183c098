"""Hot paths of the regression metrics: one update on a 4096x16 batch (16 outputs), fmetrics vs torchmetrics."""
import pytest
import torch

import fmetrics
from benchmarks._checks import ROUNDS, assert_agrees, fresh, updated, workload_tolerance

tm = pytest.importorskip("torchmetrics.regression")

CASES = [
    ("mean_squared_error", fmetrics.mean_squared_error, "MeanSquaredError"),
    ("mean_absolute_error", fmetrics.mean_absolute_error, "MeanAbsoluteError"),
    ("pearson_corrcoef", fmetrics.pearson_corrcoef, "PearsonCorrCoef"),
]
params = pytest.mark.parametrize("name,factory,tm_class", CASES, ids=[c[0] for c in CASES])


def _batch():
    target = torch.randn(4096, 16)
    return 0.8 * target + 0.6 * torch.randn(4096, 16), target


@params
def test_update_fmetrics(benchmark, name, factory, tm_class):
    benchmark.group = f"regression-{name}-update"
    m, (p, t) = factory(num_outputs=16), _batch()
    state = benchmark(m.update, m.init(), p, t)
    want = getattr(tm, tm_class)(num_outputs=16)(p, t)
    assert_agrees(m.finalize(state), want, workload_tolerance(f"regression/{name}"))


@params
def test_update_torchmetrics(benchmark, name, factory, tm_class):
    benchmark.group = f"regression-{name}-update"
    p, t = _batch()
    setup = fresh(lambda: getattr(tm, tm_class)(num_outputs=16), p, t)
    metric = benchmark.pedantic(updated, setup=setup, rounds=ROUNDS, iterations=1)
    assert_agrees(metric.compute(), factory(num_outputs=16)(p, t), workload_tolerance(f"regression/{name}"))


def test_r2_update_fmetrics(benchmark):
    benchmark.group = "regression-r2_score-update"
    m, (p, t) = fmetrics.r2_score(num_outputs=16), _batch()
    state = benchmark(m.update, m.init(), p, t)
    assert_agrees(m.finalize(state), tm.R2Score()(p, t), workload_tolerance("regression/r2_score"))


def test_r2_update_torchmetrics(benchmark):
    benchmark.group = "regression-r2_score-update"
    p, t = _batch()
    metric = benchmark.pedantic(updated, setup=fresh(tm.R2Score, p, t), rounds=ROUNDS, iterations=1)
    assert_agrees(metric.compute(), fmetrics.r2_score(num_outputs=16)(p, t), workload_tolerance("regression/r2_score"))
