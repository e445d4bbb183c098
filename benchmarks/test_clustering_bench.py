"""pytest-benchmark suite for clustering and nominal: each timed result is checked against scikit-learn / SciPy."""
import pytest
import torch

import fmetrics

pytest.importorskip("pytest_benchmark")
skm = pytest.importorskip("sklearn.metrics")


def _labels(n=200_000, k=50):
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, k, (n,), generator=g)
    p = torch.where(torch.rand(n, generator=g) < 0.3, t, torch.randint(0, k, (n,), generator=g))
    return p, t


@pytest.mark.parametrize("name", ["adjusted_rand_score", "normalized_mutual_info_score", "adjusted_mutual_info_score"])
def test_extrinsic(benchmark, name):
    p, t = _labels()
    metric = getattr(fmetrics, name)()
    value = benchmark(lambda: metric(p, t))
    assert float(value) == pytest.approx(getattr(skm, name)(t.numpy(), p.numpy()), abs=1e-10)


def test_cramers_v_matrix(benchmark):
    from scipy.stats.contingency import association

    g = torch.Generator().manual_seed(1)
    m = torch.randint(0, 5, (100_000, 4), generator=g)
    value = benchmark(lambda: fmetrics.cramers_v_matrix(bias_correction=False)(m))
    import numpy as np

    table = np.zeros((5, 5), dtype=np.int64)
    np.add.at(table, (m[:, 1].numpy(), m[:, 0].numpy()), 1)
    assert float(value[0, 1]) == pytest.approx(association(table, method="cramer"), abs=1e-12)
