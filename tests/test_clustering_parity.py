"""Clustering, nominal, pairwise and shape: parity with scikit-learn, SciPy and torchmetrics on random and nasty cases."""
import math
import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
import torch
from scipy.stats.contingency import association

import fmetrics as fm

EXTRINSIC = [
    (fm.rand_score, skm.rand_score),
    (fm.adjusted_rand_score, skm.adjusted_rand_score),
    (fm.mutual_info_score, skm.mutual_info_score),
    (fm.normalized_mutual_info_score, skm.normalized_mutual_info_score),
    (fm.adjusted_mutual_info_score, skm.adjusted_mutual_info_score),
    (fm.fowlkes_mallows_index, skm.fowlkes_mallows_score),
    (fm.homogeneity_score, skm.homogeneity_score),
    (fm.completeness_score, skm.completeness_score),
    (fm.v_measure_score, skm.v_measure_score),
]


def _nasty():
    g = torch.Generator().manual_seed(7)
    n = 40
    yield "one cluster", torch.zeros(n, dtype=torch.int64), torch.randint(0, 3, (n,), generator=g)
    yield "one class", torch.randint(0, 3, (n,), generator=g), torch.zeros(n, dtype=torch.int64)
    yield "both single", torch.zeros(n, dtype=torch.int64), torch.zeros(n, dtype=torch.int64) + 5
    yield "each point its own cluster", torch.arange(n), torch.randint(0, 4, (n,), generator=g)
    yield "identical", torch.arange(n) % 5, torch.arange(n) % 5
    yield "large ids", torch.randint(0, 3, (n,), generator=g) * 10**12 - 7, torch.randint(0, 3, (n,), generator=g)
    yield "negative non-contiguous", torch.randint(-50, 50, (n,), generator=g) * 3, torch.randint(0, 6, (n,), generator=g)
    yield "single sample", torch.tensor([3]), torch.tensor([1])


@pytest.mark.parametrize("factory,oracle", EXTRINSIC, ids=[f.__name__ for f, _ in EXTRINSIC])
def test_extrinsic_random_and_nasty_cases_match_sklearn(factory, oracle):
    g = torch.Generator().manual_seed(0)
    cases = list(_nasty())
    for n, k_p, k_t in [(50, 3, 4), (300, 10, 2), (1000, 25, 25), (2, 2, 2)]:
        cases.append((f"random {n}", torch.randint(0, k_p, (n,), generator=g), torch.randint(0, k_t, (n,), generator=g)))
    for what, p, t in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = oracle(t.numpy(), p.numpy())
        got = float(factory()(p, t))
        assert got == pytest.approx(want, rel=1e-10, abs=1e-12), f"{factory.__name__} on {what}: {got} vs {want}"


@pytest.mark.parametrize("method", ["min", "geometric", "arithmetic", "max"])
def test_ami_and_nmi_average_methods_and_the_dense_table(method):
    g = torch.Generator().manual_seed(1)
    p, t = torch.randint(0, 8, (2000,), generator=g), torch.randint(0, 6, (2000,), generator=g)
    for fn, oracle in ((fm.adjusted_mutual_info_score, skm.adjusted_mutual_info_score),
                       (fm.normalized_mutual_info_score, skm.normalized_mutual_info_score)):
        want = oracle(t.numpy(), p.numpy(), average_method=method)
        assert float(fn(average_method=method)(p, t)) == pytest.approx(want, abs=1e-12)
        assert float(fn(average_method=method, num_clusters=8)(p, t)) == pytest.approx(want, abs=1e-12)


def test_ami_many_clusters_small_counts_hits_the_poisson_tail():
    # small expected counts: the hypergeometric tail is Poisson-like, wider than a Gaussian window
    g = torch.Generator().manual_seed(3)
    p, t = torch.randint(0, 200, (3000,), generator=g), torch.randint(0, 200, (3000,), generator=g)
    want = skm.adjusted_mutual_info_score(t.numpy(), p.numpy())
    assert float(fm.adjusted_mutual_info_score()(p, t)) == pytest.approx(want, abs=1e-11)


def test_empty_input_follows_sklearn():
    empty = torch.zeros(0, dtype=torch.int64)
    assert float(fm.rand_score()(empty, empty)) == skm.rand_score([], []) == 1.0
    assert float(fm.adjusted_rand_score()(empty, empty)) == 1.0
    assert float(fm.homogeneity_score()(empty, empty)) == 1.0


def test_dense_state_rejects_labels_out_of_range_quoting_them():
    m = fm.adjusted_rand_score(num_clusters=3)
    s = m.update(m.init(), torch.tensor([0, 1]), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"labels must be in \[0, 3\).*found 3 and 9"):
        m.update(s, torch.tensor([0, 3]), torch.tensor([9, 1]))
    with fm.validation.mode("deferred"):
        bad = m.update(s, torch.tensor([0, 3]), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="the first was 3 in update call 2"):
        m.finalize(bad)


def test_cluster_accuracy_matches_torchmetrics_hungarian_free_reference():
    from scipy.optimize import linear_sum_assignment

    g = torch.Generator().manual_seed(4)
    for k in (2, 5, 12):
        t = torch.randint(0, k, (500,), generator=g)
        p = (t + torch.randint(0, 2, (500,), generator=g)) % k
        p = torch.randperm(k, generator=g)[p]  # relabel clusters
        table = np.zeros((k, k))
        np.add.at(table, (t.numpy(), p.numpy()), 1)
        r, c = linear_sum_assignment(table, maximize=True)
        assert float(fm.cluster_accuracy(num_classes=k)(p, t)) == pytest.approx(table[r, c].sum() / 500, abs=1e-15)


def test_intrinsic_scores_match_sklearn_and_torchmetrics():
    import torchmetrics.functional.clustering as tmc

    g = torch.Generator().manual_seed(5)
    x = torch.randn(400, 5, generator=g, dtype=torch.float64) + 1e3  # offset data: the moments stay exact
    labels = torch.randint(0, 6, (400,), generator=g) * 11
    xs, ls = x.numpy(), labels.numpy()
    assert float(fm.calinski_harabasz_score()(x, labels)) == pytest.approx(skm.calinski_harabasz_score(xs, ls), rel=1e-9)
    dense = fm.calinski_harabasz_score(num_clusters=56)
    assert float(dense(x, labels)) == pytest.approx(skm.calinski_harabasz_score(xs, ls), rel=1e-6)
    # scikit-learn's distances go through the Gram trick (cancellation on offset data, ~1e-8 relative here);
    # the exact reference is computed directly
    cents = {k: xs[ls == k].mean(0) for k in np.unique(ls)}
    keys = sorted(cents)
    s = np.array([np.linalg.norm(xs[ls == k] - cents[k], axis=1).mean() for k in keys])
    c = np.stack([cents[k] for k in keys])
    d = np.linalg.norm(c[:, None] - c[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    exact_db = ((s[:, None] + s[None]) / d).max(1).mean()
    assert float(fm.davies_bouldin_score()(x, labels)) == pytest.approx(exact_db, rel=1e-12)
    assert float(fm.davies_bouldin_score()(x, labels)) == pytest.approx(skm.davies_bouldin_score(xs, ls), rel=1e-6)
    for p in (1, 2, 3):
        assert float(fm.dunn_index(p=p)(x, labels)) == pytest.approx(float(tmc.dunn_index(x, labels, p)), rel=1e-9)


def _bergsma(table, kind):
    """Bias-corrected Cramér's V / Tschuprow's T from Bergsma (2013), with Yates' chi2 for 2x2 tables."""
    from scipy.stats import chi2_contingency

    table = table[table.sum(1) > 0][:, table.sum(0) > 0]
    n = table.sum()
    r, c = table.shape
    chi2 = chi2_contingency(table, correction=True)[0]
    phi2 = max(0.0, chi2 / n - (r - 1) * (c - 1) / (n - 1))
    rc, cc = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
    if kind == "cramer":
        return math.sqrt(phi2 / min(rc - 1, cc - 1))
    return math.sqrt(phi2 / math.sqrt((rc - 1) * (cc - 1)))


def _table(p, t):
    _, ti = np.unique(t, return_inverse=True)
    _, pi = np.unique(p, return_inverse=True)
    out = np.zeros((ti.max() + 1, pi.max() + 1), dtype=np.int64)
    np.add.at(out, (ti, pi), 1)
    return out


@pytest.mark.parametrize("k_p,k_t", [(2, 2), (3, 5), (6, 4)])
def test_nominal_association_matches_scipy_and_bergsma(k_p, k_t):
    import torchmetrics.functional.nominal as tmn

    g = torch.Generator().manual_seed(k_p * 10 + k_t)
    t = torch.randint(0, k_t, (300,), generator=g)
    p = torch.where(torch.rand(300, generator=g) < 0.4, t % k_p, torch.randint(0, k_p, (300,), generator=g))
    tab = _table(p.numpy(), t.numpy())
    for factory, method in ((fm.cramers_v, "cramer"), (fm.tschuprows_t, "tschuprow")):
        assert float(factory(bias_correction=False)(p, t)) == pytest.approx(association(tab, method=method), abs=1e-12)
        want = _bergsma(tab.astype(float), method)
        assert float(factory()(p, t)) == pytest.approx(want, abs=1e-12)
    assert float(fm.pearsons_contingency_coefficient()(p, t)) == pytest.approx(association(tab, method="pearson"),
                                                                               abs=1e-12)
    if (k_p, k_t) == (2, 2):
        return  # torchmetrics 1.9 fails on 2 x 2 bias-corrected tables of integer labels (in-place Long += Float)
    # torchmetrics computes in float32 on the same definitions
    assert float(fm.cramers_v()(p, t)) == pytest.approx(float(tmn.cramers_v(p, t)), abs=1e-5)
    assert float(fm.theils_u()(p, t)) == pytest.approx(float(tmn.theils_u(p, t)), abs=1e-5)
    assert float(fm.tschuprows_t()(p, t)) == pytest.approx(float(tmn.tschuprows_t(p, t)), abs=1e-5)


@pytest.mark.parametrize("strategy", ["replace", "drop"])
def test_nominal_nan_strategies_match_scipy(strategy):
    # torchmetrics 1.9 fails on float inputs with NaN ("result type Float can't be cast to ... Long"),
    # so the reference applies the rule by hand and asks SciPy
    g = torch.Generator().manual_seed(9)
    p = torch.randint(0, 4, (200,), generator=g).double()
    t = torch.randint(0, 3, (200,), generator=g).double()
    p[::7] = float("nan")
    t[::11] = float("nan")
    pn, tn = p.numpy(), t.numpy()
    if strategy == "replace":
        pn, tn = np.nan_to_num(pn, nan=1.0), np.nan_to_num(tn, nan=1.0)
    else:
        keep = ~(np.isnan(pn) | np.isnan(tn))
        pn, tn = pn[keep], tn[keep]
    tab = _table(pn, tn)
    for ours, method in ((fm.cramers_v, "cramer"), (fm.pearsons_contingency_coefficient, "pearson")):
        kwargs = {"bias_correction": False} if ours is fm.cramers_v else {}
        want = association(tab, method=method)
        got = float(ours(nan_strategy=strategy, nan_replace_value=1.0, **kwargs)(p, t))
        assert got == pytest.approx(want, abs=1e-12), ours.__name__
        dense = float(ours(nan_strategy=strategy, nan_replace_value=1.0, num_categories=4, **kwargs)(p, t))
        assert dense == pytest.approx(want, abs=1e-12)


def test_matrix_forms_match_torchmetrics():
    import torchmetrics.functional.nominal as tmn

    g = torch.Generator().manual_seed(2)
    base = torch.randint(0, 3, (500, 1), generator=g)
    m = torch.where(torch.rand(500, 4, generator=g) < 0.5, base, torch.randint(0, 4, (500, 4), generator=g))
    pairs = ((fm.cramers_v_matrix(), tmn.cramers_v_matrix(m)), (fm.tschuprows_t_matrix(), tmn.tschuprows_t_matrix(m)),
             (fm.pearsons_contingency_coefficient_matrix(), tmn.pearsons_contingency_coefficient_matrix(m)),
             (fm.theils_u_matrix(), tmn.theils_u_matrix(m)))
    for ours, want in pairs:
        torch.testing.assert_close(ours(m), want.double(), atol=1e-5, rtol=0)


def test_fleiss_kappa_probs_mode_and_torchmetrics_epsilon():
    import torchmetrics.functional.nominal as tmn

    g = torch.Generator().manual_seed(6)
    probs = torch.rand(50, 4, 5, generator=g)
    counts = torch.nn.functional.one_hot(probs.argmax(1), 4).sum(1)
    ours = float(fm.fleiss_kappa(mode="probs")(probs))
    assert ours == pytest.approx(float(fm.fleiss_kappa()(counts)), abs=1e-15)
    # torchmetrics adds 1e-5 to the denominator; fmetrics follows Fleiss (1971) exactly
    p = counts.sum(0).double() / counts.sum()
    pe = float((p * p).sum())
    p_bar = float((((counts.double() ** 2).sum(1) - 5) / 20).mean())
    assert ours == pytest.approx((p_bar - pe) / (1 - pe), abs=1e-15)
    assert ours == pytest.approx(float(tmn.fleiss_kappa(counts)) * (1 - pe + 1e-5) / (1 - pe), abs=1e-6)


def test_pairwise_functions_match_sklearn():
    import sklearn.metrics.pairwise as skp

    g = torch.Generator().manual_seed(8)
    x, y = torch.randn(7, 5, generator=g) * 100 + 1000, torch.randn(4, 5, generator=g) * 100 + 1000
    xd, yd = x.double().numpy(), y.double().numpy()
    checks = [
        (fm.pairwise_cosine_similarity(x, y), skp.cosine_similarity(xd, yd)),
        (fm.pairwise_euclidean_distance(x, y), skp.euclidean_distances(xd, yd)),
        (fm.pairwise_manhattan_distance(x, y), skp.manhattan_distances(xd, yd)),
        (fm.pairwise_linear_similarity(x, y), skp.linear_kernel(xd, yd)),
        (fm.pairwise_minkowski_distance(x, y, exponent=3), skp.pairwise_distances(xd, yd, metric="minkowski", p=3)),
    ]
    for got, want in checks:
        np.testing.assert_allclose(got.double().numpy(), want, rtol=1e-6)
    self_dist = fm.pairwise_euclidean_distance(x)
    assert torch.all(self_dist.diagonal() == 0)
    np.testing.assert_allclose(fm.pairwise_euclidean_distance(x, reduction="mean").double().numpy(),
                               skp.euclidean_distances(xd).mean(1), rtol=1e-6)
    with pytest.raises(ValueError, match="pairwise_cosine_similarity: argument `y`"):
        fm.pairwise_cosine_similarity(x, torch.zeros(3, 2))


def test_procrustes_matches_scipy_and_torchmetrics():
    from scipy.spatial import procrustes
    from torchmetrics.functional.shape import procrustes_disparity as tm_procrustes

    g = torch.Generator().manual_seed(10)
    a = torch.randn(6, 20, 3, generator=g, dtype=torch.float64)
    b = a @ torch.linalg.qr(torch.randn(3, 3, generator=g, dtype=torch.float64))[0] * 2 + 0.1 * torch.randn(
        6, 20, 3, generator=g, dtype=torch.float64)
    got = fm.procrustes_disparity(reduction="none")(a, b)
    want = torch.tensor([procrustes(a[i].numpy(), b[i].numpy())[2] for i in range(6)], dtype=torch.float64)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    torch.testing.assert_close(got, tm_procrustes(a, b), atol=1e-10, rtol=0)
    assert float(fm.procrustes_disparity()(a, b)) == pytest.approx(float(want.mean()), abs=1e-14)
