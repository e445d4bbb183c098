"""Comparing systems (issue 32): paired bootstrap, permutation test, analytic intervals, DeLong.

Oracles: explicit resamples in NumPy with the documented draws written again
(tests/_draws_np.py), scikit-learn / SciPy statistics, a hand O(n^2) DeLong,
Hanley & McNeil's published CT rating example, sacrebleu's paired tests, and
SciPy's binomial intervals.
"""
import math

import numpy as np
import pytest
import torch
from scipy import stats
from sklearn import metrics as skm

import fmetrics as fm
from fmetrics import wrappers as W
from tests import _draws_np
from tests.cases.wrappers import crossing_p, swap_bits_np


def _np(x):
    return x.double().numpy()


def _data(n, seed, effect=0.0):
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, 2, (n,), generator=g)
    a = torch.sigmoid(torch.randn(n, generator=g) + 1.2 * (2 * target - 1))
    b = torch.sigmoid(torch.randn(n, generator=g) + (1.2 + effect) * (2 * target - 1))
    return a, b, target


_STATS = {
    "accuracy": (lambda: fm.binary_accuracy(), lambda p, t: np.mean((p > 0.5) == t)),
    "auroc-cat": (lambda: fm.binary_auroc(), lambda p, t: skm.roc_auc_score(t, p)),
    "mse": (lambda: fm.mean_squared_error(), lambda p, t: np.mean((p - t) ** 2)),
    "pearson-merges": (lambda: fm.pearson_corrcoef(), lambda p, t: stats.pearsonr(p, t)[0]),
}


def _values(stat, x, t, weights):
    return np.array([stat(np.repeat(x, w), np.repeat(t, w)) for w in weights])


@pytest.mark.parametrize("ids", [True, False], ids=["ids", "offsets"])
@pytest.mark.parametrize("kind", list(_STATS))
def test_paired_bootstrap_matches_explicit_resamples(kind, ids):
    make, stat = _STATS[kind]
    a, b, t = _data(120, 1)
    t = t.double() if kind in ("mse", "pearson-merges") else t
    R, seed = 40, 3
    m = W.paired_bootstrap(make(), num_samples=R, seed=seed, sample_ids=ids, alpha=0.1)
    sid = torch.arange(120) * 13 + 5
    inputs = (sid, a, b, t) if ids else (a, b, t)
    s = m.init()
    for lo, hi in ((0, 50), (50, 51), (51, 120)) if ids else ((0, 120),):
        s = m.update(s, *(x[lo:hi] for x in inputs))
    out = m.finalize(s)
    keys = _draws_np.id_keys(seed, sid) if ids else _draws_np.offset_keys(seed, (a, b, t))
    c = _draws_np.poisson_counts(keys, R)
    ra, rb = _values(stat, _np(a), _np(t), c), _values(stat, _np(b), _np(t), c)
    d = rb - ra
    va, vb = stat(_np(a), _np(t)), stat(_np(b), _np(t))
    want = {"a": va, "b": vb, "delta": vb - va, "ci_low": np.quantile(d, 0.05), "ci_high": np.quantile(d, 0.95),
            "p_value": crossing_p(d)}
    for k, v in want.items():
        np.testing.assert_allclose(float(out[k]), v, rtol=1e-6, atol=1e-9, err_msg=k)
    assert 0 < float(out["p_value"]) < 1 and float(out["ci_low"]) < float(out["ci_high"])


@pytest.mark.parametrize("kind", ["accuracy", "auroc-cat", "pearson-merges"])
def test_permutation_test_matches_explicit_swaps(kind):
    make, stat = _STATS[kind]
    a, b, t = _data(90, 2)
    t = t.double() if kind == "pearson-merges" else t
    R, seed = 70, 4
    sid = torch.randperm(90, generator=torch.Generator().manual_seed(9)) + 1000
    m = W.permutation_test(make(), num_permutations=R, seed=seed, sample_ids=True)
    s = m.merge(m.update(m.init(), sid[:30], a[:30], b[:30], t[:30]),
                m.update(m.init(), sid[30:], a[30:], b[30:], t[30:]))
    out = m.finalize(s)
    swap = swap_bits_np(_draws_np.id_keys(seed, sid), R).astype(bool)
    an, bn, tn = _np(a), _np(b), _np(t)
    sa = [stat(np.where(w, bn, an), tn) for w in swap]
    sb = [stat(np.where(w, an, bn), tn) for w in swap]
    delta = stat(bn, tn) - stat(an, tn)
    p = (np.sum(np.abs(np.array(sb) - np.array(sa)) >= abs(delta) - 1e-9) + 1) / (R + 1)
    np.testing.assert_allclose(float(out["delta"]), delta, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(float(out["p_value"]), p, rtol=1e-9)
    assert 1 / (R + 1) < p < 1  # the data makes the test informative, not a boundary value


def test_swaps_are_fair_and_independent_of_batching():
    from fmetrics.wrappers._pairs import swap_bits

    keys = torch.from_numpy(_draws_np.id_keys(0, np.arange(20000)).view(np.int64))
    s = swap_bits(keys, 130, torch.float64)
    assert s.shape == (130, 20000) and abs(float(s.mean()) - 0.5) < 0.005
    np.testing.assert_array_equal(s.numpy(), swap_bits_np(keys.numpy().view(np.uint64), 130))
    assert abs(float(torch.corrcoef(s[:2])[0, 1])) < 0.03


def _sentences(n, seed, error):
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(40)]
    refs = [" ".join(rng.choice(vocab, rng.integers(4, 12))) for _ in range(n)]

    def system(rate, s):
        r = np.random.default_rng(s)
        return [" ".join(w if r.random() > rate else r.choice(vocab) for w in ref.split()) for ref in refs]

    return refs, system(error[0], seed + 1), system(error[1], seed + 2)


@pytest.mark.parametrize("test_type", ["bs", "ar"])
def test_sacrebleu_paired_tests_agree(test_type):
    """Same corpus, same delta; p-values agree within the Monte-Carlo error of two 1000-draw tests."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    refs, hyp_a, hyp_b = _sentences(150, 7, (0.2, 0.17))
    R = 1000
    test = PairedTest([("A", hyp_a), ("B", hyp_b)], {"BLEU": BLEU()}, [refs], test_type=test_type, n_samples=R)
    _, scores = test()
    want_a, want_b = scores["BLEU"][0].score, scores["BLEU"][1].score
    wrapper = W.paired_bootstrap if test_type == "bs" else W.permutation_test
    count = {"num_samples": R} if test_type == "bs" else {"num_permutations": R}
    out = wrapper(fm.sacre_bleu_score(), **count)(hyp_a, hyp_b, [[r] for r in refs])
    np.testing.assert_allclose(float(out["a"]) * 100, want_a, atol=1e-9)
    np.testing.assert_allclose(float(out["delta"]) * 100, want_b - want_a, atol=1e-9)
    p_ours, p_sacre = float(out["p_value"]), scores["BLEU"][1].p_value
    assert 0.02 < p_sacre < 0.45, p_sacre  # an informative, not saturated, comparison
    if test_type == "bs":  # sacrebleu's paired_bs p-value estimates the one-sided share: half of ours
        p_ours = p_ours / 2
    sd = math.sqrt(2 * p_sacre * (1 - p_sacre) / R)
    assert abs(p_ours - p_sacre) < 4 * sd + 2 / R, (p_ours, p_sacre)


def test_identical_systems():
    """A system against itself: delta 0, every replicate delta 0 (both systems see the same rows)."""
    a, _, t = _data(100, 5)
    out = W.paired_bootstrap(fm.binary_auroc(), num_samples=50)(a, a, t)
    assert float(out["delta"]) == 0 and float(out["ci_low"]) == 0 and float(out["ci_high"]) == 0
    assert float(out["p_value"]) == 1  # every replicate delta is 0: half below, half above
    assert float(W.permutation_test(fm.binary_auroc(), num_permutations=50)(a, a, t)["p_value"]) == 1  # ties: >=


def test_paired_bootstrap_sharding_exact_with_ids():
    """3 uneven shards (one empty), merged in rank order = one process, with sample ids."""
    a, b, t = _data(200, 6)
    sid = torch.arange(200) + 77
    m = W.paired_bootstrap(fm.binary_auroc(), num_samples=30, sample_ids=True)
    one = m(sid, a, b, t)
    perm = torch.randperm(200, generator=torch.Generator().manual_seed(0))
    shards = [perm[:13], perm[13:13], perm[13:]]
    states = [m.update(m.init(), *(x[i] for x in (sid, a, b, t))) for i in shards]
    merged = states[0]
    for s in states[1:]:
        merged = m.merge(merged, s)
    got = m.finalize(merged)
    for k in one:
        np.testing.assert_allclose(float(got[k]), float(one[k]), rtol=1e-12, err_msg=k)


def test_paired_bad_input():
    m = W.paired_bootstrap(fm.binary_accuracy(), num_samples=5)
    with pytest.raises(ValueError, match="paired_bootstrap.*num_samples"):
        W.paired_bootstrap(fm.binary_accuracy(), num_samples=0)
    with pytest.raises(ValueError, match="paired_bootstrap.*alpha"):
        W.paired_bootstrap(fm.binary_accuracy(), alpha=1.5)
    with pytest.raises(ValueError, match="permutation_test.*num_permutations"):
        W.permutation_test(fm.binary_accuracy(), num_permutations=-1)
    s = m.init()
    with pytest.raises(ValueError, match="paired_bootstrap.*inputs"):
        m.update(s, torch.rand(4))
    with pytest.raises(ValueError, match=r"paired_bootstrap.*inputs\[1\].*4 rows"):
        m.update(s, torch.rand(4), torch.rand(3), torch.ones(4, dtype=torch.long))
    with pytest.raises(ValueError, match="target"):  # the wrapped metric's value rule, before resampling
        m.update(s, torch.rand(4), torch.rand(4), torch.tensor([0, 1, 2, 1]))
    with pytest.raises(ValueError, match="paired_bootstrap.*ids"):
        W.paired_bootstrap(fm.binary_accuracy(), sample_ids=True).update(s, torch.rand(4), torch.rand(4),
                                                                         torch.rand(4), torch.ones(4))
    assert float(m.finalize(m.update(s, torch.rand(4), torch.rand(4), torch.ones(4, dtype=torch.long)))["a"]) >= 0


# ---------------------------------------------------------------- DeLong

def _delong_hand(scores, y):
    """DeLong et al. (1988) by definition: psi over every (positive, negative) pair, O(m n)."""
    x, z = scores[:, y == 1], scores[:, y == 0]
    psi = (x[:, :, None] > z[:, None, :]) + 0.5 * (x[:, :, None] == z[:, None, :])  # (K, m, n)
    auc = psi.mean((1, 2))
    v10, v01 = psi.mean(2), psi.mean(1)
    m, n = x.shape[1], z.shape[1]
    return auc, np.atleast_2d(np.cov(v10)) / m + np.atleast_2d(np.cov(v01)) / n


@pytest.mark.parametrize("seed", range(4))
def test_delong_matches_hand_definition(seed):
    g = torch.Generator().manual_seed(seed)
    n = 60 + 40 * seed
    t = torch.randint(0, 2, (n,), generator=g)
    a = torch.randn(n, generator=g) + t
    b = 0.6 * a + torch.randn(n, generator=g) + 0.5 * t
    if seed % 2:  # ties within and across classes
        a, b = (a * 2).round() / 2, (b * 3).round() / 3
    m = fm.delong_test()
    out = m.finalize(m.merge(m.update(m.init(), a[:17], b[:17], t[:17]), m.update(m.init(), a[17:], b[17:], t[17:])))
    auc, cov = _delong_hand(np.stack([_np(a), _np(b)]), t.numpy())
    np.testing.assert_allclose(auc, [skm.roc_auc_score(t, a), skm.roc_auc_score(t, b)], rtol=1e-12)
    np.testing.assert_allclose(float(out["auroc_a"]), auc[0], rtol=1e-12)
    np.testing.assert_allclose(float(out["auroc_b"]), auc[1], rtol=1e-12)
    np.testing.assert_allclose(out["covariance"].numpy(), cov, rtol=1e-10, atol=1e-15)
    z = (auc[1] - auc[0]) / math.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    np.testing.assert_allclose(float(out["z"]), z, rtol=1e-10)
    np.testing.assert_allclose(float(out["p_value"]), 2 * stats.norm.sf(abs(z)), rtol=1e-9)
    ci = fm.binary_auroc_ci(alpha=0.1)(a, t)
    half = stats.norm.ppf(0.95) * math.sqrt(cov[0, 0])
    np.testing.assert_allclose([float(ci["ci_low"]), float(ci["ci_high"])],
                               np.clip([auc[0] - half, auc[0] + half], 0, 1), rtol=1e-10)


def test_delong_float64_scores_finer_than_float32():
    """Scores that differ only beyond float32's precision (the float64 sort path), with exact ties across
    classes and systems: the hand O(n^2) DeLong on the same float64 values."""
    g = torch.Generator().manual_seed(11)
    n = 300
    t = torch.randint(0, 2, (n,), generator=g)
    step = torch.randint(0, 40, (n,), generator=g).double()
    a = 1.0 + (step + 0.3 * t) * 1e-12  # float32 would make every score 1.0
    b = torch.where(torch.rand(n, generator=g) < 0.5, a, 1.0 + torch.randint(0, 5, (n,), generator=g) * 1e-13)
    assert bool((a.float() == 1).all()) and torch.unique(a).numel() < n  # finer than float32; ties kept
    out = fm.delong_test()(a, b, t)
    auc, cov = _delong_hand(np.stack([_np(a), _np(b)]), t.numpy())
    np.testing.assert_allclose([float(out["auroc_a"]), float(out["auroc_b"])], auc, rtol=1e-12)
    np.testing.assert_allclose(out["covariance"].numpy(), cov, rtol=1e-10, atol=1e-15)
    assert 0.5 < auc[0] < 1


def test_delong_hanley_mcneil_ct_example():
    """Hanley & McNeil (1982), Table 1: 58 normal / 51 abnormal CT images rated 1-5; published AUC 0.893.

    DeLong's variance of this rating data, by hand from the 5x5 table (placements per category)."""
    normal, abnormal = [33, 6, 6, 11, 2], [3, 2, 2, 11, 33]
    scores = torch.cat([torch.arange(1.0, 6.0).repeat_interleave(torch.tensor(c)) for c in (normal, abnormal)])
    target = torch.cat([torch.zeros(58, dtype=torch.long), torch.ones(51, dtype=torch.long)])
    out = fm.binary_auroc_ci()(scores, target)
    assert round(float(out["value"]), 3) == 0.893
    nrm, abn = np.array(normal), np.array(abnormal)
    v10 = (np.cumsum(nrm) - nrm + nrm / 2) / 58  # a positive rated k: normals below k, half of those at k
    v01 = (abn[::-1].cumsum()[::-1] - abn + abn / 2) / 51
    var = np.cov(np.repeat(v10, abn)) / 51 + np.cov(np.repeat(v01, nrm)) / 58
    np.testing.assert_allclose(float(out["std"]), math.sqrt(var), rtol=1e-12)
    assert 0.025 < float(out["std"]) < 0.04  # Hanley-McNeil's own SE for this table is 0.032


def test_delong_edge_cases():
    t = torch.tensor([0, 0, 1, 1, 0, 1])
    a = torch.tensor([0.1, 0.2, 0.8, 0.9, 0.3, 0.7])
    out = fm.delong_test()(a, a.clone(), t)
    assert float(out["z"]) == 0 and float(out["p_value"]) == 1
    with pytest.warns(UserWarning, match="delong_test.*positive"):
        out = fm.delong_test()(a[:3], a[:3], t[:3])
    assert math.isnan(float(out["auroc_a"]))
    m = fm.delong_test()
    with pytest.raises(ValueError, match="delong_test.*target.*0 or 1.*2"):
        m.update(m.init(), a, a, torch.tensor([0, 0, 1, 2, 0, 1]))
    with pytest.raises(ValueError, match="delong_test.*preds.*finite.*nan"):
        m.update(m.init(), torch.tensor([0.1, float("nan"), 0.8, 0.9, 0.3, 0.7]), a, t)
    with pytest.raises(ValueError, match="delong_test.*preds_b.*1-D"):
        m.update(m.init(), a, a.reshape(2, 3), t)
    with pytest.raises(ValueError, match="binary_auroc_ci.*alpha"):
        fm.binary_auroc_ci(alpha=0)
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), a, a, torch.tensor([0, 0, 1, 5, 0, 1]))
    with pytest.raises(ValueError, match="delong_test.*1 input entry.*5"):
        m.finalize(s)


# ---------------------------------------------------------------- analytic intervals

_PROPORTION_CASES = [
    ("binary_accuracy", lambda: fm.binary_accuracy(), lambda p, t: ((p == t).sum(), len(t))),
    ("binary_recall", lambda: fm.binary_recall(), lambda p, t: ((p & t).sum(), t.sum())),
    ("binary_precision", lambda: fm.binary_precision(), lambda p, t: ((p & t).sum(), p.sum())),
    ("binary_specificity", lambda: fm.binary_specificity(), lambda p, t: ((~p & ~t).sum(), (~t).sum())),
]


@pytest.mark.parametrize("method", ["wilson", "clopper_pearson"])
@pytest.mark.parametrize("case", _PROPORTION_CASES, ids=[c[0] for c in _PROPORTION_CASES])
def test_proportion_intervals_match_scipy(case, method):
    _, make, counts = case
    for seed, n in ((0, 40), (1, 333), (2, 7)):
        g = torch.Generator().manual_seed(seed)
        t = torch.rand(n, generator=g) < 0.4
        p = torch.where(torch.rand(n, generator=g) < 0.7, t, ~t)
        out = W.confidence_interval(make(), method=method, alpha=0.1)(p.long(), t.long())
        k, trials = (int(x) for x in counts(p.numpy(), t.numpy()))
        want = stats.binomtest(k, trials).proportion_ci(confidence_level=0.9, method=
                                                        "wilson" if method == "wilson" else "exact")
        np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])], [want.low, want.high],
                                   rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(float(out["value"]), k / trials, rtol=1e-12)


def test_multiclass_micro_accuracy_interval():
    g = torch.Generator().manual_seed(3)
    t = torch.randint(0, 4, (150,), generator=g)
    p = torch.where(torch.rand(150, generator=g) < 0.6, t, torch.randint(0, 4, (150,), generator=g))
    out = W.confidence_interval(fm.multiclass_accuracy(num_classes=4, average="micro"), method="wilson")(p, t)
    want = stats.binomtest(int((p == t).sum()), 150).proportion_ci(method="wilson")
    np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])], [want.low, want.high], rtol=1e-9)


def test_fisher_z_interval_by_hand():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(80, generator=g)
    y = 0.5 * x + torch.randn(80, generator=g)
    m = W.confidence_interval(fm.pearson_corrcoef(exact=True), method="fisher_z", alpha=0.05)
    out = m.finalize(m.update(m.update(m.init(), x[:30], y[:30]), x[30:], y[30:]))
    r = stats.pearsonr(_np(x), _np(y))[0]
    half = stats.norm.ppf(0.975) / math.sqrt(80 - 3)
    np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])],
                               [math.tanh(math.atanh(r) - half), math.tanh(math.atanh(r) + half)], rtol=1e-9)
    want = stats.pearsonr(_np(x), _np(y)).confidence_interval(0.95)  # SciPy's Fisher z interval
    np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])], [want.low, want.high], rtol=1e-9)


def test_interval_configuration_errors():
    with pytest.raises(ValueError, match="confidence_interval.*metric.*proportion"):
        W.confidence_interval(fm.binary_auroc(), method="wilson")
    with pytest.raises(ValueError, match="confidence_interval.*metric.*proportion"):
        W.confidence_interval(fm.multiclass_accuracy(num_classes=3), method="wilson")  # macro: not k / n
    with pytest.raises(ValueError, match="confidence_interval.*pearson"):
        W.confidence_interval(fm.mean_squared_error(), method="fisher_z")
    with pytest.raises(ValueError, match="confidence_interval.*method"):
        W.confidence_interval(fm.mean(), method="normal")
    with pytest.raises(ValueError, match="confidence_interval.*interval"):
        W.confidence_interval(fm.binary_accuracy(), method="wilson", interval="bca")


def test_bootstrap_percentile_interval_matches_explicit_resamples():
    g = torch.Generator().manual_seed(5)
    x = torch.rand(150, generator=g) ** 3
    ids = torch.arange(150) * 3
    R = 300
    out = W.confidence_interval(fm.mean(), num_samples=R, seed=2, sample_ids=True)(ids, x)
    c = _draws_np.poisson_counts(_draws_np.id_keys(2, ids), R)
    reps = np.array([np.repeat(_np(x), w).mean() for w in c])
    np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])], np.quantile(reps, [0.025, 0.975]),
                               rtol=1e-10)
    np.testing.assert_allclose(float(out["value"]), _np(x).mean(), rtol=1e-12)


def test_bca_interval_matches_formula_and_scipy():
    """BCa by hand (Efron 1987) from the same replicates and blocks; SciPy's BCa within Monte-Carlo error."""
    from fmetrics.wrappers.intervals import JACKKNIFE_BLOCKS

    g = torch.Generator().manual_seed(6)
    x = torch.empty(400).exponential_(1.0, generator=g)
    ids = torch.arange(400) + 9
    R = 2000
    out = W.confidence_interval(fm.mean(), num_samples=R, seed=1, sample_ids=True, interval="bca")(ids, x)
    xs = _np(x)
    reps = np.array([np.repeat(xs, w).mean() for w in _draws_np.poisson_counts(_draws_np.id_keys(1, ids), R)])
    block = (_draws_np.id_keys(2, ids).view(np.int64) % JACKKNIFE_BLOCKS + JACKKNIFE_BLOCKS) % JACKKNIFE_BLOCKS
    jack = np.array([xs[block != b].mean() for b in range(JACKKNIFE_BLOCKS)])
    theta = xs.mean()
    z0 = stats.norm.ppf((np.sum(reps < theta) + 0.5 * np.sum(reps == theta)) / R)
    d = jack.mean() - jack
    acc = np.sum(d ** 3) / (6 * np.sum(d ** 2) ** 1.5)
    levels = [stats.norm.cdf(z0 + (z0 + zq) / (1 - acc * (z0 + zq))) for zq in stats.norm.ppf([0.025, 0.975])]
    want = np.quantile(reps, levels)
    got = [float(out["ci_low"]), float(out["ci_high"])]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    sp = stats.bootstrap((xs,), np.mean, method="BCa", n_resamples=R, random_state=0).confidence_interval
    width = sp.high - sp.low
    assert abs(got[0] - sp.low) < 0.1 * width and abs(got[1] - sp.high) < 0.1 * width, (got, sp)
    pct = W.confidence_interval(fm.mean(), num_samples=R, seed=1, sample_ids=True)(ids, x)
    assert got[1] > float(pct["ci_high"])  # right-skewed data: BCa shifts the interval up


# ---------------------------------------------------------------- calibration (measured, reported)

def _rejections(make_test, sims, n, effect, alpha=0.05):
    rejected = 0
    for i in range(sims):
        g = torch.Generator().manual_seed(10_000 + i)
        t = torch.randint(0, 2, (n,), generator=g)
        # two systems with equal accuracy 0.75 in expectation (+ effect for B), errors independent per sample
        a = torch.where(torch.rand(n, generator=g) < 0.75, t, 1 - t)
        b = torch.where(torch.rand(n, generator=g) < 0.75 + effect, t, 1 - t)
        rejected += float(make_test(i)(a, b, t)["p_value"]) < alpha
    return rejected / sims


@pytest.mark.slow
@pytest.mark.parametrize("wrapper", ["paired_bootstrap", "permutation_test"])
def test_calibration_under_null_and_power(wrapper):
    """500 null pairs: the rejection rate is alpha within binomial error; a true difference is detected more."""
    def make(i):
        if wrapper == "paired_bootstrap":
            return W.paired_bootstrap(fm.binary_accuracy(), num_samples=300, seed=i)
        return W.permutation_test(fm.binary_accuracy(), num_permutations=300, seed=i)

    null = _rejections(make, 500, 200, 0.0)
    power = _rejections(make, 100, 200, 0.1)
    print(f"{wrapper}: rejection rate at alpha=0.05 under the null {null:.3f} (500 pairs), power at +0.1 {power:.2f}")
    assert 0.025 <= null <= 0.08, null
    assert power > 0.4, power


# ---------------------------------------------------------------- retrieval: whole queries

def _ranked(seed):
    g = torch.Generator().manual_seed(seed)
    per = torch.randint(3, 9, (40,), generator=g)
    idx = torch.repeat_interleave(torch.arange(40) * 7 + 2, per)
    t = torch.randint(0, 3, (idx.numel(),), generator=g)
    t[torch.cumsum(per, 0) - 1] = 1  # every query has a relevant document
    a = torch.rand(idx.numel(), generator=g)
    return a, a + 0.3 * t * torch.rand(idx.numel(), generator=g), t, idx


def _per_query_ndcg(p, t, idx, k=5):
    return np.array([skm.ndcg_score([_np(t[idx == q])], [_np(p[idx == q])], k=k) for q in torch.unique(idx)])


@pytest.mark.parametrize("test", ["bootstrap", "permutation"])
def test_retrieval_resamples_whole_queries(test):
    """NDCG@5: a replicate is the mean over queries weighted by each query's draw (sklearn's per-query NDCG)."""
    a, b, t, idx = _ranked(0)
    R, seed = 30, 2
    if test == "bootstrap":
        m = W.paired_bootstrap(fm.retrieval_normalized_dcg(top_k=5), num_samples=R, seed=seed)
    else:
        m = W.permutation_test(fm.retrieval_normalized_dcg(top_k=5), num_permutations=R, seed=seed)
    order = torch.randperm(idx.numel(), generator=torch.Generator().manual_seed(1))  # queries split across batches
    s = m.init()
    for part in order.tensor_split(3):
        s = m.update(s, a[part], b[part], t[part], idx[part])
    out = m.finalize(s)
    qa, qb = _per_query_ndcg(a, t, idx), _per_query_ndcg(b, t, idx)
    keys = _draws_np.id_keys(seed, torch.unique(idx))
    delta = qb.mean() - qa.mean()
    np.testing.assert_allclose(float(out["delta"]), delta, rtol=1e-9)
    if test == "bootstrap":
        c = _draws_np.poisson_counts(keys, R)
        d = np.array([(w @ qb - w @ qa) / w.sum() for w in c])
        np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])], np.quantile(d, [0.025, 0.975]),
                                   rtol=1e-9)
        p = crossing_p(d)
    else:
        s_ = swap_bits_np(keys, R).astype(bool)
        d = np.array([np.where(w, qa, qb).mean() - np.where(w, qb, qa).mean() for w in s_])
        p = (np.sum(np.abs(d) >= abs(delta) - 1e-9) + 1) / (R + 1)
    np.testing.assert_allclose(float(out["p_value"]), p, rtol=1e-9)
    with pytest.raises(ValueError, match="paired_bootstrap.*sample_ids.*retrieval"):
        W.paired_bootstrap(fm.retrieval_normalized_dcg(), sample_ids=True)


@pytest.mark.parametrize("block", [0, 1], ids=["custom-loop", "lightning"])
def test_docs_examples_run(block):
    """docs/comparing.md's examples run as written."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "comparing.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, flags=re.S)[block]
    if block == 1:
        pytest.importorskip("lightning")
    exec(compile(code, f"docs/comparing.md[{block}]", "exec"), {"__name__": "docs_example"})


def test_proportion_intervals_match_statsmodels():
    """statsmodels' proportion_confint (wilson, beta = Clopper-Pearson) as a second oracle."""
    proportion = pytest.importorskip("statsmodels.stats.proportion")
    g = torch.Generator().manual_seed(7)
    t = torch.rand(257, generator=g) < 0.5
    p = torch.where(torch.rand(257, generator=g) < 0.8, t, ~t)
    k, n = int((p & t).sum()), int((p & t).sum() + (~p & t).sum())  # recall: tp / (tp + fn)
    for method, sm in (("wilson", "wilson"), ("clopper_pearson", "beta")):
        out = W.confidence_interval(fm.binary_recall(), method=method, alpha=0.01)(p.long(), t.long())
        np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])],
                                   proportion.proportion_confint(k, n, alpha=0.01, method=sm), rtol=1e-9)


# ---------------------------------------------------------------- 3 gloo ranks, uneven shards

def _compare_metrics():
    return {
        "boot_auroc": W.paired_bootstrap(fm.binary_auroc(), num_samples=40, sample_ids=True, seed=5),
        "perm_acc": W.permutation_test(fm.binary_accuracy(), num_permutations=60, sample_ids=True, seed=6),
        "perm_auroc": W.permutation_test(fm.binary_auroc(), num_permutations=60, sample_ids=True, seed=9),  # chunks
        "ndcg": W.paired_bootstrap(fm.retrieval_normalized_dcg(top_k=5), num_samples=50, seed=7),
        "bca": W.confidence_interval(fm.mean_squared_error(), interval="bca", num_samples=40, sample_ids=True),
    }


def _ranks_body(rank, world):
    from adapters.distributed import reduce

    a, b, t = _data(301, 8)
    ids = torch.randperm(301, generator=torch.Generator().manual_seed(1)) * 3
    qa, qb, qt, qidx = _ranked(3)
    cuts, qcuts = [0, 40, 40, 301], [0, 150, 151, qidx.numel()]  # uneven; rank 1 empty for the classifiers
    lo, hi = cuts[rank], cuts[rank + 1]
    out = {}
    for key, m in _compare_metrics().items():
        s = m.init()
        if key == "ndcg":
            s = m.update(s, qa[qcuts[rank]:qcuts[rank + 1]], qb[qcuts[rank]:qcuts[rank + 1]],
                         qt[qcuts[rank]:qcuts[rank + 1]], qidx[qcuts[rank]:qcuts[rank + 1]])
        elif key == "bca":
            s = m.update(s, ids[lo:hi], a[lo:hi], t[lo:hi].double())
        else:
            for start in range(lo, hi, 64):
                end = min(start + 64, hi)
                s = m.update(s, ids[start:end], a[start:end], b[start:end], t[start:end])
        out[key] = m.finalize(reduce(m, s))
    return out


@pytest.mark.distributed
def test_three_ranks_uneven_shards_equal_one_process():
    from tests._dist import spawn

    results = spawn(_ranks_body, 3, timeout=240)
    a, b, t = _data(301, 8)
    ids = torch.randperm(301, generator=torch.Generator().manual_seed(1)) * 3
    qa, qb, qt, qidx = _ranked(3)
    for key, m in _compare_metrics().items():
        if key == "ndcg":
            want = m(qa, qb, qt, qidx)
        elif key == "bca":
            want = m(ids, a, t.double())
        else:
            want = m(ids, a, b, t)
        for r in range(3):
            fm.testing.assert_values_close(results[r][key], want, 1e-12, 1e-12, f"rank {r} {key}")


def test_deferred_bad_labels_counted_per_replicate_and_reported_with_the_true_count():
    """Deferred bad labels: replicate r's record counts the offending rows weighted by its draws (the same
    Poisson counts written again in NumPy), one call each; finalize reports the plain state's true count."""
    g = torch.Generator().manual_seed(12)
    ids, p = torch.arange(40) * 7, torch.rand(40, 4, generator=g)
    t = torch.randint(0, 4, (40,), generator=g)
    t[[5, 17, 30]] = torch.tensor([9, 6, 8])
    R, seed = 50, 3
    m = W.paired_bootstrap(fm.multiclass_accuracy(num_classes=4, average="micro"), num_samples=R, seed=seed,
                           sample_ids=True)
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), ids[:20], p[:20], p[:20].flip(1), t[:20])
        s = m.update(s, ids[20:], p[20:], p[20:].flip(1), t[20:])
    c = _draws_np.poisson_counts(_draws_np.id_keys(seed, ids), R)  # (R, 40)
    bad = np.isin(np.arange(40), [5, 17, 30])
    for reps in (s.reps_a, s.reps_b):
        np.testing.assert_array_equal(reps.invalid.count.numpy(), c[:, bad].sum(1))
        np.testing.assert_array_equal(reps.invalid.calls.numpy(), np.full(R, 2))
        drew = c[:, bad].sum(1) > 0
        np.testing.assert_array_equal(reps.invalid.call.numpy(), np.where(c[:, 5] + c[:, 17] > 0, 1,
                                                                          np.where(drew, 2, 0)))
    assert int(s.a.invalid.count) == 3
    with pytest.raises(ValueError, match="multiclass_accuracy.*3 input entries.*the first was 9"):
        m.finalize(s)


# ---------------------------------------------------------------- detection per image, audio per signal

def _detections(n, seed):
    """``n`` images of 1-4 boxes in 2 classes; system B's boxes closer to the truth than A's."""
    g = torch.Generator().manual_seed(seed)
    preds_a, preds_b, target = [], [], []
    for _ in range(n):
        k = int(torch.randint(1, 5, (1,), generator=g))
        xy = torch.rand(k, 2, generator=g) * 60
        gt = torch.cat([xy, xy + 8 + torch.rand(k, 2, generator=g) * 30], 1)
        labels = torch.randint(0, 2, (k,), generator=g)
        target.append({"boxes": gt, "labels": labels})
        for preds, err in ((preds_a, 9.0), (preds_b, 4.0)):
            shrink = torch.rand(k, 4, generator=g) * err * torch.tensor([1.0, 1.0, -1.0, -1.0]) / 2
            corner = torch.rand(1, 2, generator=g) * 60
            extra = torch.cat([corner, corner + 10], 1)  # a false positive (or a lucky hit)
            preds.append({"boxes": torch.cat([gt + shrink, extra]), "scores": torch.rand(k + 1, generator=g),
                          "labels": torch.cat([labels, torch.randint(0, 2, (1,), generator=g)])})
    return preds_a, preds_b, target


def _coco_map(preds, target):
    from tests.cases.detection import coco_reference

    return coco_reference(preds, target, box_format="xyxy")[0][0]


@pytest.mark.parametrize("test", ["bootstrap", "permutation"])
def test_detection_map_resampled_per_image(test):
    """mAP per image: replicate r is the images repeated (or swapped) by the same draws, scored by pycocotools."""
    pa, pb, t = _detections(12, 0)
    R, seed = 12, 5
    ids = torch.arange(12) * 3 + 1
    if test == "bootstrap":
        m = W.paired_bootstrap(fm.mean_average_precision(), num_samples=R, seed=seed, sample_ids=True)
    else:
        m = W.permutation_test(fm.mean_average_precision(), num_permutations=R, seed=seed, sample_ids=True)
    s = m.update(m.init(), ids[:5], pa[:5], pb[:5], t[:5])
    s = m.merge(s, m.update(m.init(), ids[5:], pa[5:], pb[5:], t[5:]))
    out = m.finalize(s)["map"]
    va, vb = _coco_map(pa, t), _coco_map(pb, t)
    keys = _draws_np.id_keys(seed, ids)
    if test == "bootstrap":
        c = _draws_np.poisson_counts(keys, R)
        rep = lambda p, w: _coco_map([x for x, k in zip(p, w) for _ in range(k)],  # noqa: E731
                                     [x for x, k in zip(t, w) for _ in range(k)])
        d = np.array([rep(pb, w) - rep(pa, w) for w in c])
        np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])], np.quantile(d, [0.025, 0.975]),
                                   rtol=1e-9, atol=1e-12)
        p = crossing_p(d)
    else:
        swap = swap_bits_np(keys, R).astype(bool)
        d = np.array([_coco_map([x if s_ else y for x, y, s_ in zip(pa, pb, w)], t)
                      - _coco_map([y if s_ else x for x, y, s_ in zip(pa, pb, w)], t) for w in swap])
        p = (np.sum(np.abs(d) >= abs(vb - va) - 1e-9) + 1) / (R + 1)
    np.testing.assert_allclose([float(out["a"]), float(out["b"])], [va, vb], rtol=1e-9)
    np.testing.assert_allclose(float(out["p_value"]), p, rtol=1e-9)
    assert np.ptp(d) > 0 and 0 < vb - va  # replicates differ; B is better


def _si_sdr(p, t):
    alpha = (p * t).sum(-1, keepdims=True) / (t * t).sum(-1, keepdims=True)
    return 10 * np.log10(((alpha * t) ** 2).sum(-1) / ((alpha * t - p) ** 2).sum(-1))


@pytest.mark.parametrize("test", ["bootstrap", "permutation"])
def test_audio_si_sdr_resampled_per_signal(test):
    """SI-SDR per signal (the published formula by hand): replicate means over the same draws."""
    g = torch.Generator().manual_seed(3)
    target = torch.randn(50, 400, generator=g, dtype=torch.float64)
    level = 0.3 + 0.7 * torch.rand(2, 50, 1, generator=g, dtype=torch.float64)  # noise levels vary per signal
    a = target + level[0] * torch.randn(50, 400, generator=g, dtype=torch.float64)
    b = target + level[1] * torch.randn(50, 400, generator=g, dtype=torch.float64)
    R, seed = 200, 8
    ids = torch.arange(50) + 100
    if test == "bootstrap":
        m = W.paired_bootstrap(fm.scale_invariant_signal_distortion_ratio(), num_samples=R, seed=seed,
                               sample_ids=True)
    else:
        m = W.permutation_test(fm.scale_invariant_signal_distortion_ratio(), num_permutations=R, seed=seed,
                               sample_ids=True)
    s = m.init()
    for lo, hi in ((0, 17), (17, 18), (18, 50)):
        s = m.update(s, ids[lo:hi], a[lo:hi], b[lo:hi], target[lo:hi])
    out = m.finalize(s)
    sa, sb = _si_sdr(a.numpy(), target.numpy()), _si_sdr(b.numpy(), target.numpy())
    keys = _draws_np.id_keys(seed, ids)
    if test == "bootstrap":
        c = _draws_np.poisson_counts(keys, R)
        d = (c @ sb - c @ sa) / c.sum(1)
        np.testing.assert_allclose([float(out["ci_low"]), float(out["ci_high"])], np.quantile(d, [0.025, 0.975]),
                                   rtol=1e-9)
        p = crossing_p(d)
    else:
        swap = swap_bits_np(keys, R).astype(bool)
        d = np.where(swap, sa, sb).mean(1) - np.where(swap, sb, sa).mean(1)
        p = (np.sum(np.abs(d) >= abs(sb.mean() - sa.mean()) - 1e-9) + 1) / (R + 1)
    np.testing.assert_allclose([float(out["a"]), float(out["b"])], [sa.mean(), sb.mean()], rtol=1e-9)
    np.testing.assert_allclose(float(out["p_value"]), p, rtol=1e-9)
    assert 1 / (R + 1) < p < 1  # an informative comparison, not a boundary value


def test_detection_per_class_keys_whose_classes_vary_are_left_out():
    """A class seen in one image only: replicates that did not draw it have shorter per-class values; those keys
    are left out with a warning, the overall keys stay (and an empty stream gives the metric's fallback)."""
    pa, pb, t = _detections(10, 1)
    for d in (t[0], pa[0], pb[0]):
        d["labels"] = torch.full_like(d["labels"], 5)
    m = W.paired_bootstrap(fm.mean_average_precision(class_metrics=True), num_samples=20)
    with pytest.warns(UserWarning, match=r"paired_bootstrap: \['classes', 'map_per_class', 'mar_100_per_class'\]"):
        out = m(pa, pb, t)
    assert "classes" not in out and float(out["map"]["a"]) == pytest.approx(_coco_map(pa, t), rel=1e-9)
