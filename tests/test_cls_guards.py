"""Counting classification metrics: bad input, value checks at finalize, inputs as users pass them, edge cases."""
import math

import numpy as np
import pytest
import torch
import torchmetrics.functional.classification as tmf
from sklearn import metrics as skm

import fmetrics as fm
from fmetrics.classification import _format
from tests._kernels import on_path

# ------------------------------------------------------------------ value rules: counted in update, raised in finalize


def test_out_of_range_target_labels_raise_at_once_quoting_the_values():
    m = fm.multiclass_accuracy(num_classes=5)
    s0 = m.update(m.init(), torch.tensor([0, 1]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"^multiclass_accuracy: target values must be in \[0, 5\); "
                                         r"found 5 and 7 \(3 entries\)$"):
        m.update(s0, torch.tensor([0, 1, 2, 1]), torch.tensor([5, 7, 7, 1]))
    assert float(m.finalize(s0)) == 1.0  # the state the caller holds is untouched


def test_deferred_path_counts_and_raises_in_finalize_naming_value_and_call():
    m = fm.multiclass_accuracy(num_classes=3, average="micro")
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), torch.tensor([0, 1]), torch.tensor([0, 1]))
        s = m.update(s, torch.tensor([0, 1, 2, 1]), torch.tensor([0, 7, -2, 1]))  # no raise here
    with pytest.raises(ValueError, match=r"multiclass_accuracy: 2 input entries broke the rule: target.*the first "
                                         r"was 7 in update call 2") as err:
        m.finalize(s)
    assert "dropped" not in str(err.value)
    good = m.finalize(m.update(m.init(), torch.tensor([0, 1, 0, 1]), torch.tensor([0, 1, 0, 1])))
    assert float(good) == 1.0 and int(s.counts[:3].sum()) == 4  # raw layout: [targets | preds | hits]


CASES_BAD = [
    (fm.binary_f1_score(), torch.tensor([0.2, 0.9]), torch.tensor([2, 1]), "target values must be in \\[0, 2\\); found 2", "2"),
    (fm.binary_f1_score(), torch.tensor([3, 1]), torch.tensor([0, 1]), "preds values must be in \\[0, 2\\); found 3", "3"),
    (fm.binary_f1_score(), torch.tensor([0.5, float("nan")]), torch.tensor([0, 1]), "preds must not be NaN", "nan"),
    (fm.binary_f1_score(), torch.tensor([0.2, 0.9]), torch.tensor([0.5, 1.0]), "target values .* found 0.5", "0.5"),
    (fm.multiclass_precision(num_classes=3), torch.tensor([5, 1]), torch.tensor([0, 1]), "preds values .* found 5", "5"),
    (fm.multiclass_confusion_matrix(num_classes=3), torch.tensor([[0.1, float("nan"), 0.2]]), torch.tensor([0]),
     "preds must not be NaN", "nan"),
    (fm.multilabel_recall(num_labels=2), torch.tensor([[0.2, 0.9]]), torch.tensor([[0, 3]]), "target values .* found 3", "3"),
    (fm.multiclass_exact_match(num_classes=3), torch.tensor([0, 1]), torch.tensor([0, 3]), "target values .* found 3", "3"),
    (fm.binary_auroc(), torch.tensor([0.2, 0.9]), torch.tensor([2, 1]), "target values .* found 2", "2"),
    (fm.multiclass_auroc(num_classes=3), torch.tensor([[0.2, 0.3, 0.5]]), torch.tensor([4]), "target values .* found 4", "4"),
    (fm.binary_auroc(thresholds=5), torch.tensor([0.2, float("nan")]), torch.tensor([0, 1]), "preds must not be NaN", "nan"),
    (fm.binary_calibration_error(), torch.tensor([0.2, 0.9]), torch.tensor([0, 3]), "target values .* found 3", "3"),
    (fm.binary_hinge_loss(), torch.tensor([0.2, 0.9]), torch.tensor([0, 3]), "target values .* found 3", "3"),
    (fm.multilabel_ranking_loss(num_labels=2), torch.tensor([[0.2, 0.9]]), torch.tensor([[0, 3]]), "target values .* found 3", "3"),
]


@pytest.mark.parametrize("metric,preds,target,eager,first", CASES_BAD, ids=lambda x: getattr(x, "name", None))
def test_value_rules_raise_at_once_on_cpu(metric, preds, target, eager, first):
    s = metric.init()
    with pytest.raises(ValueError, match=f"{metric.name}: {eager}"):
        metric.update(s, preds, target)


@pytest.mark.parametrize("metric,preds,target,eager,first", CASES_BAD, ids=lambda x: getattr(x, "name", None))
def test_value_rules_deferred_raise_in_finalize(metric, preds, target, eager, first):
    with fm.validation.mode("deferred"):
        s = metric.update(metric.init(), preds, target)
    with pytest.raises(ValueError, match=f"{metric.name}: 1 input entry broke the rule: .* the first was {first} "
                                         "in update call 1") as err:
        metric.finalize(s)
    assert "dropped" not in str(err.value)


def test_invalid_entries_are_recorded_and_valid_ones_kept():
    m = fm.multiclass_stat_scores(num_classes=3, average="micro")
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), torch.tensor([0, 1, 2, 1]), torch.tensor([0, 9, 2, 1]))
    assert int(s.invalid.count) == 1 and float(s.invalid.first) == 9.0 and int(s.invalid.call) == 1
    hits, entries = s.counts[6:9], s.counts[:3].sum()  # raw layout: [targets | predictions | hits]
    assert hits.tolist() == [1, 1, 1] and entries.item() == 3  # the three valid entries are counted


def test_bad_group_ids_raise_at_once_and_deferred():
    m = fm.binary_fairness(num_groups=2)
    with pytest.raises(ValueError, match=r"binary_fairness: groups values must be in \[0, 2\); found 5"):
        m.update(m.init(), torch.tensor([0.9, 0.1]), torch.tensor([1, 0]), torch.tensor([0, 5]))
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), torch.tensor([0.9, 0.1]), torch.tensor([1, 0]), torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="1 input entry broke the rule: groups .* the first was 5"):
        m.finalize(s)


def test_torchmetric_keeps_the_good_batches_after_a_bad_one_raises():
    from adapters import TorchMetric

    tm = TorchMetric(fm.multiclass_accuracy(num_classes=3, average="micro"))
    tm.update(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 1]))
    with pytest.raises(ValueError, match="target values must be in"):
        tm.update(torch.tensor([0, 1]), torch.tensor([0, 3]))
    tm.update(torch.tensor([2]), torch.tensor([2]))
    assert float(tm.compute()) == 0.75  # 3 of the 4 good samples; the bad batch never entered the state


def test_nan_scores_and_probabilities_outside_unit_interval_rule():
    # the one rule: NaN scores are invalid input; a float batch with any value outside [0, 1] is logits
    m = fm.binary_accuracy()
    with pytest.raises(ValueError, match="preds must not be NaN"):
        m(torch.tensor([0.2, float("nan")]), torch.tensor([0, 1]))
    assert float(m(torch.tensor([-1.0, 2.0]), torch.tensor([0, 1]))) == 1.0  # sigmoid: 0.27, 0.88
    assert float(m(torch.tensor([0.2, 1.0]), torch.tensor([0, 1]))) == 1.0  # probabilities, 1.0 > 0.5


# ------------------------------------------------------------------ eager errors naming metric and argument


def test_num_classes_smaller_than_logits_width_raises_at_once():
    m = fm.multiclass_accuracy(num_classes=3)
    with pytest.raises(ValueError, match=r"multiclass_accuracy: argument `num_classes` expected the width of preds' class axis 4, got 3"):
        m.update(m.init(), torch.randn(5, 4), torch.randint(0, 3, (5,)))


@pytest.mark.parametrize("make,arg", [
    (lambda: fm.multiclass_accuracy(num_classes=5, average="mean"), "average"),
    (lambda: fm.multilabel_f1_score(num_labels=3, average="samples"), "average"),
    (lambda: fm.binary_accuracy(threshold=1.5), "threshold"),
    (lambda: fm.binary_accuracy(multidim_average="per_sample"), "multidim_average"),
    (lambda: fm.multiclass_accuracy(num_classes=5, top_k=6), "top_k"),
    (lambda: fm.multiclass_accuracy(num_classes=5, top_k=0), "top_k"),
    (lambda: fm.multiclass_accuracy(num_classes=1), "num_classes"),
    (lambda: fm.multilabel_accuracy(num_labels=None), "num_labels"),
    (lambda: fm.binary_precision(zero_division=0.5), "zero_division"),
    (lambda: fm.binary_fbeta_score(beta=0.0), "beta"),
    (lambda: fm.binary_confusion_matrix(normalize="rows"), "normalize"),
    (lambda: fm.multiclass_cohen_kappa(num_classes=3, weights="cubic"), "weights"),
    (lambda: fm.binary_accuracy(ignore_index=0.5), "ignore_index"),
    (lambda: fm.accuracy(task="multiclass"), "num_classes"),
    (lambda: fm.accuracy(task="multilabel"), "num_labels"),
    (lambda: fm.accuracy(task="regression"), "task"),
    (lambda: fm.cohen_kappa(task="multilabel"), "task"),
    (lambda: fm.exact_match(task="binary"), "task"),
    (lambda: fm.binary_fairness(num_groups=2, task="parity"), "task"),
    (lambda: fm.binary_groups_stat_rates(num_groups=0), "num_groups"),
])
def test_bad_configuration_raises_value_error_naming_metric_and_argument(make, arg):
    with pytest.raises(ValueError, match=rf"argument `{arg}` expected"):
        make()


@pytest.mark.parametrize("metric,preds,target,arg", [
    (fm.binary_accuracy(), torch.rand(4), torch.randint(0, 2, (5,)), "target"),
    (fm.binary_accuracy(), torch.rand(4, 2), torch.randint(0, 2, (4, 3)), "target"),
    (fm.multilabel_accuracy(num_labels=3), torch.rand(4, 2), torch.randint(0, 2, (4, 2)), "preds"),
    (fm.multilabel_accuracy(num_labels=3), torch.rand(4, 3), torch.randint(0, 2, (4, 2)), "target"),
    (fm.multiclass_accuracy(num_classes=3), torch.rand(4, 3, 2), torch.randint(0, 3, (4, 5)), "target"),
    (fm.multiclass_accuracy(num_classes=3), torch.randint(0, 3, (4,)), torch.randint(0, 3, (5,)), "preds"),
    (fm.multiclass_accuracy(num_classes=3, top_k=2), torch.randint(0, 3, (4,)), torch.randint(0, 3, (4,)), "preds"),
    (fm.binary_accuracy(multidim_average="samplewise"), torch.rand(4), torch.randint(0, 2, (4,)), "preds"),
    (fm.binary_accuracy(), torch.rand(4).to(torch.complex64), torch.randint(0, 2, (4,)), "preds"),
    (fm.binary_accuracy(), [0.1, 0.9], torch.randint(0, 2, (2,)), "preds"),
    (fm.binary_accuracy(), torch.tensor(0.5), torch.tensor(1), "preds"),
])
def test_bad_inputs_raise_value_error_naming_metric_and_argument(metric, preds, target, arg):
    with pytest.raises(ValueError, match=rf"{metric.name}: argument `{arg}` expected"):
        metric.update(metric.init(), preds, target)


def test_a_rejected_batch_loses_nothing_already_accumulated():
    m = fm.multiclass_f1_score(num_classes=3)
    p, t = torch.randn(10, 3), torch.randint(0, 3, (10,))
    s = m.update(m.init(), p, t)
    before = m.finalize(s)
    with pytest.raises(ValueError):
        m.update(s, torch.randn(4, 5), torch.randint(0, 3, (4,)))
    torch.testing.assert_close(m.finalize(m.update(s, p[:0], t[:0])), before)


# ------------------------------------------------------------------ inputs as users pass them


def test_binary_input_forms_agree():
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, 2, (50,), generator=g)
    logits = torch.randn(50, generator=g) * 3
    probs = torch.sigmoid(logits)
    labels = (probs > 0.5).long()
    want = skm.f1_score(t.numpy(), labels.numpy())
    m = fm.binary_f1_score()
    for p, tt in ((logits, t), (probs, t), (labels, t), (labels.bool(), t.bool()), (logits.unsqueeze(1), t),
                  (logits, t.unsqueeze(1)), (probs, t.float()), (logits.double(), t.int())):
        assert abs(float(m(p, tt)) - want) < 1e-12


def test_logits_detected_per_batch_without_host_sync():
    # -1.0 is outside [0, 1]: the whole batch is logits, so 0.6 -> sigmoid(0.6) = 0.646 > 0.5
    assert fm.binary_stat_scores()(torch.tensor([-1.0, 0.6, 0.4]), torch.tensor([0, 1, 1])).tolist() == \
        [2, 0, 1, 0, 2]
    # all inside [0, 1]: probabilities; 0.4 is negative
    assert fm.binary_stat_scores()(torch.tensor([0.0, 0.6, 0.4]), torch.tensor([0, 1, 1])).tolist() == \
        [1, 0, 1, 1, 2]
    flag = _format.logits_flag(torch.tensor([0.2, 1.5]))
    assert isinstance(flag, torch.Tensor) and flag.dim() == 0


def test_multiclass_target_column_and_extra_dims():
    g = torch.Generator().manual_seed(1)
    p = torch.randn(30, 4, generator=g)
    t = torch.randint(0, 4, (30,), generator=g)
    m = fm.multiclass_accuracy(num_classes=4, average="micro")
    torch.testing.assert_close(m(p, t.unsqueeze(1)), m(p, t))
    p3 = torch.randn(6, 4, 5, generator=g)
    t3 = torch.randint(0, 4, (6, 5), generator=g)
    torch.testing.assert_close(m(p3, t3), m(p3.movedim(1, -1).reshape(-1, 4), t3.reshape(-1)))


# ------------------------------------------------------------------ nasty cases vs the oracle


def test_tied_scores_take_the_first_class_like_argmax():
    p = torch.tensor([[0.3, 0.3, 0.1], [0.2, 0.4, 0.4], [0.5, 0.5, 0.5]])
    t = torch.tensor([1, 2, 0])
    got = fm.multiclass_confusion_matrix(num_classes=3)(p, t)
    assert got.tolist() == skm.confusion_matrix(t.numpy(), np.argmax(p.numpy(), 1), labels=[0, 1, 2]).tolist()
    # a probability exactly at the threshold is negative (strict >), as in torchmetrics
    assert fm.binary_stat_scores(threshold=0.5)(torch.tensor([0.5]), torch.tensor([1])).tolist() == [0, 0, 0, 1, 1]


def test_classes_absent_from_all_data_leave_the_macro_average():
    g = torch.Generator().manual_seed(2)
    p = torch.randint(0, 3, (40,), generator=g)
    t = torch.randint(0, 3, (40,), generator=g)
    for metric, sk in ((fm.multiclass_precision, skm.precision_score), (fm.multiclass_recall, skm.recall_score),
                       (fm.multiclass_f1_score, skm.f1_score)):
        got = float(metric(num_classes=8, average="macro")(p, t))
        want = sk(t.numpy(), p.numpy(), labels=[0, 1, 2], average="macro", zero_division=0)
        assert abs(got - want) < 1e-12
        got_none = metric(num_classes=8, average=None)(p, t)
        assert got_none.shape == (8,) and torch.all(got_none[3:] == 0)


@pytest.mark.parametrize("zero_division", [0, 1])
def test_all_negative_binary_targets(zero_division):
    p = torch.tensor([0.1, 0.2, 0.3])
    t = torch.zeros(3, dtype=torch.long)
    for metric, sk in ((fm.binary_precision, skm.precision_score), (fm.binary_recall, skm.recall_score),
                       (fm.binary_f1_score, skm.f1_score)):
        got = float(metric(zero_division=zero_division)(p, t))
        assert got == sk(t.numpy(), (p > 0.5).long().numpy(), zero_division=zero_division)
    assert float(fm.binary_specificity()(p, t)) == 1.0
    assert float(fm.binary_matthews_corrcoef()(p, t)) == float(tmf.binary_matthews_corrcoef(p, t))


def test_single_sample():
    p, t = torch.tensor([[0.1, 0.7, 0.2]]), torch.tensor([1])
    assert float(fm.multiclass_accuracy(num_classes=3)(p, t)) == 1.0
    assert float(fm.multiclass_f1_score(num_classes=3, average="micro")(p, t)) == 1.0
    assert fm.multiclass_confusion_matrix(num_classes=3)(p, t).sum() == 1
    assert float(fm.binary_accuracy()(torch.tensor([0.8]), torch.tensor([0]))) == 0.0


def test_batch_entirely_ignore_index_changes_nothing():
    g = torch.Generator().manual_seed(3)
    p = torch.randn(20, 4, generator=g)
    # (exact match is the exception: as in torchmetrics, ignored positions count as matched)
    for m in (fm.multiclass_f1_score(num_classes=4, ignore_index=-1), fm.multiclass_confusion_matrix(num_classes=4, ignore_index=-1),
              fm.multilabel_precision(num_labels=4, ignore_index=-1)):
        t = torch.randint(0, 2, (20, 4), generator=g) if m.name.startswith("multilabel") else \
            torch.randint(0, 4, (20,), generator=g)
        s = m.update(m.init(), p, t)
        shape = (7, 4) if m.name.startswith("multilabel") else (7,)
        s2 = m.update(s, torch.randn(7, 4, generator=g), torch.full(shape, -1))
        torch.testing.assert_close(m.finalize(s2), m.finalize(s))
    m = fm.binary_recall(ignore_index=255)
    s = m.update(m.init(), torch.rand(5), torch.full((5,), 255))
    with pytest.warns(UserWarning, match="no samples were seen"):  # every entry ignored: the empty-input rule
        assert math.isnan(float(m.finalize(s))) and int(s.counts.sum()) == 0


def test_empty_batch_and_no_data():
    m = fm.multiclass_accuracy(num_classes=3)
    s = m.update(m.init(), torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))
    assert int(s.counts.sum()) == 0
    with pytest.warns(UserWarning, match="no samples were seen"):
        assert math.isnan(float(m.finalize(s)))
    sw = fm.binary_accuracy(multidim_average="samplewise")
    assert sw.finalize(sw.init()).shape == (0,)


@pytest.mark.parametrize("preds,target", [
    ([1, 1, 0, 0], [1, 1, 0, 0]),  # all right
    ([1, 1, 0, 0], [0, 0, 1, 1]),  # all wrong
    ([1, 1, 1, 1], [1, 0, 1, 0]),  # constant predictions
    ([0, 0, 0, 0], [0, 0, 0, 0]),  # one class only
    ([1, 1, 1, 1], [1, 1, 1, 1]),
])
def test_matthews_degenerate_matrices_match_torchmetrics(preds, target):
    p, t = torch.tensor(preds), torch.tensor(target)
    assert abs(float(fm.binary_matthews_corrcoef()(p, t)) - float(tmf.binary_matthews_corrcoef(p, t))) < 1e-6


def test_validate_args_false_gives_the_same_values_on_valid_input():
    g = torch.Generator().manual_seed(5)
    p, t = torch.randn(60, 4, 3, generator=g), torch.randint(0, 4, (60, 3), generator=g)
    t = torch.where(torch.rand(t.shape, generator=g) < 0.1, -1, t)
    for make in (lambda v: fm.multiclass_f1_score(num_classes=4, ignore_index=-1, validate_args=v),
                 lambda v: fm.multiclass_accuracy(num_classes=4, top_k=2, multidim_average="samplewise", ignore_index=-1,
                                                  validate_args=v),
                 lambda v: fm.multiclass_confusion_matrix(num_classes=4, ignore_index=-1, validate_args=v),
                 lambda v: fm.multiclass_exact_match(num_classes=4, ignore_index=-1, validate_args=v)):
        torch.testing.assert_close(make(False)(p, t), make(True)(p, t))
    pl, tl = torch.rand(60, 4, generator=g), torch.randint(0, 2, (60, 4), generator=g)
    torch.testing.assert_close(fm.multilabel_recall(num_labels=4, validate_args=False)(pl, tl), fm.multilabel_recall(num_labels=4)(pl, tl))
    torch.testing.assert_close(fm.binary_precision(validate_args=False)(pl[:, 0], tl[:, 0]),
                               fm.binary_precision()(pl[:, 0], tl[:, 0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_argmax_classes_is_torch_argmax_on_ties_and_infinities(dtype, row_kernel):
    g = torch.Generator().manual_seed(6)
    for n, c in ((0, 3), (5, 2), (4000, 10), (1700, 23), (2**15, 2)):  # small ones take torch.argmax
        x = torch.randint(-2, 3, (n, c, 1), generator=g).to(dtype)  # many ties
        x[torch.rand(x.shape, generator=g) < 0.15] = float("inf")
        x[torch.rand(x.shape, generator=g) < 0.15] = -float("inf")
        labels, nan = _format.argmax_classes(x)
        assert torch.equal(labels, x.argmax(1)) and not nan.any()
    x = torch.tensor([[1.0, float("nan"), 3.0], [1.0, 2.0, 3.0]], dtype=dtype).unsqueeze(-1)
    assert _format.argmax_classes(x)[1].reshape(-1).tolist() == [True, False]



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_argmax_classes_rows_at_the_edges_of_the_float_range(dtype, row_kernel):
    """+inf next to the largest finite value, all -inf rows, subnormal gaps, signed zeros, NaN rows."""
    big, tiny, inf = torch.finfo(dtype).max, torch.finfo(dtype).smallest_normal * 2.0**-20, float("inf")
    g = torch.Generator().manual_seed(9)
    for c in (3, 100):
        x = torch.randn(2**15 // c + 8, c, generator=g).to(dtype)  # >= 2^15 scores: the vectorized path
        x[0], x[0, 1], x[0, c - 1] = big, inf, inf  # first +inf wins over the finite maximum
        x[1] = -inf  # all -inf: index 0
        x[2], x[2, c - 1] = -inf, -big
        x[3], x[3, 2] = tiny, 0.0  # maxima differ by a subnormal
        x[3, 1] = 2 * tiny
        x[4], x[4, 2] = 0.0, -0.0  # -0.0 == 0.0: the first one
        x[5] = inf
        x[6, 1] = float("nan")
        labels, nan = _format.argmax_classes(x.unsqueeze(-1))
        want = x.argmax(1)
        assert nan[:, 0].tolist() == [i == 6 for i in range(x.shape[0])]
        assert torch.equal(labels[:, 0][~nan[:, 0]], want[~nan[:, 0]])
        assert 0 <= int(labels.min()) and int(labels.max()) < c  # a NaN row still gets a valid index

def test_the_vectorized_argmax_path_obeys_the_transform_laws():
    # batches of >= 2^15 scores take argmax_classes' vectorized path (the law-suite cases are smaller)
    from fmetrics.testing import check_metric

    g = torch.Generator().manual_seed(7)
    batches = [(torch.randn(n, 20, generator=g), torch.randint(0, 20, (n,), generator=g)) for n in (1700, 1800)]
    batches[0][0][3, 5] = float("inf")
    for metric in (fm.multiclass_f1_score(num_classes=20), fm.multiclass_confusion_matrix(num_classes=20)):
        check_metric(metric, batches, laws=("reference", "split invariance", "vmap", "no host sync", "compile"),
                     reference=lambda p, t: tmf.multiclass_f1_score(p, t, 20) if metric.name.endswith("score")
                     else tmf.multiclass_confusion_matrix(p, t, 20), reference_rtol=1e-5)


def _sklearn_top1_counts(x, t, c):
    """The targets', labels' and hits' counts (`_format.top1_counts`' layout) from sklearn's confusion matrix."""
    cm = skm.confusion_matrix(t.numpy(), x.argmax(1).numpy(), labels=np.arange(c))
    return np.concatenate([cm.sum(1), cm.sum(0), np.diag(cm)])


@pytest.fixture(params=["native", "numpy"])
def row_kernel(request, monkeypatch):
    """Both host row kernels: `fmetrics._native`'s and numpy's row argmax."""
    return on_path(request.param, monkeypatch, _format)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_top1_counts_are_torch_argmax_and_count_as_sklearn(dtype, row_kernel):
    """The eager top-1 path on ties, infinities and signed zeros and on a non-contiguous batch: its labels are
    torch's ``argmax``, its counts sklearn's confusion matrix (7 / 100 / 300 classes)."""
    g = torch.Generator().manual_seed(11)
    for c, ties in ((100, False), (7, True), (300, False)):
        n = 2**15 // c + 5
        x = torch.randint(-2, 3, (n, c), generator=g).to(dtype) if ties else torch.randn(n, c, generator=g, dtype=dtype)
        x[0], x[1], x[2] = float("inf"), -float("inf"), 0.0
        x[2, c - 1] = -0.0
        t = torch.randint(0, c, (n,), generator=g)
        want = _sklearn_top1_counts(x, t, c)
        for p in (x, x.t().contiguous().t()):
            assert torch.equal(torch.from_numpy(_format._host_argmax(p)[0]), p.argmax(1))
            np.testing.assert_array_equal(_format.top1_counts("m", p, t, c), want)
        cm = skm.confusion_matrix(t.numpy(), x.argmax(1).numpy(), labels=np.arange(c))
        tp, fp, fn = np.diag(cm), cm.sum(0) - np.diag(cm), cm.sum(1) - np.diag(cm)
        want = np.stack([tp, fp, n - tp - fp - fn, fn, tp + fn], 1)
        for validate in (True, False):  # False: the generic path (argmax_classes, then the same bincounts)
            got = fm.multiclass_stat_scores(num_classes=c, average="none", validate_args=validate)(x, t)
            np.testing.assert_array_equal(got.numpy(), want)
    assert _format.top1_counts("m", x[:100], t[:100], c) is None  # small batches: the generic path
    assert _format.top1_counts("m", x.half(), t, c) is None


def test_top1_counts_split_over_threads_match_one_thread(row_kernel):
    """``torch.get_num_threads() > 1``: a large batch's rows go to several threads (`_format._PART`
    scores each at least); labels, NaN rows (one in each part) and counts as on one thread."""
    g = torch.Generator().manual_seed(13)
    n, c = 3 * _format._PART // 100 + 7, 100
    x, t = torch.randn(n, c, generator=g), torch.randint(0, c, (n,), generator=g)
    x[5, 3] = x[n - 2, 0] = float("nan")
    threads = torch.get_num_threads()
    try:
        for k in (1, 2, 3):
            torch.set_num_threads(k)
            labels, top = _format._host_argmax(x)
            nan = torch.from_numpy(np.isnan(top))
            assert torch.equal(torch.from_numpy(labels)[~nan], x.argmax(1)[~nan])
            assert torch.equal(torch.from_numpy(labels)[nan], torch.tensor([3, 0]))  # the first NaN, as torch
            assert torch.equal(torch.from_numpy(top)[~nan], x.max(1).values[~nan])
            assert np.flatnonzero(nan).tolist() == [5, n - 2]
            with pytest.raises(ValueError, match=r"found nan \(2 rows\)$"):
                _format.top1_counts("m", x, t, c)
            np.testing.assert_array_equal(_format.top1_counts("m", x[6:n - 2], t[6:n - 2], c),
                                          _sklearn_top1_counts(x[6:n - 2], t[6:n - 2], c))
            got = fm.multiclass_stat_scores(num_classes=c, average="none")(x[6:n - 2], t[6:n - 2])
            cm = skm.confusion_matrix(t[6:n - 2].numpy(), x[6:n - 2].argmax(1).numpy(), labels=np.arange(c))
            np.testing.assert_array_equal(got[:, 0].numpy(), np.diag(cm))
            np.testing.assert_array_equal(got[:, 4].numpy(), cm.sum(1))
    finally:
        torch.set_num_threads(threads)


def _threaded_update_in_child(queue, x, t, want):
    torch.set_num_threads(2)
    queue.put(bool(torch.equal(fm.multiclass_accuracy(num_classes=x.shape[1])(x, t), want)))


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="no fork")
def test_top1_row_split_works_in_a_forked_child():
    """The argmax thread pool of the parent does not exist in a forked child: the child builds its own."""
    import multiprocessing

    g = torch.Generator().manual_seed(14)
    n = 2 * _format._PART // 100 + 10  # two threads' worth
    x, t = torch.randn(n, 100, generator=g), torch.randint(0, 100, (n,), generator=g)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        want = fm.multiclass_accuracy(num_classes=100)(x, t)  # the parent's pool now exists
    finally:
        torch.set_num_threads(threads)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_threaded_update_in_child, args=(queue, x, t, want))
    child.start()
    try:
        assert queue.get(timeout=60) is True
    finally:
        child.join(10)


def test_top1_path_raises_on_nan_rows_with_the_state_untouched():
    g = torch.Generator().manual_seed(12)
    x, t = torch.randn(2**15 // 100 + 1, 100, generator=g), torch.randint(0, 100, (2**15 // 100 + 1,), generator=g)
    m = fm.multiclass_f1_score(num_classes=100)
    s0 = m.update(m.init(), x, t)
    bad = x.clone()
    bad[3, 7] = bad[9, 0] = bad[9, 50] = float("nan")
    with pytest.raises(ValueError, match=r"^multiclass_f1_score: preds must not be NaN; found nan \(2 rows\)$"):
        m.update(s0, bad, t)
    torch.testing.assert_close(m.finalize(s0), tmf.multiclass_f1_score(x, t, 100).double())


def test_classes_absent_from_a_batch_but_present_in_others():
    g = torch.Generator().manual_seed(8)
    t1, p1 = torch.randint(0, 2, (30,), generator=g), torch.randint(0, 2, (30,), generator=g)
    t2, p2 = torch.randint(2, 6, (30,), generator=g), torch.randint(1, 6, (30,), generator=g)
    t, p = torch.cat([t1, t2]).numpy(), torch.cat([p1, p2]).numpy()
    for average in ("macro", "weighted", "micro", None):
        for metric, sk in ((fm.multiclass_precision, skm.precision_score), (fm.multiclass_f1_score, skm.f1_score),
                           (fm.multiclass_jaccard_index, skm.jaccard_score)):
            m = metric(num_classes=6, average=average)
            got = m.finalize(m.update(m.update(m.init(), p1, t1), p2, t2))
            want = sk(t, p, labels=np.arange(6), average=average, zero_division=0)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    m = fm.multiclass_cohen_kappa(num_classes=6, weights="quadratic")
    got = m.finalize(m.update(m.update(m.init(), p1, t1), p2, t2))
    assert abs(float(got) - skm.cohen_kappa_score(t, p, weights="quadratic")) < 1e-12


def test_a_nan_score_neither_hides_nor_makes_a_logits_batch():
    # hand count: [nan, 0.3, 2.0] holds 2.0 -> logits: sigmoid(0.3) = 0.57 and sigmoid(2) = 0.88 are positive,
    # NaN is not; [nan, 0.3, inf] also holds a value outside [0, 1]; [nan, 0.3] is probabilities: 0.3 negative
    m = fm.binary_stat_scores(validate_args=False)
    nan, inf = float("nan"), float("inf")
    assert m(torch.tensor([nan, 0.3, 2.0]), torch.tensor([0, 1, 1])).tolist() == [2, 0, 1, 0, 2]
    assert m(torch.tensor([nan, 0.3, inf]), torch.tensor([0, 1, 1])).tolist() == [2, 0, 1, 0, 2]
    assert m(torch.tensor([nan, 0.3]), torch.tensor([0, 1])).tolist() == [0, 0, 1, 1, 1]
    assert m(torch.zeros(0), torch.zeros(0, dtype=torch.long)).tolist() == [0, 0, 0, 0, 0]
