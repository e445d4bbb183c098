"""Parity of the counting classification metrics with scikit-learn (and torchmetrics where sklearn has none).

Randomized inputs over metric x task x average x ignore_index x input form
(probabilities, logits, labels), fed in several batches. Expected values come
from scikit-learn (``*_score``, ``confusion_matrix``, per-class counts from
``multilabel_confusion_matrix`` with the formula written here), or from
torchmetrics for samplewise averaging, top-k macro and group fairness.

Set ``FMETRICS_PARITY_LOG=<file>`` to append the largest deviation per test.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torchmetrics.functional.classification as tmf
from sklearn import metrics as skm

import fmetrics as fm

C, L, N = 6, 4, 240


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _log(name, dev):
    path = os.environ.get("FMETRICS_PARITY_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{name}\t{dev:.3e}\n")


def assert_close(actual, expected, name, rtol=1e-9, atol=1e-12):
    a = torch.as_tensor(actual).double()
    e = torch.as_tensor(np.asarray(expected, dtype=np.float64))
    assert a.shape == e.shape, f"{name}: shape {tuple(a.shape)} != {tuple(e.shape)}"
    finite = ~(torch.isnan(a) & torch.isnan(e))
    dev = float((a - e)[finite].abs().max()) if finite.any() else 0.0
    _log(name, dev)
    torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{name}: {m}")


def run_batches(metric, *inputs, pieces=3):
    """Feeds ``inputs`` in ``pieces`` uneven batches (the metric must be split-invariant)."""
    n = inputs[0].shape[0]
    cuts = [0, n // 5, n // 2, n][: pieces] + [n]
    s = metric.init()
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        s = metric.update(s, *(x[lo:hi] for x in inputs))
    return metric.finalize(s)


def _ignore(t, g, ignore):
    if ignore is None:
        return t
    return torch.where(torch.rand(t.shape, generator=g) < 0.15, torch.full_like(t, ignore), t)


# ------------------------------------------------------------------ binary


def binary_inputs(seed, form, ignore=None):
    g = _gen(seed)
    t = _ignore(torch.randint(0, 2, (N,), generator=g), g, ignore)
    if form == "probs":
        p = torch.rand(N, generator=g)
    elif form == "logits":
        p = torch.randn(N, generator=g) * 3
    else:
        p = torch.randint(0, 2, (N,), generator=g)
    return p, t


def binary_np(p, t, threshold, ignore):
    if p.is_floating_point():
        prob = torch.sigmoid(p) if ((p < 0) | (p > 1)).any() else p
        p = (prob > threshold).long()
    p, t = p.numpy(), t.numpy()
    keep = t != ignore if ignore is not None else np.ones(len(t), bool)
    return t[keep], p[keep]


BINARY = {
    "binary_accuracy": lambda y, p: skm.accuracy_score(y, p),
    "binary_precision": lambda y, p: skm.precision_score(y, p, zero_division=0),
    "binary_recall": lambda y, p: skm.recall_score(y, p, zero_division=0),
    "binary_f1_score": lambda y, p: skm.f1_score(y, p, zero_division=0),
    "binary_specificity": lambda y, p: skm.recall_score(y, p, pos_label=0, zero_division=0),
    "binary_negative_predictive_value": lambda y, p: skm.precision_score(y, p, pos_label=0, zero_division=0),
    "binary_jaccard_index": lambda y, p: skm.jaccard_score(y, p, zero_division=0),
    "binary_hamming_distance": lambda y, p: skm.hamming_loss(y, p),
    "binary_matthews_corrcoef": lambda y, p: skm.matthews_corrcoef(y, p),
    "binary_cohen_kappa": lambda y, p: skm.cohen_kappa_score(y, p),
    "binary_confusion_matrix": lambda y, p: skm.confusion_matrix(y, p, labels=[0, 1]),
}


@pytest.mark.parametrize("ignore", [None, -1])
@pytest.mark.parametrize("form,threshold", [("probs", 0.5), ("probs", 0.3), ("logits", 0.5), ("logits", 0.7),
                                            ("labels", 0.5)])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_vs_sklearn(name, form, threshold, ignore):
    for seed in (0, 1):
        p, t = binary_inputs(seed, form, ignore)
        m = getattr(fm, name)(threshold=threshold, ignore_index=ignore)
        assert_close(run_batches(m, p, t), BINARY[name](*binary_np(p, t, threshold, ignore)),
                     f"{name}[{form},{threshold},{ignore}]")


@pytest.mark.parametrize("beta", [0.5, 2.0])
def test_binary_fbeta_and_normalized_confmat(beta):
    p, t = binary_inputs(3, "logits", -1)
    y, yp = binary_np(p, t, 0.5, -1)
    assert_close(run_batches(fm.binary_fbeta_score(beta=beta, ignore_index=-1), p, t),
                 skm.fbeta_score(y, yp, beta=beta), f"binary_fbeta_score[{beta}]")
    for norm in ("true", "pred", "all"):
        assert_close(run_batches(fm.binary_confusion_matrix(normalize=norm, ignore_index=-1), p, t),
                     skm.confusion_matrix(y, yp, normalize=norm), f"binary_confusion_matrix[{norm}]")


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_binary_kappa_weights(weights):
    p, t = binary_inputs(4, "probs")
    assert_close(fm.binary_cohen_kappa(weights=weights)(p, t),
                 skm.cohen_kappa_score(*binary_np(p, t, 0.5, None), weights=weights), f"binary_kappa[{weights}]")


# ------------------------------------------------------------------ multiclass


def multiclass_inputs(seed, form, ignore=None, num_classes=C, n=N):
    g = _gen(seed)
    t = _ignore(torch.randint(0, num_classes, (n,), generator=g), g, ignore)
    if form == "labels":
        return torch.randint(0, num_classes, (n,), generator=g), t
    return torch.randn(n, num_classes, generator=g) * (1 if form == "probs" else 3), t


def multiclass_np(p, t, ignore):
    if p.is_floating_point():
        p = p.argmax(1)
    p, t = p.numpy(), t.numpy()
    keep = t != ignore if ignore is not None else np.ones(len(t), bool)
    return t[keep], p[keep]


def sk_average(fn, average, ignore=None, drop_ignored_class=False, **kw):
    """scikit-learn with torchmetrics' label set: macro over classes seen (as target or prediction)."""

    def ref(y, p):
        if average == "macro":
            labels = np.union1d(y, p)
            if drop_ignored_class:
                labels = labels[labels != ignore]
        else:
            labels = np.arange(C)
        if average == "micro" and drop_ignored_class and ignore is not None and 0 <= ignore < C:
            labels = labels[labels != ignore]
        return fn(y, p, labels=labels, average=None if average == "none" else average, **kw)

    return ref


def counts(y, p, num_classes=C):
    mcm = skm.multilabel_confusion_matrix(y, p, labels=np.arange(num_classes)).astype(np.float64)
    return mcm[:, 1, 1], mcm[:, 0, 1], mcm[:, 0, 0], mcm[:, 1, 0]


def safe(a, b, zero=0.0):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.where(b != 0, a / np.where(b != 0, b, 1), zero)


def from_counts(score, average, support_rule=False):
    """One-vs-rest scores from scikit-learn's per-class counts, averaged with torchmetrics' rules."""

    def ref(y, p):
        tp, fp, tn, fn = counts(y, p)
        if average == "micro":
            return score(tp.sum(), fp.sum(), tn.sum(), fn.sum())
        values = score(tp, fp, tn, fn)
        if average == "none":
            return values
        if average == "weighted":
            return safe((values * (tp + fn)).sum(), (tp + fn).sum())
        w = (tp + fn) > 0 if support_rule else (tp + fp + fn) > 0
        return values[w].mean() if w.any() else 0.0

    return ref


MC_SKLEARN = {
    "multiclass_precision": lambda avg, ii: sk_average(skm.precision_score, avg, zero_division=0),
    "multiclass_recall": lambda avg, ii: sk_average(skm.recall_score, avg, zero_division=0),
    "multiclass_f1_score": lambda avg, ii: sk_average(skm.f1_score, avg, zero_division=0),
    "multiclass_jaccard_index": lambda avg, ii: sk_average(skm.jaccard_score, avg, ii, True, zero_division=0),
    "multiclass_accuracy": lambda avg, ii: (
        (lambda y, p: skm.accuracy_score(y, p)) if avg == "micro" else sk_average(skm.recall_score, avg,
                                                                                   zero_division=0)),
    "multiclass_specificity": lambda avg, ii: from_counts(lambda tp, fp, tn, fn: safe(tn, tn + fp), avg),
    "multiclass_negative_predictive_value": lambda avg, ii: from_counts(lambda tp, fp, tn, fn: safe(tn, tn + fn),
                                                                        avg),
    "multiclass_hamming_distance": lambda avg, ii: from_counts(lambda tp, fp, tn, fn: 1 - safe(tp, tp + fn), avg),
}


@pytest.mark.parametrize("ignore", [None, -1, 0])
@pytest.mark.parametrize("average", ["micro", "macro", "weighted", "none"])
@pytest.mark.parametrize("name", sorted(MC_SKLEARN))
def test_multiclass_vs_sklearn(name, average, ignore):
    ref = MC_SKLEARN[name](average, ignore)
    for seed, form in ((0, "logits"), (1, "labels"), (2, "probs")):
        p, t = multiclass_inputs(seed, form, ignore)
        m = getattr(fm, name)(num_classes=C, average=average, ignore_index=ignore)
        want = ref(*multiclass_np(p, t, ignore))
        if name == "multiclass_jaccard_index" and average == "none" and ignore == 0:
            # torchmetrics keeps the ignored class's column in 'none' (fmetrics follows it): that column is
            # torchmetrics' value, the others scikit-learn's
            tm = tmf.multiclass_jaccard_index(p, t, num_classes=C, average="none", ignore_index=0).double().numpy()
            want = np.asarray(want, dtype=np.float64).copy()
            want[0] = tm[0]
            np.testing.assert_allclose(tm[1:], want[1:], rtol=1e-6)
        assert_close(run_batches(m, p, t), want, f"{name}[{average},{ignore},{form}]")


@pytest.mark.parametrize("beta", [0.5, 2.0])
@pytest.mark.parametrize("average", ["micro", "macro", "weighted", "none"])
def test_multiclass_fbeta_vs_sklearn(beta, average):
    p, t = multiclass_inputs(5, "logits", -1)
    assert_close(run_batches(fm.multiclass_fbeta_score(beta=beta, num_classes=C, average=average, ignore_index=-1), p, t),
                 sk_average(skm.fbeta_score, average, beta=beta, zero_division=0)(*multiclass_np(p, t, -1)),
                 f"multiclass_fbeta_score[{beta},{average}]")


@pytest.mark.parametrize("ignore", [None, -1, 2])
def test_multiclass_confmat_mcc_kappa_vs_sklearn(ignore):
    for seed, form in ((0, "logits"), (1, "labels")):
        p, t = multiclass_inputs(seed, form, ignore)
        y, yp = multiclass_np(p, t, ignore)
        for norm in (None, "true", "pred", "all"):
            want = np.nan_to_num(skm.confusion_matrix(y, yp, labels=np.arange(C), normalize=norm))
            assert_close(run_batches(fm.multiclass_confusion_matrix(num_classes=C, normalize=norm, ignore_index=ignore), p, t),
                         want, f"multiclass_confusion_matrix[{norm},{ignore}]")
        assert_close(run_batches(fm.multiclass_matthews_corrcoef(num_classes=C, ignore_index=ignore), p, t),
                     skm.matthews_corrcoef(y, yp), f"multiclass_matthews_corrcoef[{ignore}]")
        for w in (None, "linear", "quadratic"):
            assert_close(run_batches(fm.multiclass_cohen_kappa(num_classes=C, weights=w, ignore_index=ignore), p, t),
                         skm.cohen_kappa_score(y, yp, weights=w, labels=np.arange(C)),
                         f"multiclass_cohen_kappa[{w},{ignore}]")


@pytest.mark.parametrize("k", [1, 2, 3])
def test_multiclass_top_k_accuracy_vs_sklearn(k):
    p, t = multiclass_inputs(6, "logits")
    assert_close(run_batches(fm.multiclass_accuracy(num_classes=C, average="micro", top_k=k), p, t),
                 skm.top_k_accuracy_score(t.numpy(), p.numpy(), k=k, labels=np.arange(C)), f"top_{k}_accuracy")


# ------------------------------------------------------------------ multilabel


def multilabel_inputs(seed, form, ignore=None):
    g = _gen(seed)
    t = _ignore(torch.randint(0, 2, (N, L), generator=g), g, ignore)
    if form == "labels":
        return torch.randint(0, 2, (N, L), generator=g), t
    p = torch.rand(N, L, generator=g)
    return (torch.logit(p) if form == "logits" else p), t


def multilabel_counts(p, t, ignore):
    """Per-label ``tp, fp, tn, fn`` from scikit-learn's binary confusion matrix of the kept entries."""
    if p.is_floating_point():
        prob = torch.sigmoid(p) if ((p < 0) | (p > 1)).any() else p
        p = (prob > 0.5).long()
    rows = []
    for j in range(L):
        y, yp = t[:, j].numpy(), p[:, j].numpy()
        keep = y != ignore if ignore is not None else np.ones(len(y), bool)
        tn, fp, fn, tp = skm.confusion_matrix(y[keep], yp[keep], labels=[0, 1]).ravel()
        rows.append((tp, fp, tn, fn))
    return tuple(np.array(x, dtype=np.float64) for x in zip(*rows))


ML_SCORES = {
    "multilabel_accuracy": lambda tp, fp, tn, fn: safe(tp + tn, tp + fp + tn + fn),
    "multilabel_precision": lambda tp, fp, tn, fn: safe(tp, tp + fp),
    "multilabel_recall": lambda tp, fp, tn, fn: safe(tp, tp + fn),
    "multilabel_f1_score": lambda tp, fp, tn, fn: safe(2 * tp, 2 * tp + fp + fn),
    "multilabel_specificity": lambda tp, fp, tn, fn: safe(tn, tn + fp),
    "multilabel_negative_predictive_value": lambda tp, fp, tn, fn: safe(tn, tn + fn),
    "multilabel_jaccard_index": lambda tp, fp, tn, fn: safe(tp, tp + fp + fn),
    "multilabel_hamming_distance": lambda tp, fp, tn, fn: 1 - safe(tp + tn, tp + fp + tn + fn),
}

ML_SKLEARN = {  # direct scikit-learn functions on indicator matrices (no ignore_index)
    "multilabel_precision": skm.precision_score,
    "multilabel_recall": skm.recall_score,
    "multilabel_f1_score": skm.f1_score,
    "multilabel_jaccard_index": skm.jaccard_score,
}


def _average(values, tp, fn, score, counts_, average):
    if average == "micro":
        return score(*(x.sum() for x in counts_))
    if average == "macro":
        return values.mean()
    if average == "weighted":
        return safe((values * (tp + fn)).sum(), (tp + fn).sum())
    return values


@pytest.mark.parametrize("ignore", [None, -1])
@pytest.mark.parametrize("average", ["micro", "macro", "weighted", "none"])
@pytest.mark.parametrize("name", sorted(ML_SCORES))
def test_multilabel_vs_sklearn(name, average, ignore):
    score = ML_SCORES[name]
    for seed, form in ((0, "probs"), (1, "logits"), (2, "labels")):
        p, t = multilabel_inputs(seed, form, ignore)
        got = run_batches(getattr(fm, name)(num_labels=L, average=average, ignore_index=ignore), p, t)
        c = multilabel_counts(p, t, ignore)
        tp, fp, tn, fn = c
        assert_close(got, _average(score(*c), tp, fn, score, c, average), f"{name}[{average},{ignore},{form}]")
        if name in ML_SKLEARN and ignore is None:
            yp = (torch.sigmoid(p) > 0.5 if form == "logits" else p > 0.5) if p.is_floating_point() else p
            want = ML_SKLEARN[name](t.numpy(), yp.long().numpy(), average=None if average == "none" else average,
                                    zero_division=0)
            assert_close(got, want, f"{name}[{average},sklearn-direct,{form}]")


def test_multilabel_exact_match_hamming_confmat_mcc_vs_sklearn():
    p, t = multilabel_inputs(7, "probs")
    yp = (p > 0.5).long().numpy()
    assert_close(run_batches(fm.multilabel_exact_match(num_labels=L), p, t), skm.accuracy_score(t.numpy(), yp),
                 "multilabel_exact_match")
    assert_close(run_batches(fm.multilabel_hamming_distance(num_labels=L, average="micro"), p, t),
                 skm.hamming_loss(t.numpy(), yp), "multilabel_hamming_distance[micro]")
    assert_close(run_batches(fm.multilabel_confusion_matrix(num_labels=L), p, t),
                 skm.multilabel_confusion_matrix(t.numpy(), yp), "multilabel_confusion_matrix")
    assert_close(run_batches(fm.multilabel_matthews_corrcoef(num_labels=L), p, t),
                 skm.matthews_corrcoef(t.numpy().ravel(), yp.ravel()), "multilabel_matthews_corrcoef")
    assert_close(run_batches(fm.multilabel_fbeta_score(beta=2.0, num_labels=L, average="macro"), p, t),
                 skm.fbeta_score(t.numpy(), yp, beta=2.0, average="macro", zero_division=0),
                 "multilabel_fbeta_score[2,macro]")


# ------------------------------------------------------------------ torchmetrics where sklearn has no equivalent

TM = dict(rtol=2e-6, atol=1e-6)  # torchmetrics returns float32


@pytest.mark.parametrize("ignore", [None, -1, 1])
@pytest.mark.parametrize("average", ["micro", "macro", "weighted", "none"])
@pytest.mark.parametrize("name", ["accuracy", "precision", "recall", "f1_score", "specificity",
                                  "negative_predictive_value", "hamming_distance", "stat_scores"])
def test_multiclass_samplewise_and_top_k_vs_torchmetrics(name, average, ignore):
    g = _gen(11)
    p = torch.randn(40, C, 7, generator=g)
    t = _ignore(torch.randint(0, C, (40, 7), generator=g), g, ignore)
    for md, k in (("samplewise", 1), ("global", 2), ("samplewise", 3)):
        ours = getattr(fm, f"multiclass_{name}")(num_classes=C, average=average, top_k=k, multidim_average=md,
                                                 ignore_index=ignore)
        want = getattr(tmf, f"multiclass_{name}")(p, t, num_classes=C, average=average, top_k=k,
                                                  multidim_average=md, ignore_index=ignore)
        assert_close(run_batches(ours, p, t), want, f"multiclass_{name}[{average},{md},top{k},{ignore}]", **TM)


@pytest.mark.parametrize("ignore", [None, -1])
@pytest.mark.parametrize("average", ["micro", "macro", "none"])
@pytest.mark.parametrize("name", ["accuracy", "precision", "recall", "f1_score", "specificity",
                                  "negative_predictive_value", "hamming_distance", "stat_scores"])
def test_multilabel_and_binary_samplewise_vs_torchmetrics(name, average, ignore):
    g = _gen(12)
    p = torch.randn(30, L, 5, generator=g)
    t = _ignore(torch.randint(0, 2, (30, L, 5), generator=g), g, ignore)
    ours = getattr(fm, f"multilabel_{name}")(num_labels=L, average=average, multidim_average="samplewise",
                                             ignore_index=ignore)
    want = getattr(tmf, f"multilabel_{name}")(p, t, num_labels=L, average=average, multidim_average="samplewise",
                                              ignore_index=ignore)
    assert_close(run_batches(ours, p, t), want, f"multilabel_{name}[{average},samplewise,{ignore}]", **TM)
    ours = getattr(fm, f"binary_{name}")(multidim_average="samplewise", ignore_index=ignore)
    want = getattr(tmf, f"binary_{name}")(p[:, 0], t[:, 0], multidim_average="samplewise", ignore_index=ignore)
    assert_close(run_batches(ours, p[:, 0], t[:, 0]), want, f"binary_{name}[samplewise,{ignore}]", **TM)


@pytest.mark.parametrize("ignore", [None, -1, 0])
def test_jaccard_and_exact_match_vs_torchmetrics(ignore):
    g = _gen(13)
    p = torch.randn(50, C, 3, generator=g)
    t = _ignore(torch.randint(0, C, (50, 3), generator=g), g, ignore)
    for average in ("micro", "macro", "weighted", "none"):
        assert_close(run_batches(fm.multiclass_jaccard_index(num_classes=C, average=average, ignore_index=ignore), p, t),
                     tmf.multiclass_jaccard_index(p, t, C, average=average, ignore_index=ignore),
                     f"multiclass_jaccard_index[{average},{ignore}]", **TM)
    for md in ("global", "samplewise"):
        assert_close(run_batches(fm.multiclass_exact_match(num_classes=C, multidim_average=md, ignore_index=ignore), p, t),
                     tmf.multiclass_exact_match(p, t, C, multidim_average=md, ignore_index=ignore),
                     f"multiclass_exact_match[{md},{ignore}]", **TM)
    pl = torch.rand(50, L, 3, generator=g)
    tl = _ignore(torch.randint(0, 2, (50, L, 3), generator=g), g, None if ignore == 0 else ignore)
    ii = None if ignore == 0 else ignore
    for md in ("global", "samplewise"):
        assert_close(run_batches(fm.multilabel_exact_match(num_labels=L, multidim_average=md, ignore_index=ii), pl, tl),
                     tmf.multilabel_exact_match(pl, tl, L, multidim_average=md, ignore_index=ii),
                     f"multilabel_exact_match[{md},{ii}]", **TM)


@pytest.mark.parametrize("task", ["demographic_parity", "equal_opportunity", "all"])
def test_fairness_vs_torchmetrics(task):
    g = _gen(14)
    p = torch.rand(200, generator=g)
    t = torch.randint(0, 2, (200,), generator=g)
    groups = torch.randint(0, 4, (200,), generator=g)
    got = run_batches(fm.binary_fairness(num_groups=4, task=task), p, t, groups)
    want = tmf.binary_fairness(p, t, groups, task=task)
    assert got.keys() == want.keys()
    for k in want:
        assert_close(got[k], want[k], f"binary_fairness[{task}][{k}]", **TM)
    got = run_batches(fm.binary_groups_stat_rates(num_groups=4), p, t, groups)
    want = tmf.binary_groups_stat_rates(p, t, groups, 4)
    for k in want:
        assert_close(got[k], want[k], f"binary_groups_stat_rates[{k}]", **TM)
    if task == "demographic_parity":
        got = run_batches(fm.demographic_parity(num_groups=4), p, groups)
        assert_close(list(got.values())[0], list(tmf.demographic_parity(p, groups).values())[0], "dp", **TM)
    if task == "equal_opportunity":
        got = run_batches(fm.equal_opportunity(num_groups=4), p, t, groups)
        assert_close(list(got.values())[0], list(tmf.equal_opportunity(p, t, groups).values())[0], "eo", **TM)


# ------------------------------------------------------------------ task facades


def test_facades_dispatch_to_the_task_factories():
    p, t = multiclass_inputs(8, "logits")
    for facade, kw in ((fm.accuracy, {}), (fm.precision, {}), (fm.recall, {}), (fm.f1_score, {}),
                       (fm.fbeta_score, {"beta": 2.0}), (fm.specificity, {}), (fm.negative_predictive_value, {}),
                       (fm.hamming_distance, {}), (fm.jaccard_index, {}), (fm.stat_scores, {}),
                       (fm.matthews_corrcoef, {}), (fm.cohen_kappa, {}), (fm.confusion_matrix, {}),
                       (fm.exact_match, {})):
        tm = getattr(tmf, facade.__name__)
        assert_close(facade(task="multiclass", num_classes=C, **kw)(p, t),
                     tm(p, t, task="multiclass", num_classes=C, **kw), f"{facade.__name__}[task=multiclass]", **TM)
        if facade is not fm.exact_match:
            pb, tb = binary_inputs(8, "logits")
            assert_close(facade(task="binary", **kw)(pb, tb), tm(pb, tb, task="binary", **kw),
                         f"{facade.__name__}[task=binary]", **TM)
        if facade is not fm.cohen_kappa:
            pl, tl = multilabel_inputs(8, "probs")
            assert_close(facade(task="multilabel", num_labels=L, **kw)(pl, tl),
                         tm(pl, tl, task="multilabel", num_labels=L, **kw), f"{facade.__name__}[task=multilabel]",
                         **TM)
