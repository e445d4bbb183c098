"""Bad input to the classification metrics (issue 28): the empty-input rule, shape / dtype errors that
say what is expected, infinite logits, and the documented choices beside torchmetrics.

Expected values: NaN by the rule of docs/conventions.md ("Empty input"), scikit-learn on the data that
remains, torchmetrics 1.9 where the docs compare with it, and hand calculations stated inline.
"""
import inspect
import math
import warnings

import numpy as np
import pytest
import torch
import torchmetrics.functional.classification as tmf
from scipy.special import softmax as sp_softmax
from sklearn import metrics as skm

import fmetrics as fm
import fmetrics.classification as fc

EMPTY = "no samples were seen \\(empty input\\); the value is undefined and set to NaN"
C = L = 3
# values that are counts: defined on no data (zeros), no warning
COUNTS = {"binary_stat_scores", "multiclass_stat_scores", "multilabel_stat_scores", "binary_confusion_matrix",
          "multiclass_confusion_matrix", "multilabel_confusion_matrix"}
GROUPS = {"binary_groups_stat_rates", "binary_fairness", "demographic_parity", "equal_opportunity"}


# DeLong's test / CI (issue 32) have their own inputs and fewer-than-2-per-class rule, tested with them
OWN_RULE = {"delong_test", "binary_auroc_ci"}


def _factories():
    return [n for n in fc.__all__ if "task" not in inspect.signature(getattr(fm, n)).parameters
            and n not in OWN_RULE]


def _build(name, **extra):
    params = inspect.signature(getattr(fm, name)).parameters
    kw = {k: v for k, v in (("num_classes", C), ("num_labels", L), ("num_groups", 2), ("beta", 2.0),
                            ("min_precision", 0.5), ("min_recall", 0.5), ("min_specificity", 0.5),
                            ("min_sensitivity", 0.5)) if k in params}
    return getattr(fm, name)(**kw, **extra)


def _inputs(name, n, ignore=None):
    g = torch.Generator().manual_seed(n)
    if name.startswith("multiclass"):
        p, t = torch.rand(n, C, generator=g), torch.randint(0, C, (n,), generator=g)
    elif name.startswith("multilabel"):
        p, t = torch.rand(n, L, generator=g), torch.randint(0, 2, (n, L), generator=g)
    else:
        p, t = torch.rand(n, generator=g), torch.randint(0, 2, (n,), generator=g)
    if ignore is not None:
        t = torch.full_like(t, ignore)
    if name == "demographic_parity":
        return p, torch.zeros(n, dtype=torch.long)
    if name in GROUPS:
        return p, t, torch.zeros(n, dtype=torch.long)
    return p, t


def _leaves(value):
    return [x for x in torch.utils._pytree.tree_leaves(value) if isinstance(x, torch.Tensor)]


def _is_curve(name):
    return name.endswith(("_roc", "_precision_recall_curve"))


@pytest.mark.parametrize("name", _factories())
def test_empty_stream_is_nan_with_the_one_warning(name):
    """No samples at all (fresh state, or an update with zero rows): NaN and the library's warning."""
    m = _build(name)
    for state in (m.init(), m.update(m.init(), *_inputs(name, 0))):
        if name in COUNTS:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")  # counts are defined on no data: no warning, but for a state
                value = m.finalize(state)        # no update was counted in (a dropped `state = m.update(...)`)
            assert [str(w.message) for w in caught if "no update was counted in" not in str(w.message)] == []
            assert all(int(x.abs().sum()) == 0 for x in _leaves(value))
            continue
        with pytest.warns(UserWarning, match=f"^{name}: {EMPTY}$"):
            value = m.finalize(state)
        leaves = _leaves(value[:2] if _is_curve(name) else value)  # a curve keeps its thresholds
        assert leaves and all(x.is_floating_point() and bool(torch.isnan(x).all()) for x in leaves), value


@pytest.mark.parametrize("name", [n for n in _factories() if "thresholds" in inspect.signature(getattr(fm, n)).parameters])
def test_binned_curves_on_empty_input(name):
    """Binned states (an int64 histogram, e.g. binary AUROC with 5 thresholds gave 0.0): the same rule;
    binned curves keep their thresholds, linspace(0, 1, 5) (ROC lists them reversed)."""
    m = _build(name, thresholds=5)
    s = m.update(m.init(), *_inputs(name, 0))
    with pytest.warns(UserWarning, match=f"^{name}: {EMPTY}$"):
        value = m.finalize(s)
    assert all(bool(torch.isnan(x).all()) for x in _leaves(value[:2] if _is_curve(name) else value))
    if _is_curve(name):
        for thr in _leaves(value[2]):
            torch.testing.assert_close(thr.sort().values, torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0]), check_dtype=False)


@pytest.mark.parametrize("name", [n for n in _factories() if "ignore_index" in inspect.signature(getattr(fm, n)).parameters
                                  and n not in COUNTS and "exact_match" not in n and n != "demographic_parity"])
def test_every_entry_ignored_is_empty_too(name):
    """A stream whose every entry is ``ignore_index`` counted nothing: the same rule. (Exact match is
    the exception: as in torchmetrics, ignored positions count as matched.)"""
    m = _build(name, ignore_index=-1)
    s = m.update(m.init(), *_inputs(name, 5, ignore=-1))
    with pytest.warns(UserWarning, match=f"^{name}: {EMPTY}$"):
        value = m.finalize(s)
    assert all(bool(torch.isnan(x).all()) for x in _leaves(value[:2] if _is_curve(name) else value))


@pytest.mark.parametrize("name", ["binary_accuracy", "multiclass_f1_score", "multilabel_precision",
                                  "multiclass_matthews_corrcoef", "binary_cohen_kappa", "binary_auroc",
                                  "multiclass_average_precision", "binary_calibration_error"])
def test_empty_updates_then_data_give_the_value_of_the_data(name):
    """An empty batch adds nothing: after it, the state finalizes to the value of the real batches alone."""
    m = _build(name)
    p, t = _inputs(name, 40)
    s = m.update(m.update(m.init(), *_inputs(name, 0)), p, t)
    torch.testing.assert_close(m.finalize(s), m(p, t))


def test_zero_division_of_a_non_empty_stream_is_kept():
    """The rule is about a stream with no samples: a class without support keeps ``zero_division``."""
    p, t = torch.tensor([0, 0, 0, 0]), torch.tensor([0, 0, 1, 0])  # no predicted positive: precision 0 / 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for zd in (0, 1):
            got = float(fm.binary_precision(zero_division=zd)(p, t))
            assert got == skm.precision_score(t.numpy(), p.numpy(), zero_division=zd) == zd
        # class 2 never occurs: left out of the macro average (torchmetrics), no warning
        p3, t3 = torch.tensor([0, 1, 1, 0]), torch.tensor([0, 1, 0, 0])
        got = float(fm.multiclass_recall(num_classes=3)(p3, t3))
        assert abs(got - skm.recall_score(t3.numpy(), p3.numpy(), labels=[0, 1], average="macro")) < 1e-12


def test_samplewise_on_no_samples_is_an_empty_tensor():
    """Samplewise values have one entry per sample: on no samples an empty tensor, no warning."""
    m = fm.multiclass_accuracy(num_classes=3, multidim_average="samplewise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        no_rows = torch.zeros(0, C, 4), torch.zeros(0, 4, dtype=torch.long)  # an update of no samples
        assert m.finalize(m.update(m.init(), *no_rows)).shape == (0,)


def test_collection_and_wrappers_on_empty_input():
    """A collection warns once per member and gives NaN for each; `grouped` gives a group without rows
    the wrapped metric's value on no data; `classwise` per-class NaN."""
    col = fm.collection({"acc": fm.multiclass_accuracy(num_classes=3), "f1": fm.multiclass_f1_score(num_classes=3),
                         "auroc": fm.multiclass_auroc(num_classes=3)})
    with pytest.warns(UserWarning, match=EMPTY) as rec:
        out = col.finalize(col.init())
    assert sorted(out) == ["acc", "auroc", "f1"] and all(math.isnan(float(v)) for v in out.values())
    assert {str(w.message).split(":")[0] for w in rec} >= {"multiclass_accuracy", "multiclass_f1_score",
                                                           "multiclass_auroc"}
    cw = fm.wrappers.classwise(fm.multiclass_recall(num_classes=3, average=None))
    with pytest.warns(UserWarning, match=EMPTY):
        out = cw.finalize(cw.init())
    assert len(out) == 3 and all(math.isnan(float(v)) for v in out.values())


def test_grouped_group_without_rows_is_nan():
    gm = fm.wrappers.grouped(fm.binary_accuracy(), num_groups=2)
    p, t = torch.tensor([0.9, 0.2, 0.7]), torch.tensor([1, 0, 0])
    s = gm.update(gm.init(), torch.tensor([0, 0, 0]), p, t)
    with pytest.warns(UserWarning, match=EMPTY):
        out = gm.finalize(s)
    assert out.shape == (2,) and math.isnan(float(out[1]))
    assert abs(float(out[0]) - skm.accuracy_score([1, 0, 0], [1, 0, 1])) < 1e-12


# ------------------------------------------------------------------ shape / dtype errors


@pytest.mark.parametrize("name", ["multilabel_accuracy", "multilabel_f1_score", "multilabel_exact_match",
                                  "multilabel_auroc", "multilabel_ranking_loss", "multilabel_confusion_matrix"])
@pytest.mark.parametrize("mode", ["eager", "deferred"])
def test_multilabel_target_of_shape_n_says_the_shape(name, mode):
    """Class labels ``(N,)`` passed as a multilabel target: a shape error naming ``(N, num_labels)``
    (it said "target values must be in [0, 2)"), and the state is still good."""
    m = _build(name)
    p, t = _inputs(name, 30)
    s = m.update(m.init(), p, t)
    with fm.validation.mode(mode), pytest.raises(ValueError, match=(
            rf"^{name}: argument `target` expected shape \(N, num_labels=3, \.\.\.\).*got shape \(4,\)$")):
        m.update(s, torch.rand(4, L), torch.tensor([0, 2, 1, 2]))
    torch.testing.assert_close(m.finalize(s), m(p, t))


@pytest.mark.parametrize("name", ["multiclass_accuracy", "multiclass_f1_score", "multiclass_exact_match",
                                  "multiclass_confusion_matrix", "multiclass_cohen_kappa", "multiclass_auroc",
                                  "multiclass_hinge_loss"])
@pytest.mark.parametrize("mode", ["eager", "deferred"])
def test_multiclass_one_dimensional_float_preds_are_rejected(name, mode):
    """``(N,)`` probabilities to a multiclass metric were read as labels (truncated, or "preds values must
    be in [0, 3)"): now an error naming the argument, the dtype, the shape and what is expected."""
    m = _build(name)
    p = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6], [0.5, 0.4, 0.1]])
    t = torch.tensor([0, 1, 2, 1])
    s = m.update(m.init(), p, t)
    with fm.validation.mode(mode), pytest.raises(ValueError, match=(
            rf"^{name}: argument `preds` expected float scores \(N, C=3, \.\.\.\) or integer labels.*"
            r"got torch.float32 of shape \(4,\)")):
        m.update(s, torch.tensor([0.2, 0.7, 0.9, 0.1]), t)
    torch.testing.assert_close(m.finalize(s), m(p, t))


def test_multiclass_integer_labels_still_work():
    p, t = torch.tensor([0, 2, 1, 1]), torch.tensor([0, 1, 1, 1])
    got = float(fm.multiclass_accuracy(num_classes=3, average="micro")(p, t))
    assert got == skm.accuracy_score(t.numpy(), p.numpy())


# ------------------------------------------------------------------ infinite logits


def test_multiclass_curves_with_an_infinite_logit_use_the_softmax_limit():
    """A ``+inf`` logit made the whole row NaN (torch's softmax), so AUROC ranked NaN scores silently and
    the curves held NaN. The row's softmax limit is one-hot at the ``+inf`` class: scikit-learn on it."""
    logits = np.array([[2., 1., 0.], [np.inf, 0., 1.], [0., 3., 1.], [0., 1., 4.], [1., 0., 2.], [0., 2., 1.]])
    t = np.array([0, 0, 1, 2, 1, 2])
    probs = sp_softmax(np.where(np.isinf(logits), 0.0, logits), axis=1)
    probs[1] = [1.0, 0.0, 0.0]
    want = [skm.roc_auc_score(t == k, probs[:, k]) for k in range(3)]
    got = fm.multiclass_auroc(num_classes=3, average=None)(torch.tensor(logits), torch.tensor(t))
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    fpr, tpr, _ = fm.multiclass_roc(num_classes=3)(torch.tensor(logits), torch.tensor(t))
    assert not any(bool(torch.isnan(x).any()) for x in (*fpr, *tpr))


def test_multiclass_hinge_with_an_infinite_logit_is_finite():
    """Crammer-Singer hinge on softmax scores; the ``+inf`` row is one-hot (margin 1, loss 0)."""
    logits = torch.tensor([[math.inf, 0.0, 1.0], [0.0, 2.0, 1.0]])
    t = torch.tensor([0, 2])
    p1 = sp_softmax([0.0, 2.0, 1.0])
    want = (0.0 + max(0.0, 1 - (p1[2] - p1[1]))) / 2  # row 0: margin 1 - 0 = 1, loss 0
    assert abs(float(fm.multiclass_hinge_loss(num_classes=3)(logits, t)) - want) < 1e-6


# ------------------------------------------------------------------ documented choices beside torchmetrics


def test_fairness_group_without_positives_names_that_group():
    """Group 0 has positives but a TPR of 0; group 1 has no positive target. torchmetrics reads 0 / 0 as 0
    and names the first zero rate (group 0), value 0. fmetrics: group 1's rate is undefined, so the ratio
    is NaN, keyed by the undefined group, with a warning (docs/classification.md, "Bad input")."""
    p = torch.tensor([0.1, 0.2, 0.9, 0.3, 0.8, 0.6])
    t = torch.tensor([1, 1, 0, 0, 0, 1])
    g = torch.tensor([0, 0, 1, 1, 2, 2])  # TPR: group 0 0/2, group 1 0/0, group 2 1/1
    assert tmf.binary_fairness(p, t, g, task="equal_opportunity") == {"EO_0_2": torch.tensor(0.0)}
    with pytest.warns(UserWarning, match=r"group \[1\] has no positive targets"):
        out = fm.binary_fairness(num_groups=3, task="equal_opportunity")(p, t, g)
    assert list(out) == ["EO_1_2"] and math.isnan(float(out["EO_1_2"]))
