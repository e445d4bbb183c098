"""Regression metrics: parity with scikit-learn / SciPy / torchmetrics, edge cases and bad input.

The law suite (tests/cases/regression.py) already checks every factory against
an oracle on small batched data; here: larger randomized inputs, every option
against torchmetrics, the edge cases of the issue (constant targets, zeros in
MAPE targets, a single sample) and the validation rules.
"""
import warnings

import numpy as np
import pytest
import scipy.stats as ss
import sklearn.metrics as skm
import torch
import torchmetrics.functional.regression as tmf

import fmetrics as fm
from fmetrics.testing import check_metric


def _data(n=500, d=None, seed=0, kind="normal"):
    g = torch.Generator().manual_seed(seed)
    shape = (n,) if d is None else (n, d)
    t = torch.randn(shape, generator=g) * 3 + 2
    p = 0.8 * t + torch.randn(shape, generator=g)
    if kind == "positive":
        t, p = t.abs() + 0.05, p.abs() + 0.05
    elif kind == "ties":
        t, p = torch.round(t), torch.round(p / 2)
    return p, t


def _np(x):
    return x.double().numpy()


def _batched(metric, *inputs, pieces=4):
    """The value after streaming ``inputs`` in ``pieces`` uneven batches."""
    n = inputs[0].shape[0]
    cuts = [0, n // 7, n // 2, n // 2 + 1, n]
    s = metric.init()
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        s = metric.update(s, *(x[lo:hi] for x in inputs))
    return metric.finalize(s)


def close(actual, expected, rtol=1e-9, atol=1e-12):
    torch.testing.assert_close(torch.as_tensor(actual).double(), torch.as_tensor(np.asarray(expected)).double(),
                               rtol=rtol, atol=atol, equal_nan=True)


# The metrics with an ``exact`` option run twice: ``exact=True`` to 1e-9, the default (a batch's arithmetic in
# float32, running sums in float64) to 1e-6 relative or 1e-7 absolute: a score near 0 (explained variance 0.017
# below, where preds near 0 meet targets near 1e4: the float32 residual rounds at 6e-4) has no relative precision.
FAST = {"mean_squared_error", "mean_absolute_error", "r2_score", "explained_variance", "relative_squared_error",
        "pearson_corrcoef", "concordance_corrcoef"}


def modes(name):
    """``(kwargs, rtol, atol)`` per precision mode of the factory ``name``."""
    return [({"exact": True}, 1e-9, 1e-12), ({}, 1e-6, 1e-7)] if name in FAST else [({}, 1e-9, 1e-12)]


# ------------------------------------------------------------------ randomized parity (float64 oracles)

SKLEARN = [
    ("mean_squared_error", {}, skm.mean_squared_error, {}, "normal"),
    ("mean_squared_error", {"squared": False}, skm.root_mean_squared_error, {}, "normal"),
    ("mean_absolute_error", {}, skm.mean_absolute_error, {}, "normal"),
    ("mean_squared_log_error", {}, skm.mean_squared_log_error, {}, "positive"),
    ("mean_absolute_percentage_error", {}, skm.mean_absolute_percentage_error, {}, "normal"),
    ("r2_score", {}, skm.r2_score, {}, "normal"),
    ("explained_variance", {}, skm.explained_variance_score, {}, "normal"),
    ("tweedie_deviance_score", {"power": 1.0}, skm.mean_tweedie_deviance, {"power": 1.0}, "positive"),
    ("tweedie_deviance_score", {"power": 2.0}, skm.mean_tweedie_deviance, {"power": 2.0}, "positive"),
    ("tweedie_deviance_score", {"power": 1.3}, skm.mean_tweedie_deviance, {"power": 1.3}, "positive"),
]


@pytest.mark.parametrize("name,kw,oracle,okw,kind", SKLEARN, ids=[f"{s[0]}-{s[1]}" for s in SKLEARN])
@pytest.mark.parametrize("seed", [0, 1])
def test_sklearn_parity(name, kw, oracle, okw, kind, seed):
    p, t = _data(seed=seed, kind=kind)
    for extra, rtol, atol in modes(name):
        close(_batched(getattr(fm, name)(**kw, **extra), p, t), oracle(_np(t), _np(p), **okw), rtol, atol)


MULTIOUTPUT = [
    ("mean_squared_error", {}, skm.mean_squared_error, {"multioutput": "raw_values"}),
    ("mean_absolute_error", {}, skm.mean_absolute_error, {"multioutput": "raw_values"}),
    ("mean_absolute_percentage_error", {}, skm.mean_absolute_percentage_error, {"multioutput": "raw_values"}),
    *[("r2_score", {"multioutput": m}, skm.r2_score, {"multioutput": m})
      for m in ("raw_values", "uniform_average", "variance_weighted")],
    *[("explained_variance", {"multioutput": m}, skm.explained_variance_score, {"multioutput": m})
      for m in ("raw_values", "uniform_average", "variance_weighted")],
]


@pytest.mark.parametrize("name,kw,oracle,okw", MULTIOUTPUT, ids=[f"{s[0]}-{s[1]}" for s in MULTIOUTPUT])
def test_sklearn_parity_multioutput(name, kw, oracle, okw):
    p, t = _data(d=4, seed=3)
    t[:, 2] = t[:, 2] * 100 + 1e4  # very different scales per output
    for extra, rtol, atol in modes(name):
        close(_batched(getattr(fm, name)(num_outputs=4, **kw, **extra), p, t), oracle(_np(t), _np(p), **okw), rtol,
              atol)


def _per_column(fn, p, t):
    return np.array([fn(_np(p[:, j]), _np(t[:, j])) for j in range(p.shape[1])])


@pytest.mark.parametrize("kind", ["normal", "ties"])
def test_correlations_scipy_multioutput(kind):
    p, t = _data(n=400, d=3, seed=4, kind=kind)
    for extra, rtol, atol in modes("pearson_corrcoef"):
        close(_batched(fm.pearson_corrcoef(num_outputs=3, **extra), p, t),
              _per_column(lambda x, y: ss.pearsonr(x, y)[0], p, t), rtol, atol)
    close(_batched(fm.spearman_corrcoef(num_outputs=3), p, t), _per_column(lambda x, y: ss.spearmanr(x, y)[0], p, t))
    for variant in ("b", "c"):
        for alt in ("two-sided", "less", "greater"):
            m = fm.kendall_rank_corrcoef(variant=variant, t_test=True, alternative=alt, num_outputs=3)
            tau, pv = _batched(m, p, t)
            ref = [ss.kendalltau(_np(p[:, j]), _np(t[:, j]), variant=variant, method="asymptotic", alternative=alt)
                   for j in range(3)]
            close(tau, [r.statistic for r in ref])
            close(pv, [r.pvalue for r in ref], rtol=1e-7)


def test_kendall_large_with_ties_matches_scipy():
    """The O(n log^2 n) pair counting (padding to a power of two) on 3001 pairs."""
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, 40, (3001,), generator=g).float()
    y = x + torch.randint(-20, 20, (3001,), generator=g).float()
    close(fm.kendall_rank_corrcoef()(x, y), ss.kendalltau(_np(x), _np(y)).statistic)
    close(fm.kendall_rank_corrcoef(variant="c")(x, y), ss.kendalltau(_np(x), _np(y), variant="c").statistic)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])  # packed numpy sort / torch sort
def test_spearman_ranks_match_scipy_rankdata(dtype):
    from fmetrics.regression._pairs import average_ranks

    p, _ = _data(n=300, d=2, seed=6, kind="ties")
    p[:7, 0] = -p[:7, 0]  # negatives, including -0.0 next to 0.0
    p[7, 1], p[8, 1] = -0.0, 0.0
    p = p.to(dtype)
    close(average_ranks(p), np.stack([ss.rankdata(_np(p[:, j])) for j in range(2)], 1), rtol=0, atol=0)
    q = torch.tensor([[float("inf")], [-float("inf")], [3.0], [-3.0], [3.0]], dtype=torch.float64).to(dtype) \
        if dtype != torch.int64 else torch.tensor([[5], [-5], [3], [-3], [3]])
    close(average_ranks(q), ss.rankdata(_np(q[:, 0]))[:, None], rtol=0, atol=0)


# ------------------------------------------------------------------ every option against torchmetrics

TM = [
    ("mean_squared_error", {"squared": False, "num_outputs": 3}, {"squared": False, "num_outputs": 3}, "normal", 3),
    ("mean_absolute_error", {"num_outputs": 3}, {"num_outputs": 3}, "normal", 3),
    ("mean_squared_log_error", {}, {}, "positive", None),
    ("mean_absolute_percentage_error", {}, {}, "normal", None),
    ("symmetric_mean_absolute_percentage_error", {}, {}, "normal", None),
    ("weighted_mean_absolute_percentage_error", {}, {}, "normal", None),
    *[("normalized_root_mean_squared_error", {"normalization": k, "num_outputs": 2},
       {"normalization": k, "num_outputs": 2}, "normal", 2) for k in ("mean", "range", "std", "l2")],
    ("r2_score", {"adjusted": 5}, {"adjusted": 5}, "normal", None),
    *[("r2_score", {"multioutput": m, "num_outputs": 3}, {"multioutput": m}, "normal", 3)
      for m in ("raw_values", "uniform_average", "variance_weighted")],
    *[("explained_variance", {"multioutput": m, "num_outputs": 3}, {"multioutput": m}, "normal", 3)
      for m in ("raw_values", "uniform_average", "variance_weighted")],
    ("relative_squared_error", {"squared": False}, {"squared": False}, "normal", None),
    ("pearson_corrcoef", {"num_outputs": 2}, {}, "normal", 2),
    ("concordance_corrcoef", {"num_outputs": 2}, {}, "normal", 2),
    ("spearman_corrcoef", {"num_outputs": 2}, {}, "ties", 2),
    *[("kendall_rank_corrcoef", {"variant": v, "t_test": True, "alternative": a, "num_outputs": 2},
       {"variant": v, "t_test": True, "alternative": a}, "ties", 2)
      for v in ("a", "b", "c") for a in ("two-sided", "less", "greater")],
    ("log_cosh_error", {"num_outputs": 2}, {}, "normal", 2),
    ("minkowski_distance", {"p": 2.5}, {"p": 2.5}, "normal", None),
    *[("tweedie_deviance_score", {"power": k}, {"power": k}, "positive", None)
      for k in (0.0, 1.0, 1.5, 2.0, 3.0, -0.5)],
    *[("critical_success_index", {"threshold": 2.0, "keep_sequence_dim": k}, {"threshold": 2.0, "keep_sequence_dim": k},
       "normal", 3) for k in (None, 0, 1)],
]


@pytest.mark.parametrize("name,kw,tkw,kind,d", TM, ids=[f"{s[0]}-{s[1]}" for s in TM])
def test_torchmetrics_parity(name, kw, tkw, kind, d):
    p, t = _data(n=200, d=d, seed=7, kind=kind)
    want = getattr(tmf, name)(p, t, **tkw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on well-posed data
        got = getattr(fm, name)(**kw)(p, t)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            torch.testing.assert_close(g.float(), w.float(), rtol=2e-4, atol=1e-6)
    else:
        torch.testing.assert_close(got.float(), want.float(), rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("reduction", ["sum", "mean", "none", None])
@pytest.mark.parametrize("log_prob", [False, True])
def test_divergences_and_cosine_vs_torchmetrics(reduction, log_prob):
    g = torch.Generator().manual_seed(8)
    p, q = torch.rand(64, 6, generator=g), torch.rand(64, 6, generator=g)
    if log_prob:
        p, q = torch.log_softmax(p * 4, 1), torch.log_softmax(q * 4, 1)
    for name in ("kl_divergence", "jensen_shannon_divergence"):
        want = getattr(tmf, name)(p, q, log_prob=log_prob, reduction=reduction)
        got = _batched(getattr(fm, name)(log_prob=log_prob, reduction=reduction), p, q)
        torch.testing.assert_close(got.float(), want, rtol=1e-5, atol=1e-6)
    want = tmf.cosine_similarity(p, q, reduction=reduction)
    torch.testing.assert_close(_batched(fm.cosine_similarity(reduction=reduction), p, q).float(), want,
                               rtol=1e-5, atol=1e-6)


def test_crps_vs_torchmetrics_and_bruteforce():
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(300, 11, generator=g), torch.randn(300, generator=g) * 2
    xd, yd = _np(x), _np(y)
    brute = np.mean(np.abs(xd - yd[:, None]).mean(1) - np.abs(xd[:, :, None] - xd[:, None, :]).sum((1, 2)) / 242)
    close(_batched(fm.continuous_ranked_probability_score(), x, y), brute)
    torch.testing.assert_close(fm.continuous_ranked_probability_score()(x, y).float(),
                               tmf.continuous_ranked_probability_score(x, y), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ edge cases

@pytest.mark.parametrize("limit", [0, 10**9], ids=["two-buffers", "stacked"])
def test_moment_updates_both_layouts(monkeypatch, limit):
    """Pearson / R² / explained variance updates on both batch layouts of ``exact=True`` (`_moments.STACK_LIMIT`),
    and the default's torch path, gradients included."""
    from fmetrics.regression import _moments

    monkeypatch.setattr(_moments, "STACK_LIMIT", limit)
    p, t = _data(n=3000, d=4, seed=21)
    t[:, 2] = t[:, 2] * 100 + 1e4
    for extra, rtol, atol in modes("pearson_corrcoef"):
        close(_batched(fm.pearson_corrcoef(num_outputs=4, **extra), p, t),
              _per_column(lambda x, y: ss.pearsonr(x, y)[0], p, t), rtol, atol)
        for name, oracle in (("r2_score", skm.r2_score), ("explained_variance", skm.explained_variance_score)):
            got = _batched(getattr(fm, name)(multioutput="raw_values", num_outputs=4, **extra), p, t)
            close(got, oracle(_np(t), _np(p), multioutput="raw_values"), rtol, atol)
    for name in ("pearson_corrcoef", "r2_score"):
        x = p[:, 0].clone().requires_grad_(True)
        getattr(fm, name)()(x, t[:, 0]).backward()
        want = x.detach().clone().requires_grad_(True)
        getattr(tmf, name)(want, t[:, 0]).backward()
        torch.testing.assert_close(x.grad, want.grad, rtol=1e-4, atol=1e-7)
    laws_batches = [(p[a:b, :3], t[a:b, :3]) for a, b in ((0, 5), (5, 22), (22, 23), (23, 53))]
    for name in ("pearson_corrcoef", "r2_score"):  # vmap / compile / purity on this layout too
        check_metric(getattr(fm, name)(num_outputs=3), laws_batches, seed=0)


UNDEFINED_ON_CONSTANT = ["r2_score", "explained_variance", "relative_squared_error", "pearson_corrcoef",
                         "concordance_corrcoef", "spearman_corrcoef", "kendall_rank_corrcoef"]


@pytest.mark.parametrize("name", UNDEFINED_ON_CONSTANT)
def test_constant_target_is_nan_with_warning(name):
    p, _ = _data(n=50, seed=10)
    t = torch.full((50,), 3.7)  # not exactly representable: the batch means must still see a constant
    m = getattr(fm, name)()
    with pytest.warns(UserWarning, match="constant"):
        value = _batched(m, p, t)
    assert torch.isnan(value)


def test_constant_target_matches_torchmetrics_for_pearson():
    p, _ = _data(n=50, seed=10)
    t = torch.full((50,), 3.0)
    with pytest.warns(UserWarning):
        assert torch.isnan(tmf.pearson_corrcoef(p, t))
    with pytest.warns(UserWarning):
        assert torch.isnan(fm.pearson_corrcoef()(p, t))
    # torchmetrics' float32 mean of 3.7 rounds, so it reports r ~ 5e-8 there; fmetrics still sees a constant
    t = torch.full((50,), 3.7)
    assert not torch.isnan(tmf.pearson_corrcoef(p, t))
    with pytest.warns(UserWarning):
        assert torch.isnan(fm.pearson_corrcoef()(p, t))


def test_constant_float64_target_detected_despite_rounding():
    p = torch.randn(1000, dtype=torch.float64)
    t = torch.full((1000,), 0.1, dtype=torch.float64)  # 0.1 * 1000 / 1000 rounds: M2 is tiny, not 0
    with pytest.warns(UserWarning, match="constant"):
        assert torch.isnan(_batched(fm.r2_score(), p, t))


def test_constant_output_among_several():
    p, t = _data(n=80, d=3, seed=11)
    t[:, 1] = 5.0
    with pytest.warns(UserWarning, match="1 of 3 outputs"):
        raw = fm.r2_score(multioutput="raw_values", num_outputs=3)(p, t)
    assert torch.isnan(raw[1])
    keep = [0, 2]
    close(raw[keep], skm.r2_score(_np(t[:, keep]), _np(p[:, keep]), multioutput="raw_values"), 1e-6, 1e-7)
    with pytest.warns(UserWarning):
        weighted = fm.r2_score(multioutput="variance_weighted", num_outputs=3)(p, t)
    # scikit-learn gives the constant output weight Var = 0 as well
    close(weighted, skm.r2_score(_np(t), _np(p), multioutput="variance_weighted"), 1e-6, 1e-7)
    with pytest.warns(UserWarning):
        pearson = fm.pearson_corrcoef(num_outputs=3)(p, t)
    assert torch.isnan(pearson[1]) and not torch.isnan(pearson[[0, 2]]).any()


def test_mape_zero_targets():
    p = torch.tensor([0.5, 1.0, 2.0, 0.0, 3.0])
    t = torch.tensor([0.0, 1.0, 0.0, 0.0, 2.0])
    hand = np.mean([0.5 / 1.17e-6, 0.0, 2.0 / 1.17e-6, 0.0, 0.5])
    close(fm.mean_absolute_percentage_error()(p, t), hand)
    torch.testing.assert_close(fm.mean_absolute_percentage_error()(p, t).float(),
                               tmf.mean_absolute_percentage_error(p, t))
    # SMAPE: 0/0 is clamped to 0; WMAPE with an all-zero target divides by the clamp
    close(fm.symmetric_mean_absolute_percentage_error()(p, t), np.mean([2.0, 0.0, 2.0, 0.0, 0.4]))
    close(fm.weighted_mean_absolute_percentage_error()(p, torch.zeros(5)), 6.5 / 1.17e-6)


def test_single_sample():
    p, t = torch.tensor([2.5]), torch.tensor([3.0])
    close(fm.mean_squared_error()(p, t), skm.mean_squared_error([3.0], [2.5]))
    close(fm.mean_absolute_error()(p, t), 0.5)
    close(fm.mean_absolute_percentage_error()(p, t), skm.mean_absolute_percentage_error([3.0], [2.5]))
    close(fm.mean_squared_log_error()(p, t), skm.mean_squared_log_error([3.0], [2.5]))
    for name in UNDEFINED_ON_CONSTANT:
        with pytest.warns(UserWarning):
            assert torch.isnan(getattr(fm, name)()(p, t)), name
    with pytest.warns(skm._regression.UndefinedMetricWarning):
        assert np.isnan(skm.r2_score([3.0], [2.5]))


def test_adjusted_r2_fallback_warns():
    p, t = _data(n=6, seed=12)
    with pytest.warns(UserWarning, match="adjusted"):
        value = fm.r2_score(adjusted=5)(p, t)
    close(value, skm.r2_score(_np(t), _np(p)), 1e-6, 1e-7)


def test_empty_state_is_nan_not_an_error():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.isnan(fm.mean_squared_error().finalize(fm.mean_squared_error().init()))
        assert torch.isnan(fm.pearson_corrcoef().finalize(fm.pearson_corrcoef().init()))
        assert torch.isnan(fm.spearman_corrcoef().finalize(fm.spearman_corrcoef().init()))
        assert torch.isnan(fm.kendall_rank_corrcoef().finalize(fm.kendall_rank_corrcoef().init()))


def test_nan_input_gives_nan_rank_correlation():
    p, t = _data(n=20, seed=13)
    p[3] = float("nan")
    assert torch.isnan(fm.spearman_corrcoef(nan_strategy="disable")(p, t))
    assert torch.isnan(fm.kendall_rank_corrcoef(nan_strategy="disable")(p, t))


def test_log_cosh_does_not_overflow():
    p, t = torch.tensor([200.0, -300.0]), torch.tensor([0.0, 0.0])
    close(fm.log_cosh_error()(p, t), np.mean([200 - np.log(2), 300 - np.log(2)]))


# ------------------------------------------------------------------ bad input

def test_shape_mismatch_raises_at_once_and_keeps_the_state():
    m = fm.mean_squared_error()
    s = m.update(m.init(), torch.ones(4), torch.zeros(4))
    with pytest.raises(ValueError, match="mean_squared_error.*target.*shape"):
        m.update(s, torch.ones(4), torch.zeros(5))
    assert float(m.finalize(s)) == 1.0


@pytest.mark.parametrize("name", ["mean_squared_error", "r2_score", "pearson_corrcoef", "spearman_corrcoef",
                                  "explained_variance", "log_cosh_error", "normalized_root_mean_squared_error"])
def test_num_outputs_disagreeing_with_data_raises(name):
    m = getattr(fm, name)(num_outputs=3)
    with pytest.raises(ValueError, match="num_outputs=3"):
        m.update(m.init(), torch.ones(5, 2), torch.ones(5, 2))
    with pytest.raises(ValueError, match="num_outputs=3"):
        m.update(m.init(), torch.ones(5), torch.ones(5))


@pytest.mark.parametrize("name", ["r2_score", "pearson_corrcoef", "spearman_corrcoef", "kendall_rank_corrcoef",
                                  "concordance_corrcoef", "explained_variance", "relative_squared_error"])
def test_two_d_data_needs_num_outputs(name):
    m = getattr(fm, name)()
    with pytest.raises(ValueError, match="num_outputs"):
        m.update(m.init(), torch.ones(5, 2), torch.ones(5, 2))


@pytest.mark.parametrize("factory,kwargs", [
    (fm.mean_squared_error, {"num_outputs": 0}),
    (fm.mean_squared_error, {"squared": "no"}),
    (fm.r2_score, {"adjusted": -1}),
    (fm.r2_score, {"multioutput": "mean"}),
    (fm.explained_variance, {"multioutput": None}),
    (fm.normalized_root_mean_squared_error, {"normalization": "max"}),
    (fm.tweedie_deviance_score, {"power": 0.5}),
    (fm.minkowski_distance, {"p": 0.5}),
    (fm.kendall_rank_corrcoef, {"variant": "d"}),
    (fm.kendall_rank_corrcoef, {"t_test": True, "alternative": None}),
    (fm.kendall_rank_corrcoef, {"t_test": True, "alternative": "both"}),
    (fm.kl_divergence, {"reduction": "max"}),
    (fm.kl_divergence, {"log_prob": 1}),
    (fm.cosine_similarity, {"reduction": "avg"}),
    (fm.critical_success_index, {"threshold": 0.5, "keep_sequence_dim": -1}),
    (fm.mean_squared_log_error, {"on_invalid": "raise"}),
])
def test_bad_configuration_raises(factory, kwargs):
    with pytest.raises(ValueError, match=factory.__name__):
        factory(**kwargs)


def test_msle_negative_inputs_counted_and_raised_at_finalize_nothing_lost():
    p, t = _data(n=100, seed=14, kind="positive")
    p_bad, t_bad = p.clone(), t.clone()
    p_bad[[3, 50]] = -0.5
    t_bad[7] = -2.0
    m = fm.mean_squared_log_error()
    s = m.update(m.init(), p_bad[:60], t_bad[:60])  # no sync, no error in update
    s = m.update(s, p_bad[60:], t_bad[60:])
    with pytest.raises(ValueError, match="3 input entries broke the rule: preds and target must be >= 0"):
        m.finalize(s)
    keep = torch.ones(100, dtype=torch.bool)
    keep[[3, 7, 50]] = False
    want = skm.mean_squared_log_error(_np(t[keep]), _np(p[keep]))
    close(fm.mean_squared_log_error(on_invalid="ignore").finalize(s), want)
    with pytest.warns(UserWarning, match="3 input entries"):
        close(fm.mean_squared_log_error(on_invalid="warn").finalize(s), want)


def test_kl_non_distributions_counted_and_raised_at_finalize():
    g = torch.Generator().manual_seed(15)
    p, q = torch.rand(40, 4, generator=g), torch.rand(40, 4, generator=g)
    p[5, 2] = -0.1  # negative probability
    q[9] = 0.0  # zero mass
    m = fm.kl_divergence()
    s = m.update(m.init(), p, q)
    with pytest.raises(ValueError, match="kl_divergence: 2 input entries broke the rule: probabilities"):
        m.finalize(s)
    keep = torch.ones(40, dtype=torch.bool)
    keep[[5, 9]] = False
    close(fm.kl_divergence(on_invalid="ignore").finalize(s), ss.entropy(_np(p[keep]), _np(q[keep]), axis=1).mean())
    rows = fm.kl_divergence(reduction="none", on_invalid="ignore")(p, q)
    assert torch.isnan(rows[[5, 9]]).all() and not torch.isnan(rows[keep]).any()
    with pytest.raises(ValueError, match="log-probabilities"):
        fm.jensen_shannon_divergence(log_prob=True)(torch.zeros(2, 3) + 0.5, torch.zeros(2, 3) - 1)


def test_tweedie_domain_counted():
    p, t = _data(n=30, seed=16, kind="positive")
    t[0] = 0.0  # allowed for 1 <= power < 2, not for power 2
    with pytest.raises(ValueError, match="1 input entry broke the rule: preds and target must be > 0"):
        fm.tweedie_deviance_score(power=2.0)(p, t)
    close(fm.tweedie_deviance_score(power=1.5)(p, t), skm.mean_tweedie_deviance(_np(t), _np(p), power=1.5))


# ------------------------------------------------------------------ shared states in a collection

@pytest.mark.parametrize("members,groups", [
    ({"mse": fm.mean_squared_error(), "rmse": fm.mean_squared_error(squared=False)}, 1),
    ({"r2": fm.r2_score(), "adj": fm.r2_score(adjusted=2), "ev": fm.explained_variance(),
      "rse": fm.relative_squared_error()}, 2),  # R² and RSE share the lighter state, explained variance its own
    ({"pearson": fm.pearson_corrcoef(), "ccc": fm.concordance_corrcoef()}, 1),
    ({"spearman": fm.spearman_corrcoef(), "kendall": fm.kendall_rank_corrcoef()}, 1),
    ({"nrmse_mean": fm.normalized_root_mean_squared_error(), "nrmse_l2": fm.normalized_root_mean_squared_error(normalization="l2")},
     1),
    ({"mse": fm.mean_squared_error(), "mae": fm.mean_absolute_error(), "r2": fm.r2_score()}, 3),
])
def test_collection_shares_states(members, groups):
    c = fm.collection(members)
    assert len(c.init()) == groups
    p, t = _data(n=64, seed=17)
    out = c(p, t)
    for k, m in members.items():
        close(out[k], m(p, t), rtol=0, atol=0)


# ------------------------------------------------------------------ gradients (metrics used as losses)

GRAD = ["mean_squared_error", "mean_absolute_error", "mean_absolute_percentage_error",
        "symmetric_mean_absolute_percentage_error", "weighted_mean_absolute_percentage_error", "mean_squared_log_error",
        "log_cosh_error", "pearson_corrcoef", "r2_score", "explained_variance", "concordance_corrcoef",
        "normalized_root_mean_squared_error", "relative_squared_error", "tweedie_deviance_score"]


@pytest.mark.parametrize("name", GRAD)
def test_gradients_match_torchmetrics(name):
    p, t = _data(n=64, seed=18, kind="positive")
    grads = []
    for fn in (getattr(fm, name)(), lambda a, b: getattr(tmf, name)(a, b)):
        x = p.clone().requires_grad_(True)
        fn(x, t).backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-6)
