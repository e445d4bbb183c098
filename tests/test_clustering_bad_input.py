"""Bad input in clustering, nominal and shape (issue 28): a clear error with the state intact, a deferred
error raised by `finalize`, or a documented value. Oracles: scikit-learn, SciPy, hand calculations."""
import warnings

import numpy as np
import pytest
import scipy.spatial
import sklearn.metrics as skm
import torch
from scipy.stats.contingency import association

import fmetrics as fm

NAN, INF = float("nan"), float("inf")


def _deferred(m, state, *inputs):
    with fm.validation.mode("deferred"):  # as on a GPU / under compile: counted, raised by finalize
        return m.update(state, *inputs)


# ------------------------------------------------------------------ clustering labels

@pytest.mark.parametrize("factory", [fm.adjusted_rand_score, fm.normalized_mutual_info_score, fm.rand_score])
@pytest.mark.parametrize("bad", [NAN, INF])
def test_non_finite_cluster_label_is_an_error_and_the_state_survives(factory, bad):
    m = factory()
    p1, t1 = torch.tensor([0., 0., 1., 2.]), torch.tensor([0, 0, 1, 1])
    p2, t2 = torch.tensor([1., 2., 2.]), torch.tensor([1, 2, 2])
    oracle = {fm.adjusted_rand_score: skm.adjusted_rand_score, fm.rand_score: skm.rand_score,
              fm.normalized_mutual_info_score: skm.normalized_mutual_info_score}[factory]
    s = m.update(m.init(), p1, t1)
    with pytest.raises(ValueError, match=rf"{m.name}: argument `preds`: labels must be finite.*found {bad}"):
        m.update(s, torch.tensor([1., bad]), torch.tensor([1, 1]))
    with pytest.raises(ValueError):  # scikit-learn rejects NaN / inf labels too
        oracle(np.array([1, 1]), np.array([1.0, bad]))
    want = oracle(torch.cat([t1, t2]).numpy(), torch.cat([p1, p2]).numpy())
    assert float(m.finalize(m.update(s, p2, t2))) == pytest.approx(want, abs=1e-12)
    # deferred (GPU / compile / vmap): finalize names the first offender and its update call
    broken = _deferred(m, s, torch.tensor([1., 2.]), torch.tensor([bad, 1.]))
    with pytest.raises(ValueError, match=rf"labels must be finite.*the first was {bad} in update call 2"):
        m.finalize(m.update(broken, p2, t2))
    assert float(m.finalize(m.update(s, p2, t2))) == pytest.approx(want, abs=1e-12)  # the old state is intact


def test_non_finite_labels_raise_on_the_merged_state_too():
    m = fm.mutual_info_score()
    good = m.update(m.init(), torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]))
    bad = _deferred(m, m.init(), torch.tensor([0., INF]), torch.tensor([0., 1.]))
    with pytest.raises(ValueError, match="the first was inf in update call 2"):
        m.finalize(m.merge(good, bad))


# ------------------------------------------------------------------ Calinski-Harabasz moments

def _offset_points(offset):
    """Points on a 1/64 grid plus ``offset``: exact in float64, so the un-offset copy is an exact oracle."""
    g = torch.Generator().manual_seed(3)
    base = torch.round(torch.randn(60, 3, generator=g, dtype=torch.float64) * 64) / 64
    base = base + torch.tensor([0.0, 4.0, 8.0], dtype=torch.float64)[torch.arange(60) % 3, None]
    return base, base + offset, torch.arange(60) % 3


@pytest.mark.parametrize("offset", [1e5, 1e6])
def test_calinski_harabasz_moments_keep_their_digits_on_offset_data(offset):
    base, x, labels = _offset_points(offset)
    want = skm.calinski_harabasz_score(base.numpy(), labels.numpy())  # translation-invariant, no cancellation
    assert skm.calinski_harabasz_score(x.numpy(), labels.numpy()) == pytest.approx(want, rel=1e-9)
    m = fm.calinski_harabasz_score(num_clusters=3)
    s = m.init()
    for i in range(0, 60, 7):
        s = m.update(s, x[i:i + 7], labels[i:i + 7])
    assert float(m.finalize(s)) == pytest.approx(want, rel=1e-9)
    halves = m.merge(m.update(m.init(), x[:25], labels[:25]), m.update(m.init(), x[25:], labels[25:]))
    assert float(m.finalize(halves)) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("split", [(6,), (1, 5), (2, 4), (3, 3), (1, 1, 1, 1, 1, 1)])
def test_calinski_harabasz_zero_within_dispersion_is_one_for_any_batching(split):
    x = torch.tensor([[1e4 + 0.1, 1e4]] * 3 + [[5e4, 3.0]] * 3, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    assert skm.calinski_harabasz_score(x.numpy(), labels.numpy()) == 1.0  # W = 0: scikit-learn's 1.0
    m = fm.calinski_harabasz_score(num_clusters=2)
    s, i = m.init(), 0
    for n in split:
        s, i = m.update(s, x[i:i + n], labels[i:i + n]), i + n
    assert float(m.finalize(s)) == 1.0


@pytest.mark.parametrize("factory", [fm.davies_bouldin_score, fm.dunn_index, fm.calinski_harabasz_score])
def test_point_scores_without_num_clusters_keep_their_digits_on_offset_data(factory):
    """Davies-Bouldin and Dunn have no moments form (they keep the points): a guard, not a change."""
    base, x, labels = _offset_points(1e5)
    m = factory()
    assert float(m(x, labels)) == pytest.approx(float(m(base, labels)), rel=1e-9)
    if factory is fm.davies_bouldin_score:
        assert float(m(base, labels)) == pytest.approx(skm.davies_bouldin_score(base.numpy(), labels.numpy()),
                                                       rel=1e-12)


@pytest.mark.parametrize("factory, kwargs", [(fm.calinski_harabasz_score, {}),
                                             (fm.calinski_harabasz_score, {"num_clusters": 3}),
                                             (fm.davies_bouldin_score, {}), (fm.dunn_index, {})])
@pytest.mark.parametrize("bad", [NAN, INF])
def test_non_finite_points_are_an_error_and_the_state_survives(factory, kwargs, bad):
    _, x, labels = _offset_points(0.0)
    m = factory(**kwargs)
    s = m.update(m.init(), x[:30], labels[:30])
    broken = x[30:].clone()
    broken[4, 1] = bad
    with pytest.raises(ValueError, match=rf"{m.name}: argument `data`: data must be finite.*found {bad} in row 4"):
        m.update(s, broken, labels[30:])
    oracle = {fm.calinski_harabasz_score: skm.calinski_harabasz_score,
              fm.davies_bouldin_score: skm.davies_bouldin_score}.get(factory)
    value = float(m.finalize(m.update(s, x[30:], labels[30:])))
    assert value == pytest.approx(oracle(x.numpy(), labels.numpy()) if oracle else float(m(x, labels)), rel=1e-9)
    # deferred: the bad row never enters the moments; finalize names the value and its update call
    with pytest.raises(ValueError, match=rf"data must be finite.*the first was {bad} in update call 2"):
        m.finalize(m.update(_deferred(m, s, broken, labels[30:]), x[30:], labels[30:]))


# ------------------------------------------------------------------ nominal association

@pytest.mark.parametrize("factory", [fm.cramers_v, fm.tschuprows_t])
def test_bias_corrected_association_of_one_observation_is_nan_with_a_warning(factory):
    # Bergsma's correction divides by n - 1 = 0: undefined, the documented NaN
    with pytest.warns(UserWarning, match=rf"{factory.__name__}: the bias correction needs at least 2 observations"):
        v = factory()(torch.tensor([0]), torch.tensor([1]))
    assert torch.isnan(v) and v.dtype == torch.float64
    with pytest.warns(UserWarning, match="needs at least 2 observations"):
        assert torch.isnan(factory(num_categories=3)(torch.tensor([0]), torch.tensor([1])))


@pytest.mark.parametrize("factory", [fm.cramers_v_matrix, fm.tschuprows_t_matrix])
def test_bias_corrected_matrix_of_one_observation_is_nan_off_the_diagonal(factory):
    with pytest.warns(UserWarning, match=rf"{factory.__name__}: the bias correction needs at least 2"):
        v = factory()(torch.tensor([[0, 1, 2]]))
    assert torch.equal(v.isnan(), ~torch.eye(3, dtype=torch.bool))
    assert torch.equal(v.diagonal(), torch.ones(3, dtype=torch.float64))


def test_cramers_v_rejects_python_lists_naming_the_argument():
    with pytest.raises(ValueError, match=r"cramers_v: argument `preds` expected a tensor .*got list"):
        fm.cramers_v()([0, 1, 1], [0, 1, 0])
    with pytest.raises(ValueError, match=r"cramers_v: argument `target` expected a tensor .*got list"):
        fm.cramers_v()(torch.tensor([0, 1, 1]), [0, 1, 0])
    with pytest.raises(ValueError, match=r"fleiss_kappa: argument `ratings` expected a tensor .*got list"):
        fm.fleiss_kappa()([[3, 0], [0, 3]])


def test_num_categories_errors_name_num_categories():
    with pytest.raises(ValueError, match=r"cramers_v: argument `num_categories` expected a positive int"):
        fm.cramers_v(num_categories=0)
    m = fm.cramers_v(num_categories=3)
    with pytest.raises(ValueError, match=r"cramers_v: argument `preds`: categories must be whole numbers in "
                                         r"\[0, 3\) \(num_categories=3\); found 5") as err:
        m.update(m.init(), torch.tensor([0, 5]), torch.tensor([0, 1]))
    assert "num_clusters" not in str(err.value)
    with pytest.raises(ValueError, match=r"found 0.5"):  # a fractional category is caught at once too
        m.update(m.init(), torch.tensor([0.5, 1.0]), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"cluster_accuracy: argument `target`: labels must be in \[0, 2\) "
                                         r"\(num_classes=2\)"):
        fm.cluster_accuracy(num_classes=2)(torch.tensor([0, 1]), torch.tensor([0, 2]))


P8 = torch.tensor([0., 0., 1., 1., 2., 2., 0., 1.])
T8 = torch.tensor([0., 0., 1., 1., 2., 2., 1., 0.])


@pytest.mark.parametrize("factory, kwargs", [(fm.cramers_v, {"bias_correction": False}), (fm.tschuprows_t, {}),
                                             (fm.pearsons_contingency_coefficient, {}), (fm.theils_u, {})])
@pytest.mark.parametrize("strategy", ["replace", "drop"])
def test_infinite_category_is_an_error_and_the_state_survives(factory, kwargs, strategy):
    m = factory(nan_strategy=strategy, **kwargs)
    s = m.update(m.init(), P8[:5], T8[:5])
    with pytest.raises(ValueError, match=rf"{m.name}: argument `target`: categories must be finite.*found inf"):
        m.update(s, P8[5:], torch.tensor([1., INF, 0.]))
    broken = _deferred(m, s, P8[5:], torch.tensor([1., -INF, 0.]))
    with pytest.raises(ValueError, match=r"the first was -inf in update call 2"):
        m.finalize(broken)
    assert float(m.finalize(m.update(s, P8[5:], T8[5:]))) == pytest.approx(float(m(P8, T8)), abs=1e-12)


def test_cramers_v_matches_scipy_after_a_rejected_update():
    m = fm.cramers_v(bias_correction=False)
    s = m.update(m.init(), P8[:5], T8[:5])
    with pytest.raises(ValueError):
        m.update(s, P8[5:], torch.tensor([INF, 1., 0.]))
    table = np.array([[2, 1, 0], [1, 2, 0], [0, 0, 2]])  # rows target, columns preds, counted by hand from P8/T8
    assert float(m.finalize(m.update(s, P8[5:], T8[5:]))) == pytest.approx(association(table, method="cramer"),
                                                                           abs=1e-12)


@pytest.mark.parametrize("num_categories", [None, 3])
def test_matrix_forms_reject_infinite_categories(num_categories):
    m = fm.cramers_v_matrix(bias_correction=False, num_categories=num_categories)
    good = torch.stack([P8, T8, P8], 1)
    s = m.update(m.init(), good)
    bad = good.clone()
    bad[2, 1] = INF
    with pytest.raises(ValueError, match=r"cramers_v_matrix: categories must .*found inf"):
        m.update(s, bad)
    with pytest.raises(ValueError, match=r"cramers_v_matrix: .*broke the rule: categories must .*the first was inf "
                                         r"in update call 2"):
        m.finalize(_deferred(m, s, bad))
    assert torch.allclose(m.finalize(m.update(s, good)), m(torch.cat([good, good])))


def test_nan_in_probability_rows_follows_nan_strategy():
    """A NaN score in a 2-D row drops the row ("drop"), as a NaN label does; scipy on the rows left."""
    probs = torch.nn.functional.one_hot(P8.long(), 3).double()
    probs[3, 0] = NAN
    keep = torch.arange(8) != 3
    v = fm.cramers_v(bias_correction=False, nan_strategy="drop")(probs, T8)
    table = np.zeros((3, 3))
    np.add.at(table, (T8[keep].long().numpy(), P8[keep].long().numpy()), 1)
    assert float(v) == pytest.approx(association(table.astype(int), method="cramer"), abs=1e-12)


# ------------------------------------------------------------------ Fleiss' kappa

def _fleiss(counts):
    """Fleiss (1971) from the definition."""
    c = np.asarray(counts, dtype=float)
    n_sub, n = c.shape[0], c.sum(1)[0]
    p_i = ((c ** 2).sum(1) - n) / (n * (n - 1))
    pe = ((c.sum(0) / (n_sub * n)) ** 2).sum()
    return (p_i.mean() - pe) / (1 - pe)


def test_fleiss_kappa_rejects_negative_counts_and_unequal_raters_keeping_the_state():
    m = fm.fleiss_kappa()
    good = torch.tensor([[3, 0], [0, 3], [2, 1]])
    s = m.update(m.init(), good)
    with pytest.raises(ValueError, match=r"fleiss_kappa: rater counts must be >= 0 in `ratings`; found -1"):
        m.update(s, torch.tensor([[4, -1]]))
    with pytest.raises(ValueError, match=r"fleiss_kappa: every subject in `ratings` must have the same number"):
        m.update(s, torch.tensor([[2, 0], [1, 2]]))
    with pytest.raises(ValueError, match=r"broke the rule: rater counts must be >= 0; the first was -1 in update "
                                         r"call 2"):
        m.finalize(_deferred(m, s, torch.tensor([[4, -1]])))
    with pytest.raises(ValueError, match=r"same number of raters; found from 2 to 3"):
        m.finalize(_deferred(m, s, torch.tensor([[2, 0]])))
    more = torch.tensor([[1, 2]])
    assert float(m.finalize(m.update(s, more))) == pytest.approx(_fleiss(torch.cat([good, more])), abs=1e-12)


def test_fleiss_kappa_probs_reject_non_finite_scores():
    m = fm.fleiss_kappa(mode="probs")
    scores = torch.tensor([[[0.9, 0.8, 0.1], [0.1, 0.2, 0.9]], [[0.3, 0.4, 0.6], [0.7, 0.6, 0.4]]])
    bad = scores.clone()
    bad[1, 0, 2] = NAN
    s = m.update(m.init(), scores)
    with pytest.raises(ValueError, match=r"fleiss_kappa: scores must be finite .*found nan"):
        m.update(s, bad)
    with pytest.raises(ValueError, match=r"the first was nan in update call 2"):
        m.finalize(_deferred(m, s, bad))
    # raters' choices by hand: subject 0 -> (0, 0, 1), subject 1 -> (1, 1, 0): counts [[2, 1], [1, 2]]
    assert float(m.finalize(s)) == pytest.approx(_fleiss([[2, 1], [1, 2]]), abs=1e-12)


# ------------------------------------------------------------------ Procrustes

def _clouds():
    g = torch.Generator().manual_seed(5)
    a = torch.randn(3, 6, 2, generator=g, dtype=torch.float64)
    return a, a + 0.3 * torch.randn(3, 6, 2, generator=g, dtype=torch.float64)


def _scipy_mean(*pairs):
    return np.mean([scipy.spatial.procrustes(a.numpy(), b.numpy())[2] for a, b in pairs])


@pytest.mark.parametrize("flaw", ["equal", "nan", "inf"])
def test_procrustes_rejects_a_degenerate_pair_and_keeps_the_rest(flaw):
    a, b = _clouds()
    m = fm.procrustes_disparity()
    s = m.update(m.init(), a[:2], b[:2])
    bad = b[2:].clone()
    if flaw == "equal":
        bad[0] = 1.5
        with pytest.raises(ValueError, match=">1 unique points"):  # scipy raises for it too
            scipy.spatial.procrustes(a[2].numpy(), bad[0].numpy())
    else:
        bad[0, 4, 1] = NAN if flaw == "nan" else INF
    want = "must hold at least 2 distinct points" if flaw == "equal" else f"must be finite; found {flaw}"
    with pytest.raises(ValueError, match=rf"procrustes_disparity: point_cloud2 {want}.*pair 0 of this update"):
        m.update(s, a[2:], bad)
    pairs = [(a[i], b[i]) for i in range(3)]
    assert float(m.finalize(m.update(s, a[2:], b[2:]))) == pytest.approx(_scipy_mean(*pairs), abs=1e-12)
    # deferred: the state stays finalizable; finalize names the first bad pair and its update call
    broken = _deferred(m, s, torch.cat([a[2:], a[:1]]), torch.cat([b[:1], bad]))
    with pytest.raises(ValueError, match=r"procrustes_disparity: 1 input entry broke the rule: point clouds must be "
                                         r"finite.*the first was 1 in update call 2"):
        m.finalize(m.update(broken, a[2:], b[2:]))
    assert float(m.finalize(s)) == pytest.approx(_scipy_mean(*pairs[:2]), abs=1e-12)


def test_procrustes_single_point_clouds_are_a_shape_error():
    with pytest.raises(ValueError, match=r"argument `point_cloud1` expected .* N >= 2 points, got \(1, 2\)"):
        fm.procrustes_disparity()(torch.zeros(1, 2), torch.ones(1, 2))


def test_no_warning_on_good_input():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fm.cramers_v()(P8, T8)
        fm.procrustes_disparity()(*_clouds())
        fm.calinski_harabasz_score(num_clusters=3)(*_offset_points(0.0)[1:])


def test_procrustes_mean_of_no_pairs_is_nan_with_a_warning():
    m = fm.procrustes_disparity()
    with pytest.warns(UserWarning, match="procrustes_disparity: no samples were seen"):
        assert torch.isnan(m.finalize(m.init()))
    total = fm.procrustes_disparity(reduction="sum")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert total.finalize(total.init()) == 0  # the empty sum: defined, no empty-input warning
    assert not [w for w in seen if "no samples" in str(w.message)]


def test_undefined_association_and_kappa_warn():
    # one target category: min(r - 1, c - 1) = 0 in the normalizer, 0 / 0 by hand
    with pytest.warns(UserWarning, match=r"cramers_v: a variable has a single category \(table 1 x 2\)"):
        assert torch.isnan(fm.cramers_v(bias_correction=False)(torch.tensor([0, 1, 1]), torch.tensor([2, 2, 2])))
    # every rater picks category 0: P_e = 1, kappa = 0 / 0 by hand
    with pytest.warns(UserWarning, match="fleiss_kappa: every rating falls in one category"):
        assert torch.isnan(fm.fleiss_kappa()(torch.tensor([[3, 0], [3, 0]])))
