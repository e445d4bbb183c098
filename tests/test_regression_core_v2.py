"""Regression on core v2: families, doctests, the NaN/inf rule, empty input, ownership, gradients, metadata,
the NRMSE constant-target defect."""
import warnings

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

import fmetrics as fm
from fmetrics import regression, validation
from tests import _doctests


def test_every_regression_example_runs_and_every_factory_documents_itself():
    failed, ran, missing = _doctests.run(regression)
    assert not missing, f"factories without Args/Returns/Example: {missing}"
    assert ran >= len(regression.__all__) and failed == 0, f"{failed} doctest examples failed (see the output)"


def test_doctest_values_match_oracles():
    """Values printed by the examples, from scikit-learn / hand formulas (not copied from our output)."""
    p, t = np.array([4., 3., 2., 1.]), np.array([1., 2., 3., 1.])
    assert round(skm.mean_tweedie_deviance(t, p, power=2.0), 4) == 0.4015
    x, y = np.array([[0., 1., 2.], [1., 2., 3.]]), np.array([1., 4.])
    crps = np.mean(np.abs(x - y[:, None]).mean(1) - np.abs(x[:, :, None] - x[:, None, :]).sum((1, 2)) / 18)
    assert round(crps, 4) == 0.8889
    assert round(skm.mean_absolute_percentage_error([0.9, 15., 1.2e6], [1., 10., 1e6]), 4) == 0.2037


# ------------------------------------------------------------------ families: one state per configuration

def test_members_of_one_family_share_one_state_and_one_update():
    c = fm.collection({"r2": fm.r2_score(), "rse": fm.relative_squared_error(), "ev": fm.explained_variance()})
    assert len(c.init()) == 2  # R² and RSE need no residual mean: their lighter state is not explained variance's
    c = fm.collection({"r2": fm.r2_score(exact=True), "ev": fm.explained_variance(exact=True),
                       "rse": fm.relative_squared_error(exact=True)})
    assert len(c.init()) == 1
    c = fm.collection({"mse": fm.mean_squared_error(), "rmse": fm.mean_squared_error(squared=False)})
    assert len(c.init()) == 1
    c = fm.collection({f"n{k}": fm.normalized_root_mean_squared_error(normalization=k)
                       for k in ("mean", "range", "std", "l2")})
    assert len(c.init()) == 1
    c = fm.collection({"p": fm.pearson_corrcoef(), "c": fm.concordance_corrcoef()})
    assert len(c.init()) == 1
    c = fm.collection({"s": fm.spearman_corrcoef(), "k": fm.kendall_rank_corrcoef()})
    assert len(c.init()) == 1


def test_moment_metrics_declare_their_row_weighting():
    for m in (fm.pearson_corrcoef(), fm.r2_score(), fm.concordance_corrcoef(), fm.explained_variance()):
        assert m.weigh_rows is not None
    assert fm.mean_squared_error().weigh_rows is None  # sum state: weighted by its tags


# ------------------------------------------------------------------ NaN / inf: one rule

NAN_FACTORIES = [
    (fm.mean_squared_error, {}), (fm.mean_absolute_error, {}), (fm.mean_absolute_percentage_error, {}),
    (fm.symmetric_mean_absolute_percentage_error, {}), (fm.log_cosh_error, {}), (fm.tweedie_deviance_score, {}),
    (fm.weighted_mean_absolute_percentage_error, {}), (fm.normalized_root_mean_squared_error, {}),
    (fm.minkowski_distance, {"p": 2}), (fm.pearson_corrcoef, {}), (fm.concordance_corrcoef, {}),
    (fm.r2_score, {}), (fm.explained_variance, {}), (fm.relative_squared_error, {}), (fm.spearman_corrcoef, {}),
    (fm.kendall_rank_corrcoef, {}),
]
IDS = [f.__name__ for f, _ in NAN_FACTORIES]


def _data(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) + 0.5
    return t + 0.3 * torch.rand(n, generator=g), t


@pytest.mark.parametrize("factory,kw", NAN_FACTORIES, ids=IDS)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_input_raises_at_once_on_cpu_quoting_the_value(factory, kw, bad):
    m = factory(**kw)
    p, t = _data()
    s = m.update(m.init(), p, t)
    p2 = p.clone()
    p2[5] = bad
    with pytest.raises(ValueError, match=r"preds must be finite.*found (nan|inf)"):
        m.update(s, p2, t)
    # the state is untouched: the good batch alone still finalizes
    torch.testing.assert_close(m.finalize(s), m(p, t))


@pytest.mark.parametrize("factory,kw", NAN_FACTORIES, ids=IDS)
def test_deferred_non_finite_input_is_reported_by_finalize(factory, kw):
    m = factory(**kw)
    p, t = _data()
    t2 = t.clone()
    t2[7] = float("nan")
    with validation.mode("deferred"):
        s = m.update(m.update(m.init(), p, t), p, t2)
    with pytest.raises(ValueError, match=r"1 input entry broke the rule: preds and target must be finite"):
        m.finalize(s)


@pytest.mark.parametrize("factory,kw", NAN_FACTORIES, ids=IDS)
def test_ignore_leaves_non_finite_rows_out_and_warn_says_so(factory, kw):
    p, t = _data()
    p2, t2 = torch.cat([p, torch.tensor([float("nan"), 1.0])]), torch.cat([t, torch.tensor([1.0, float("inf")])])
    expected = factory(**kw)(p, t)
    torch.testing.assert_close(factory(**kw, nan_strategy="ignore")(p2, t2), expected)
    with pytest.warns(UserWarning, match="broke the rule: preds and target must be finite"):
        torch.testing.assert_close(factory(**kw, nan_strategy="warn")(p2, t2), expected)


def test_deferred_report_names_first_value_and_update_call():
    m = fm.pearson_corrcoef()
    p, t = _data()
    p2 = p.clone()
    p2[3] = float("-inf")
    with validation.mode("deferred"):
        s = m.update(m.update(m.update(m.init(), p, t), p, t), p2, t)
    with pytest.raises(ValueError, match=r"the first was -inf in update call 3"):
        m.finalize(s)
    s = fm.spearman_corrcoef().init()
    with validation.mode("deferred"):
        s = fm.spearman_corrcoef().update(fm.spearman_corrcoef().update(s, p, t), p2, t)
    with pytest.raises(ValueError, match=r"the first was -inf in update call 2"):
        fm.spearman_corrcoef().finalize(s)


def test_nan_is_not_called_constant():
    p, t = _data()
    p[0] = float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "constant" warning
        assert torch.isnan(fm.pearson_corrcoef(nan_strategy="disable")(p, t))
        assert torch.isnan(fm.mean_squared_error(nan_strategy="disable")(p, t))


@pytest.mark.parametrize("factory", [fm.mean_squared_error, fm.mean_absolute_error, fm.r2_score,
                                     fm.pearson_corrcoef, fm.weighted_mean_absolute_percentage_error,
                                     fm.normalized_root_mean_squared_error])
def test_empty_input_gives_nan_and_a_warning(factory):
    with pytest.warns(UserWarning, match="no samples|fewer than 2 samples"):
        assert torch.isnan(factory()(torch.zeros(0), torch.zeros(0)))


# ------------------------------------------------------------------ ownership, graphs, gradients

@pytest.mark.parametrize("factory", [fm.spearman_corrcoef, fm.kendall_rank_corrcoef,
                                     lambda: fm.cosine_similarity(reduction="none")])
def test_state_does_not_alias_the_callers_buffer(factory):
    m = factory()
    buf_p, buf_t = (torch.rand(32, 3), torch.rand(32, 3)) if m.name == "cosine_similarity" else _data(32)
    s = m.update(m.init(), buf_p, buf_t)
    before = m.finalize(s)
    buf_p.fill_(7.0)
    buf_t.copy_(torch.flip(buf_t, [0]))
    torch.testing.assert_close(m.finalize(s), before)


@pytest.mark.parametrize("factory", [fm.mean_squared_error, fm.pearson_corrcoef, fm.r2_score, fm.spearman_corrcoef,
                                     fm.normalized_root_mean_squared_error, fm.mean_absolute_error])
def test_states_hold_no_autograd_graph(factory):
    m = factory()
    s = m.init()
    w = torch.ones((), requires_grad=True)
    for i in range(40):
        p, t = _data(16, seed=i)
        s = m.update(s, p * w, t)
    leaves = [x for x in torch.utils._pytree.tree_leaves(s) if isinstance(x, torch.Tensor)]
    assert all(x.grad_fn is None and not x.requires_grad for x in leaves)


def test_mse_is_differentiable_through_the_one_shot_call():
    m = fm.mean_squared_error()
    assert m.is_differentiable
    p = torch.tensor([1.0, 2.0, 4.0], requires_grad=True)
    t = torch.tensor([1.0, 1.0, 1.0])
    m(p, t).backward()
    torch.testing.assert_close(p.grad, 2 * (p.detach() - t) / 3)


# ------------------------------------------------------------------ metadata

def test_every_regression_metric_has_metadata():
    table = {"r2_score": (True, True, (None, 1.0)), "mean_squared_error": (False, True, (0.0, None)),
             "pearson_corrcoef": (None, True, (-1.0, 1.0)), "spearman_corrcoef": (True, False, (-1.0, 1.0)),
             "critical_success_index": (True, False, (0.0, 1.0))}
    for name in regression.__all__:
        kwargs = {"threshold": 0.5} if name == "critical_success_index" else {"p": 2} if name == "minkowski_distance" \
            else {}
        m = getattr(fm, name)(**kwargs)
        assert isinstance(m.is_differentiable, bool) and len(m.bounds) == 2, name
        if name in table:
            assert (m.higher_is_better, m.is_differentiable, m.bounds) == table[name], name


# ------------------------------------------------------------------ defect: NRMSE with a constant target

@pytest.mark.parametrize("cut", [1, 2])
def test_nrmse_std_constant_target_is_split_invariant(cut):
    p, t = torch.arange(3.0), torch.full((3,), 0.1)
    m = fm.normalized_root_mean_squared_error(normalization="std")
    split = m.finalize(m.merge(m.update(m.init(), p[:cut], t[:cut]), m.update(m.init(), p[cut:], t[cut:])))
    assert torch.isinf(m(p, t)) and torch.isinf(split)
    rng = fm.normalized_root_mean_squared_error(normalization="range")
    assert torch.isinf(rng(p, t))
