"""Classification on core v2: one family builder (shared sort), doctests, ownership, metadata, two defects."""
from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import fmetrics
import fmetrics as fm
from fmetrics import validation
import fmetrics.classification as cls
from fmetrics.classification.curves import _curve

# ---------------------------------------------------------------------- one family, one sort


def _count_sorts(monkeypatch):
    """The rows of each column sort: a joined column (`_curve._sorted`) or a binary state's chunks sorted part
    by part (`_curve.sort_column_parts`)."""
    calls = []
    real, real_parts = _curve._sorted, _curve.sort_column_parts

    def counted(scores, labels):
        calls.append(scores.numel())
        return real(scores, labels)

    def counted_parts(parts, device):
        calls.append(sum(s.numel() for s, _ in parts()))
        return real_parts(parts, device)

    monkeypatch.setattr(_curve, "_sorted", counted)
    monkeypatch.setattr(_curve, "sort_column_parts", counted_parts)
    return calls


@pytest.mark.parametrize("thresholds", [None])
def test_roc_auroc_ap_collection_sorts_once(monkeypatch, thresholds):
    calls = _count_sorts(monkeypatch)
    g = torch.Generator().manual_seed(0)
    p, y = torch.rand(300, generator=g), torch.randint(0, 2, (300,), generator=g)
    c = fm.collection({"roc": fm.binary_roc(), "auroc": fm.binary_auroc(), "ap": fm.binary_average_precision()})
    s = c.update(c.init(), p, y)
    assert len(s) == 1  # one state for the three members
    out = c.finalize(s)
    assert calls == [300]  # one sort of the 300 scores for ROC, AUROC and AP together
    alone = [fm.binary_roc()(p, y)[0], fm.binary_auroc()(p, y), fm.binary_average_precision()(p, y)]
    torch.testing.assert_close(out["roc"][0], alone[0])
    torch.testing.assert_close(out["auroc"], alone[1])
    torch.testing.assert_close(out["ap"], alone[2])


def test_multilabel_collection_sorts_each_label_once(monkeypatch):
    calls = _count_sorts(monkeypatch)
    g = torch.Generator().manual_seed(1)
    p, y = torch.rand(50, 3, generator=g), torch.randint(0, 2, (50, 3), generator=g)
    c = fm.collection({"auroc": fm.multilabel_auroc(num_labels=3), "ap": fm.multilabel_average_precision(num_labels=3),
                       "roc": fm.multilabel_roc(num_labels=3)})
    c(p, y)
    assert calls == [50, 50, 50]


def test_stat_scores_members_share_one_state_and_one_finalize_step():
    fam_members = [fm.multiclass_accuracy(num_classes=3), fm.multiclass_f1_score(num_classes=3, average="micro"),
                   fm.multiclass_precision(num_classes=3, zero_division=1)]
    assert len({m.state_key for m in fam_members}) == 1
    assert all(m.shared is not None for m in fam_members)


def test_old_builders_are_gone():
    from fmetrics.classification import stat_scores
    from fmetrics.classification.curves import _scores

    for name in ("counts_metric", "scored_metric", "task_dispatch"):
        assert not hasattr(stat_scores, name)
    assert _scores.Family is fmetrics.Family  # the curves' own Family class is gone


# ---------------------------------------------------------------------- documentation
# (the examples themselves run in tests/test_doctests.py, the project-wide doctest runner, module by module)


def _public_factories():
    return [(n, getattr(fm, n)) for n in cls.__all__]


@pytest.mark.parametrize("name,fn", _public_factories(), ids=[n for n, _ in _public_factories()])
def test_every_factory_documents_args_inputs_returns_and_an_example(name, fn):
    doc = fn.__doc__
    for section in ("Args:", "Inputs:", "Returns:", "Example::", ">>>"):
        assert section in doc, f"{name}: no {section}"
    for arg, p in inspect.signature(fn).parameters.items():
        assert f"  {arg}: " in doc, f"{name}: argument {arg} undocumented"
        assert p.kind is p.KEYWORD_ONLY, f"{name}: {arg} is not keyword-only"
        assert p.annotation is not p.empty, f"{name}: {arg} has no type"
    assert doc.count(">>>") >= 1 and doc.index("Example::") > doc.index("Returns:")


# ---------------------------------------------------------------------- ownership and autograd

KEEPS_CHUNKS = [
    fm.binary_auroc(), fm.binary_roc(), fm.binary_average_precision(), fm.binary_eer(),
    fm.binary_precision_recall_curve(), fm.multilabel_auroc(num_labels=2), fm.multiclass_auroc(num_classes=2),
    fm.binary_accuracy(multidim_average="samplewise"), fm.multiclass_exact_match(num_classes=2, multidim_average="samplewise"),
]


def _inputs(m):
    g = torch.Generator().manual_seed(5)
    if m.name.startswith("multilabel"):
        return torch.rand(20, 2, generator=g), torch.randint(0, 2, (20, 2), generator=g)
    if m.name == "multiclass_auroc":
        return torch.rand(20, 2, generator=g).softmax(1), torch.randint(0, 2, (20,), generator=g)
    if "samplewise" in repr(m):
        shape = (20, 3)
        p = torch.rand(shape, generator=g) if m.name.startswith("binary") else torch.randint(0, 2, shape, generator=g)
        return p, torch.randint(0, 2, shape, generator=g)
    return torch.rand(20, generator=g), torch.randint(0, 2, (20,), generator=g)


@pytest.mark.parametrize("m", KEEPS_CHUNKS, ids=repr)
def test_refilling_the_input_buffer_leaves_the_state_alone(m):
    preds, target = _inputs(m)
    s = m.update(m.init(), preds, target)
    before = m.finalize(s)
    preds.fill_(0.25 if preds.is_floating_point() else 1)
    target.fill_(1)
    after = m.finalize(s)
    for a, b in zip(torch.utils._pytree.tree_leaves(before), torch.utils._pytree.tree_leaves(after)):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("m", KEEPS_CHUNKS + [fm.binary_accuracy(), fm.binary_calibration_error(),
                                              fm.binary_hinge_loss()], ids=repr)
def test_states_hold_no_autograd_graph(m):
    preds, target = _inputs(m)
    if not preds.is_floating_point():
        pytest.skip("integer predictions carry no graph")
    preds = preds.clone().requires_grad_(True)
    s = m.update(m.init(), preds * 1.0, target)
    assert not any(x.requires_grad for x in torch.utils._pytree.tree_leaves(s))


def test_accumulators_stay_int64_and_float64():
    s = fm.binary_calibration_error().update(fm.binary_calibration_error().init(), torch.rand(8).half(),
                                             torch.randint(0, 2, (8,)))
    assert s.count.dtype == torch.int64 and s.confidence.dtype == torch.float64
    s = fm.multiclass_accuracy(num_classes=3).init()
    assert s.counts.dtype == torch.int64


# ---------------------------------------------------------------------- metadata


@pytest.mark.parametrize("name,fn", _public_factories(), ids=[n for n, _ in _public_factories()])
def test_every_metric_declares_its_metadata(name, fn):
    kwargs = {}
    params = inspect.signature(fn).parameters
    if "task" in params and name != "binary_fairness":
        kwargs["task"] = "binary"
    for arg, value in (("num_classes", 3), ("num_labels", 3), ("num_groups", 2), ("beta", 1.0),
                       ("min_precision", 0.5), ("min_recall", 0.5), ("min_specificity", 0.5),
                       ("min_sensitivity", 0.5)):
        if arg in params and params[arg].default is inspect.Parameter.empty:
            kwargs[arg] = value
    if name in ("exact_match",):
        kwargs.update(task="multiclass", num_classes=3)
    m = fn(**kwargs)
    assert m.is_differentiable is False
    if name == "delong_test":  # a test, not a score: its z statistic is unbounded and no direction is better
        assert m.bounds == (None, None) and m.higher_is_better is None
        return
    assert m.bounds != (None, None), f"{name}: no bounds"
    expected_none = ("stat_scores", "confusion_matrix", "_roc", "precision_recall_curve", "groups_stat_rates")
    if name == "roc" or any(name.endswith(k) for k in expected_none):
        assert m.higher_is_better is None
    else:
        assert m.higher_is_better in (True, False)
    lower = ("hamming_distance", "eer", "calibration_error", "hinge_loss", "ranking_loss", "coverage_error")
    if any(name.endswith(k) for k in lower):
        assert m.higher_is_better is False


# ---------------------------------------------------------------------- the two defects of issue 11 §11


def test_precision_at_fixed_recall_with_an_empty_top_bin_matches_torchmetrics():
    tmf = pytest.importorskip("torchmetrics.functional.classification")
    p, y = torch.tensor([0.2, 0.8]), torch.tensor([0, 1])
    got = fm.binary_precision_at_fixed_recall(min_recall=0.0, thresholds=3)(p, y)
    want = tmf.binary_precision_at_fixed_recall(p, y, min_recall=0.0, thresholds=3)
    assert [float(x) for x in got] == [float(x) for x in want] == [1.0, 0.5]
    facade = fm.precision_at_fixed_recall(task="binary", min_recall=0.0, thresholds=3)(p, y)
    assert [float(x) for x in facade] == [1.0, 0.5]
    pm, ym = torch.tensor([[0.2, 0.8], [0.7, 0.3]]), torch.tensor([1, 0])
    got = fm.multiclass_precision_at_fixed_recall(num_classes=2, min_recall=0.0, thresholds=3)(pm, ym)
    want = tmf.multiclass_precision_at_fixed_recall(pm, ym, num_classes=2, min_recall=0.0, thresholds=3)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b.double())
    yl = torch.tensor([[0, 1], [1, 0]])
    got = fm.multilabel_precision_at_fixed_recall(num_labels=2, min_recall=0.0, thresholds=3)(pm, yl)
    want = tmf.multilabel_precision_at_fixed_recall(pm, yl, num_labels=2, min_recall=0.0, thresholds=3)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b.double())


def test_fairness_with_unseen_groups_is_nan_with_a_warning():
    m = fm.binary_fairness(num_groups=4)
    p, y, g = torch.tensor([0.2, 0.8, 0.9, 0.1]), torch.tensor([0, 1, 1, 0]), torch.tensor([0, 2, 0, 2])
    with pytest.warns(UserWarning, match=r"groups \[1, 3\] have no samples"):
        out = m(p, y, g)
    assert all(torch.isnan(v) for v in out.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every group seen: no warning, a number
        out = fm.demographic_parity(num_groups=2)(torch.tensor([0.9, 0.2, 0.8, 0.7]), torch.tensor([0, 0, 1, 1]))
    assert out == {"DP_0_1": torch.tensor(0.5, dtype=torch.float64)}


# ---------------------------------------------------------------------- NaN scores: one O(N) test in update


_NAN_ROW = torch.tensor([[0.1, float("nan"), 0.2], [0.1, 0.2, 0.3], [0.5, 0.2, 0.3]])


@pytest.mark.parametrize("m", [fm.multiclass_accuracy(num_classes=3), fm.multiclass_f1_score(num_classes=3, top_k=2),
                               fm.multiclass_confusion_matrix(num_classes=3), fm.multiclass_exact_match(num_classes=3),
                               fm.multiclass_stat_scores(num_classes=3, multidim_average="samplewise")], ids=repr)
def test_nan_score_rows_raise_at_once_without_a_pass_over_the_scores(monkeypatch, m):
    from fmetrics.classification import _format

    sums = []
    monkeypatch.setattr(_format, "_quote_nan", lambda *a: sums.append(a))  # the eager check's full pass
    preds, target = _NAN_ROW, torch.tensor([0, 1, 2])
    if "samplewise" in repr(m):
        preds, target = preds.unsqueeze(-1), target.unsqueeze(-1)
    s = m.init()
    with pytest.raises(ValueError, match=rf"{m.name}: preds must not be NaN; found nan \(1 row\)"):
        m.update(s, preds, target)
    assert sums == []  # found from the top score in update, O(N), not by summing the N x C scores
    with validation.mode("deferred"):  # as on an accelerator: counted, raised by finalize, good rows kept
        s = m.update(m.init(), preds, target)
    with pytest.raises(ValueError, match="1 input entry broke the rule"):
        m.finalize(s)


def test_a_nan_row_under_ignore_index_is_left_out_quietly():
    m = fm.multiclass_accuracy(num_classes=3, average="micro", ignore_index=0)
    assert float(m(_NAN_ROW, torch.tensor([0, 2, 0]))) == 1.0
