"""Guards of the score / curve metrics: hard-label warning, value counts, config and shape errors, state sharing."""
import warnings

import pytest
import torch

import fmetrics as fm
from fmetrics.testing import assert_values_close
from fmetrics.classification.curves._scores import BinnedState
from tests._counting import counting


def run(metric, batches):
    s = metric.init()
    for b in batches:
        s = metric.update(s, *b)
    return s


# ---------------------------------------------------------------------- hard predictions


@pytest.mark.parametrize("factory", [fm.binary_auroc, fm.binary_average_precision])
@pytest.mark.parametrize("thresholds", [None, 10])
@pytest.mark.parametrize("dtype", [torch.long, torch.float32])
def test_hard_predictions_warn_at_finalize(factory, thresholds, dtype):
    m = factory(thresholds=thresholds)
    preds, target = torch.tensor([0, 1, 1, 0, 1], dtype=dtype), torch.tensor([0, 1, 0, 0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = m.update(m.init(), preds, target)  # nothing in update
    with pytest.warns(UserWarning, match="hard labels, not scores"):
        m.finalize(s)


def test_scores_do_not_warn_and_multilabel_hard_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fm.binary_auroc()(torch.tensor([0.2, 0.9, 0.5]), torch.tensor([0, 1, 1]))
    with pytest.warns(UserWarning, match="hard labels"):
        fm.multilabel_auroc(num_labels=2, thresholds=5)(torch.tensor([[0., 1.], [1., 0.]]), torch.tensor([[0, 1], [1, 1]]))


# ---------------------------------------------------------------------- value rules (counted, raised in finalize)


@pytest.mark.parametrize("thresholds", [None, 5])
def test_out_of_range_labels_raise_at_finalize_with_count(thresholds):
    m = fm.binary_auroc(thresholds=thresholds)
    with pytest.raises(ValueError, match=r"binary_auroc: target values must be in \[0, 2\); found 2 and 5"):
        m.update(m.init(), torch.tensor([0.1, 0.7, 0.4, 0.3]), torch.tensor([0, 1, 2, 5]))
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), torch.tensor([0.1, 0.7, 0.4, 0.3]), torch.tensor([0, 1, 2, 5]))
    assert int(s.invalid.count) == 2
    with pytest.raises(ValueError, match="binary_auroc: 2 input entries broke the rule: target values.*first was 2"):
        m.finalize(s)
    mc = fm.multiclass_roc(num_classes=3, thresholds=thresholds, ignore_index=-1)
    with fm.validation.mode("deferred"):
        s = mc.update(mc.init(), torch.rand(4, 3).softmax(1), torch.tensor([0, -1, 3, 2]))
    with pytest.raises(ValueError, match="1 input entry broke the rule"):
        mc.finalize(s)


def test_validate_args_false_skips_the_report():
    m = fm.binary_average_precision(validate_args=False)
    p, t = torch.tensor([0.1, 0.7, 0.4, 0.3]), torch.tensor([2, 1, 0, 1])  # target 2 is out of range
    # no check: 2 is a non-positive (as torchmetrics with validate_args=False); ranking +, -, +, -:
    # AP = (1/1 + 2/3) / 2 = 5/6
    assert m(p, t).item() == pytest.approx(5 / 6, abs=1e-12)
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), p, t)
    assert m.finalize(s).item() == pytest.approx(5 / 6, abs=1e-12)  # and nothing is reported at finalize
    with pytest.raises(ValueError, match="target"):
        fm.binary_average_precision()(p, t)  # what validate_args=False skips


def test_nan_scores_are_invalid_input():
    m = fm.binary_auroc()
    with pytest.raises(ValueError, match="binary_auroc: preds must not be NaN"):
        m.update(m.init(), torch.tensor([0.1, float("nan"), 0.8]), torch.tensor([0, 1, 1]))
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), torch.tensor([0.1, float("nan"), 0.8]), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match="broke the rule: .*float preds not NaN; the first was nan"):
        m.finalize(s)


# ---------------------------------------------------------------------- config and shape errors


@pytest.mark.parametrize("make,arg", [
    (lambda: fm.binary_auroc(thresholds=1), "thresholds"),
    (lambda: fm.binary_roc(thresholds=[0.2, 1.5]), "thresholds"),
    (lambda: fm.binary_roc(thresholds=torch.ones(2, 2)), "thresholds"),
    (lambda: fm.binary_auroc(max_fpr=0.0), "max_fpr"),
    (lambda: fm.multiclass_auroc(num_classes=3, average="micro"), "average"),
    (lambda: fm.multiclass_roc(num_classes=3, average="weighted"), "average"),
    (lambda: fm.multilabel_auroc(num_labels=1), "num_labels"),
    (lambda: fm.auroc(task="multiclass"), "num_classes"),
    (lambda: fm.auroc(task="multiclasss", num_classes=3), "task"),
    (lambda: fm.binary_recall_at_fixed_precision(min_precision=1.5), "min_precision"),
    (lambda: fm.multilabel_specificity_at_sensitivity(num_labels=3, min_sensitivity=-0.1), "min_sensitivity"),
    (lambda: fm.binary_logauc(fpr_range=(0.5, 0.1)), "fpr_range"),
    (lambda: fm.multiclass_logauc(num_classes=3, average="weighted"), "average"),
    (lambda: fm.binary_calibration_error(n_bins=0), "n_bins"),
    (lambda: fm.binary_calibration_error(norm="l3"), "norm"),
    (lambda: fm.calibration_error(task="multilabel"), "task"),
    (lambda: fm.multiclass_hinge_loss(num_classes=3, multiclass_mode="ovr"), "multiclass_mode"),
    (lambda: fm.binary_hinge_loss(squared=1), "squared"),
    (lambda: fm.binary_eer(ignore_index=0.5), "ignore_index"),
    (lambda: fm.multilabel_coverage_error(num_labels=None), "num_labels"),
])
def test_bad_config_raises_naming_the_argument(make, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        make()


@pytest.mark.parametrize("metric,preds,target,arg", [
    (fm.binary_auroc(), torch.rand(4), torch.randint(0, 2, (5,)), "target"),
    (fm.multiclass_auroc(num_classes=3), torch.rand(4, 5), torch.randint(0, 3, (4,)), "num_classes"),
    (fm.multiclass_roc(num_classes=3, thresholds=5), torch.randint(0, 3, (4,)), torch.randint(0, 3, (4,)), "preds"),
    (fm.multilabel_average_precision(num_labels=3), torch.rand(4, 2), torch.randint(0, 2, (4, 2)), "preds"),
    (fm.multiclass_calibration_error(num_classes=3), torch.rand(4, 4), torch.randint(0, 3, (4,)), "num_classes"),
    (fm.multilabel_ranking_loss(num_labels=3), torch.rand(4, 3), torch.randint(0, 2, (4, 2)), "target"),
])
def test_bad_shapes_raise_eagerly_and_keep_the_state(metric, preds, target, arg):
    good = metric.init()
    with pytest.raises(ValueError, match=f"{metric.name}: argument `{arg}`"):
        metric.update(good, preds, target)
    assert all(x.numel() == 0 or int(x.nan_to_num().abs().sum()) == 0 for x in torch.utils._pytree.tree_leaves(good))


# ---------------------------------------------------------------------- states


def test_binned_state_is_bounded_and_sum_mergeable():
    m = fm.binary_roc(thresholds=100)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.rand(1000, generator=g), torch.randint(0, 2, (1000,), generator=g)) for _ in range(5)]
    s = run(m, batches)
    assert isinstance(s, BinnedState) and s.hist.shape == (1, 101, 2)
    assert int(s.hist.sum()) == 5000
    assert m.reductions == BinnedState(hist="sum", soft="sum", invalid=None)


@pytest.mark.parametrize("thresholds", [None, 20])
def test_curve_metrics_over_one_configuration_share_one_update(thresholds):
    kw = {"thresholds": thresholds, "ignore_index": -1}
    members = {
        "auroc": fm.binary_auroc(**kw),
        "auroc_partial": fm.binary_auroc(max_fpr=0.2, **kw),
        "ap": fm.binary_average_precision(**kw),
        "roc": fm.binary_roc(**kw),
        "eer": fm.binary_eer(**kw),
        "rec@p": fm.binary_recall_at_fixed_precision(min_precision=0.6, **kw),
    }
    assert len({m.state_key for m in members.values()}) == 1
    wrapped, calls = counting(members)
    col = fm.collection(wrapped)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.rand(30, generator=g), torch.randint(-1, 2, (30,), generator=g)) for _ in range(3)]
    values = col.finalize(run(col, batches))
    assert len(calls) == len(batches)
    for name, m in members.items():
        assert_values_close(values[name], m.finalize(run(m, batches)), 0, 0, name)


def test_ranking_metrics_share_one_update():
    members = {"lrap": fm.multilabel_ranking_average_precision(num_labels=4), "loss": fm.multilabel_ranking_loss(num_labels=4),
               "coverage": fm.multilabel_coverage_error(num_labels=4)}
    wrapped, calls = counting(members)
    col = fm.collection(wrapped)
    g = torch.Generator().manual_seed(2)
    batches = [(torch.rand(10, 4, generator=g), torch.randint(0, 2, (10, 4), generator=g)) for _ in range(3)]
    values = col.finalize(run(col, batches))
    assert len(calls) == 3
    for name, m in members.items():
        torch.testing.assert_close(values[name], m.finalize(run(m, batches)))


def test_packed_float32_sort_matches_the_generic_path():
    """The numpy sort of packed (score bits, label) keys, negatives, -0.0 and ties included."""
    from fmetrics.classification.curves._curve import exact_auroc, exact_counts, sort_column

    g = torch.Generator().manual_seed(3)
    scores = torch.cat([torch.randn(200, generator=g).round(decimals=1), torch.tensor([-0.0, 0.0, -0.0])])
    labels = torch.rand(203, generator=g) < 0.4
    packed, generic = exact_counts(sort_column(scores, labels)), exact_counts(sort_column(scores.double(), labels))
    for a, b in zip(packed[:5], generic[:5]):
        torch.testing.assert_close(a.double(), b.double())
    torch.testing.assert_close(exact_auroc(sort_column(scores, labels), "t")[0],
                               exact_auroc(sort_column(scores.double(), labels), "t")[0])
    assert int((packed.thr == 0).sum()) == 1  # -0.0 and 0.0 share one threshold
