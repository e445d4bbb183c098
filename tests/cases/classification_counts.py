"""Law-suite cases for the counting classification metrics (stat-score family).

Oracles: scikit-learn wherever it has the metric (stat scores via
``multilabel_confusion_matrix``); torchmetrics for what scikit-learn lacks
(samplewise averaging, macro top-k); hand formulas for group fairness.
Multiclass macro averages leave out classes that never occur (torchmetrics'
rule), so the scikit-learn oracle averages over ``labels=`` the classes seen.
"""
from __future__ import annotations

import numpy as np
import torch
import torchmetrics.functional.classification as tmf
from sklearn import metrics as skm

import fmetrics as fm
from tests.cases import Case

SIZES = (9, 1, 14, 6)
C = 5  # classes
L = 3  # labels


# ------------------------------------------------------------------ data


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(1000 + seed)


def _with_ignored(t: torch.Tensor, g, ignore):
    if ignore is None:
        return t
    return torch.where(torch.rand(t.shape, generator=g) < 0.2, torch.full_like(t, ignore), t)


def binary_data(seed, labels=False, extra=(), ignore=None, target_col=False, float_target=False, sizes=SIZES):
    g, out = _gen(seed), []
    for n in sizes:
        shape = (n, *extra)
        p = torch.randint(0, 2, shape, generator=g) if labels else torch.rand(shape, generator=g)
        t = _with_ignored(torch.randint(0, 2, shape, generator=g), g, ignore)
        if target_col:
            t = t.unsqueeze(-1)
        if float_target:
            t = t.float()
        out.append((p, t))
    return out


def multiclass_data(seed, labels=False, extra=(), ignore=None, sizes=SIZES, num_classes=C):
    g, out = _gen(seed), []
    for n in sizes:
        t = torch.randint(0, num_classes, (n, *extra), generator=g)
        if labels:
            p = torch.randint(0, num_classes, (n, *extra), generator=g)
        else:
            p = torch.randn((n, num_classes, *extra), generator=g) * 2
        out.append((p, _with_ignored(t, g, ignore)))
    return out


def multilabel_data(seed, extra=(), ignore=None, sizes=SIZES):
    g, out = _gen(seed), []
    for n in sizes:
        p = torch.rand((n, L, *extra), generator=g)
        t = torch.randint(0, 2, (n, L, *extra), generator=g)
        out.append((p, _with_ignored(t, g, ignore)))
    return out


def fairness_data(seed, groups=3):
    g = _gen(seed)
    return [(p, t, torch.randint(0, groups, (p.shape[0],), generator=g)) for p, t in binary_data(seed)]


# ------------------------------------------------------------------ numpy views of the inputs


def bin_np(p, t, ignore=None, threshold=0.5):
    """Flat ``(pred, target)`` numpy labels, ignored entries removed (probability preds)."""
    p = p.reshape(-1).numpy()
    t = t.reshape(-1).numpy().astype(np.int64)
    p = (p > threshold).astype(np.int64) if p.dtype.kind == "f" else p.astype(np.int64)
    keep = t != ignore if ignore is not None else np.ones_like(t, dtype=bool)
    return p[keep], t[keep]


def mc_np(p, t, ignore=None):
    """Flat multiclass ``(pred, target)`` numpy labels (argmax of scores), ignored removed."""
    if p.is_floating_point():
        p = p.argmax(1)
    p, t = p.reshape(-1).numpy(), t.reshape(-1).numpy()
    keep = t != ignore if ignore is not None else np.ones_like(t, dtype=bool)
    return p[keep], t[keep]


def ml_np(p, t, threshold=0.5):
    """Multilabel ``(N * M, L)`` numpy indicator matrices (probability preds)."""
    p = (p > threshold).long().movedim(1, -1).reshape(-1, L).numpy()
    return p, t.movedim(1, -1).reshape(-1, L).numpy()


def present(p, t):
    """Classes that occur as a prediction or a target (torchmetrics' macro rule)."""
    return np.union1d(p, t)


def counts_np(p, t, labels):
    """``tp, fp, tn, fn`` per class from scikit-learn's one-vs-rest confusion matrices."""
    mcm = skm.multilabel_confusion_matrix(t, p, labels=labels).astype(np.float64)
    return mcm[:, 1, 1], mcm[:, 0, 1], mcm[:, 0, 0], mcm[:, 1, 0]


def safe(num, den, zero=0.0):
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.where(den != 0, num / np.where(den != 0, den, 1), zero)


def macro_present(values, tp, fp, fn):
    w = (tp + fp + fn) > 0
    return values[w].mean() if w.any() else 0.0


# ------------------------------------------------------------------ references


def ref_binary(fn, ignore=None, **kw):
    return lambda p, t: fn(*reversed(bin_np(p, t, ignore)), **kw)


def ref_mc(fn, average, ignore=None, **kw):
    def ref(p, t):
        pred, tgt = mc_np(p, t, ignore)
        labels = present(pred, tgt) if average == "macro" else np.arange(C)
        return fn(tgt, pred, labels=labels, average=average, **kw)

    return ref


def ref_ml(fn, average, **kw):
    def ref(p, t):
        pred, tgt = ml_np(p, t)
        return fn(tgt, pred, average=average, **kw)

    return ref


def ref_mc_counts(score, average):
    """A one-vs-rest score (``score(tp, fp, tn, fn)`` per class) from scikit-learn's counts."""

    def ref(p, t):
        pred, tgt = mc_np(p, t)
        tp, fp, tn, fn = counts_np(pred, tgt, np.arange(C))
        values = score(tp, fp, tn, fn)
        if average == "macro":
            return macro_present(values, tp, fp, fn)
        if average == "weighted":
            return safe((values * (tp + fn)).sum(), (tp + fn).sum())
        if average == "micro":
            return score(tp.sum(), fp.sum(), tn.sum(), fn.sum())
        return values

    return ref


def ref_ml_counts(score, average):
    def ref(p, t):
        pred, tgt = ml_np(p, t)
        mcm = skm.multilabel_confusion_matrix(tgt, pred).astype(np.float64)
        tp, fp, tn, fn = mcm[:, 1, 1], mcm[:, 0, 1], mcm[:, 0, 0], mcm[:, 1, 0]
        if average == "micro":
            return score(tp.sum(), fp.sum(), tn.sum(), fn.sum())
        values = score(tp, fp, tn, fn)
        return values.mean() if average == "macro" else values

    return ref


def ref_tm(fn, **kw):
    """torchmetrics' functional metric as the oracle (where scikit-learn has none)."""
    return lambda *inputs: fn(*inputs, **kw)


def _stat_row(tp, fp, tn, fn):
    return np.stack([tp, fp, tn, fn, tp + fn], -1)


def ref_binary_stat_scores(p, t):
    pred, tgt = bin_np(p, t)
    tn, fp, fn, tp = skm.confusion_matrix(tgt, pred, labels=[0, 1]).ravel()
    return np.array([tp, fp, tn, fn, tp + fn])


def ref_mc_stat_scores(p, t):
    pred, tgt = mc_np(p, t)
    return _stat_row(*counts_np(pred, tgt, np.arange(C)))


def ref_ml_stat_scores_micro(p, t):
    pred, tgt = ml_np(p, t)
    mcm = skm.multilabel_confusion_matrix(tgt, pred)
    tp, fp, tn, fn = mcm[:, 1, 1], mcm[:, 0, 1], mcm[:, 0, 0], mcm[:, 1, 0]
    return _stat_row(tp, fp, tn, fn).sum(0)


def ref_multilabel_confmat(p, t):
    pred, tgt = ml_np(p, t)
    return skm.multilabel_confusion_matrix(tgt, pred, labels=np.arange(L))


def ref_exact_match_mc(p, t):
    pred = p.argmax(1) if p.is_floating_point() else p
    return (pred == t).reshape(t.shape[0], -1).all(1).double().mean()


def ref_groups(p, t, g, what):
    """Per-group stat rates and parity ratios by hand (numpy)."""
    pred = (p.numpy() > 0.5).astype(int)
    t, g = t.numpy(), g.numpy()
    rows = []
    for k in range(3):
        pk, tk = pred[g == k], t[g == k]
        rows.append([((pk == 1) & (tk == 1)).sum(), ((pk == 1) & (tk == 0)).sum(),
                     ((pk == 0) & (tk == 0)).sum(), ((pk == 0) & (tk == 1)).sum()])
    rows = np.array(rows, dtype=np.float64)
    if what == "rates":
        return {f"group_{k}": rows[k] / rows[k].sum() for k in range(3)}
    out = {}
    tp, fp, tn, fn = rows.T
    for key, rate in (("DP", safe(tp + fp, rows.sum(1))), ("EO", safe(tp, tp + fn))):
        if what in (key, "all"):
            lo, hi = int(np.argmin(rate)), int(np.argmax(rate))
            out[f"{key}_{lo}_{hi}"] = safe(rate[lo], rate[hi])
    return out


def _spec(tp, fp, tn, fn):
    return safe(tn, tn + fp)


def _npv(tp, fp, tn, fn):
    return safe(tn, tn + fn)


def _acc_ml(tp, fp, tn, fn):
    return safe(tp + tn, tp + fp + tn + fn)


def _ham_ml(tp, fp, tn, fn):
    return 1 - _acc_ml(tp, fp, tn, fn)


def _ham_mc(tp, fp, tn, fn):
    return 1 - safe(tp, tp + fn)


TM = {"reference_rtol": 1e-5, "reference_atol": 1e-6}  # torchmetrics computes in float32
# samplewise values come in arrival order; re-batching in shuffled order permutes the samples
SAMPLEWISE = {"canonical": lambda v: torch.sort(torch.as_tensor(v).double(), dim=0).values}

# ------------------------------------------------------------------ the cases

_b, _m, _l = binary_data, multiclass_data, multilabel_data

CASES = [
    # binary
    Case("binary_stat_scores", fm.binary_stat_scores, {}, _b, ref_binary_stat_scores, integer_state=True),
    Case("binary_stat_scores-samplewise", fm.binary_stat_scores, {"multidim_average": "samplewise"},
         lambda s: _b(s, extra=(4,)), ref_tm(tmf.binary_stat_scores, multidim_average="samplewise"),
         check=SAMPLEWISE, integer_state=True),
    Case("binary_accuracy", fm.binary_accuracy, {}, _b, ref_binary(skm.accuracy_score)),
    Case("binary_accuracy-target-col-float", fm.binary_accuracy, {}, lambda s: _b(s, target_col=True,
                                                                                   float_target=True),
         lambda p, t: skm.accuracy_score(t.reshape(-1).numpy(), (p.numpy() > 0.5).astype(int))),
    Case("binary_accuracy-labels-ignore", fm.binary_accuracy, {"ignore_index": -1},
         lambda s: _b(s, labels=True, ignore=-1), ref_binary(skm.accuracy_score, ignore=-1)),
    Case("binary_precision", fm.binary_precision, {}, _b, ref_binary(skm.precision_score, zero_division=0)),
    Case("binary_recall", fm.binary_recall, {}, _b, ref_binary(skm.recall_score, zero_division=0)),
    Case("binary_f1_score", fm.binary_f1_score, {}, _b, ref_binary(skm.f1_score, zero_division=0)),
    Case("binary_fbeta_score", fm.binary_fbeta_score, {"beta": 2.0}, _b,
         ref_binary(skm.fbeta_score, beta=2.0, zero_division=0)),
    Case("binary_specificity", fm.binary_specificity, {}, _b,
         ref_binary(skm.recall_score, pos_label=0, zero_division=0)),
    Case("binary_negative_predictive_value", fm.binary_negative_predictive_value, {}, _b,
         ref_binary(skm.precision_score, pos_label=0, zero_division=0)),
    Case("binary_jaccard_index", fm.binary_jaccard_index, {}, _b, ref_binary(skm.jaccard_score)),
    Case("binary_hamming_distance", fm.binary_hamming_distance, {}, _b, ref_binary(skm.hamming_loss)),
    Case("binary_confusion_matrix", fm.binary_confusion_matrix, {}, _b,
         ref_binary(skm.confusion_matrix, labels=[0, 1]), integer_state=True),
    Case("binary_confusion_matrix-true", fm.binary_confusion_matrix, {"normalize": "true"}, _b,
         ref_binary(skm.confusion_matrix, labels=[0, 1], normalize="true")),
    Case("binary_matthews_corrcoef", fm.binary_matthews_corrcoef, {}, _b, ref_binary(skm.matthews_corrcoef)),
    Case("binary_cohen_kappa", fm.binary_cohen_kappa, {}, _b, ref_binary(skm.cohen_kappa_score)),
    # multiclass
    Case("multiclass_stat_scores-none", fm.multiclass_stat_scores, {"num_classes": C, "average": None}, _m,
         ref_mc_stat_scores, integer_state=True),
    Case("multiclass_stat_scores-samplewise", fm.multiclass_stat_scores,
         {"num_classes": C, "average": "macro", "multidim_average": "samplewise"}, lambda s: _m(s, extra=(3,)),
         ref_tm(tmf.multiclass_stat_scores, num_classes=C, average="macro", multidim_average="samplewise"),
         check={**TM, **SAMPLEWISE}, integer_state=True),
    Case("multiclass_accuracy-macro", fm.multiclass_accuracy, {"num_classes": C}, _m,
         ref_mc(skm.recall_score, "macro", zero_division=0)),
    Case("multiclass_accuracy-micro-labels", fm.multiclass_accuracy, {"num_classes": C, "average": "micro"},
         lambda s: _m(s, labels=True), lambda p, t: skm.accuracy_score(t.numpy(), p.numpy())),
    Case("multiclass_accuracy-top2-micro", fm.multiclass_accuracy,
         {"num_classes": C, "average": "micro", "top_k": 2}, _m,
         lambda p, t: skm.top_k_accuracy_score(t.numpy(), p.numpy(), k=2, labels=np.arange(C))),
    Case("multiclass_accuracy-top2-macro", fm.multiclass_accuracy, {"num_classes": C, "top_k": 2}, _m,
         ref_tm(tmf.multiclass_accuracy, num_classes=C, top_k=2), check=TM),
    Case("multiclass_precision-macro-ignore", fm.multiclass_precision, {"num_classes": C, "ignore_index": -1},
         lambda s: _m(s, ignore=-1), ref_mc(skm.precision_score, "macro", ignore=-1, zero_division=0)),
    Case("multiclass_recall-weighted-ignore-in-range", fm.multiclass_recall,
         {"num_classes": C, "average": "weighted", "ignore_index": 0}, lambda s: _m(s, ignore=0),
         ref_mc(skm.recall_score, "weighted", ignore=0, zero_division=0)),
    Case("multiclass_f1_score-macro", fm.multiclass_f1_score, {"num_classes": C}, _m,
         ref_mc(skm.f1_score, "macro", zero_division=0)),
    Case("multiclass_fbeta_score-none", fm.multiclass_fbeta_score, {"beta": 0.5, "num_classes": C, "average": None},
         _m, ref_mc(skm.fbeta_score, None, beta=0.5, zero_division=0)),
    Case("multiclass_specificity-macro", fm.multiclass_specificity, {"num_classes": C}, _m,
         ref_mc_counts(_spec, "macro")),
    Case("multiclass_negative_predictive_value-weighted", fm.multiclass_negative_predictive_value,
         {"num_classes": C, "average": "weighted"}, _m, ref_mc_counts(_npv, "weighted")),
    Case("multiclass_jaccard_index-macro", fm.multiclass_jaccard_index, {"num_classes": C}, _m,
         ref_mc(skm.jaccard_score, "macro", zero_division=0)),
    Case("multiclass_hamming_distance-micro", fm.multiclass_hamming_distance,
         {"num_classes": C, "average": "micro"}, _m, ref_mc_counts(_ham_mc, "micro")),
    Case("multiclass_exact_match-extra-dims", fm.multiclass_exact_match, {"num_classes": C},
         lambda s: _m(s, extra=(2,)), ref_exact_match_mc),
    Case("multiclass_confusion_matrix", fm.multiclass_confusion_matrix, {"num_classes": C}, _m,
         lambda p, t: skm.confusion_matrix(*reversed(mc_np(p, t)), labels=np.arange(C)), integer_state=True),
    Case("multiclass_confusion_matrix-pred-ignore", fm.multiclass_confusion_matrix,
         {"num_classes": C, "normalize": "pred", "ignore_index": -1}, lambda s: _m(s, ignore=-1),
         lambda p, t: np.nan_to_num(skm.confusion_matrix(*reversed(mc_np(p, t, -1)), labels=np.arange(C),
                                                         normalize="pred"))),
    Case("multiclass_matthews_corrcoef", fm.multiclass_matthews_corrcoef, {"num_classes": C}, _m,
         lambda p, t: skm.matthews_corrcoef(*reversed(mc_np(p, t)))),
    Case("multiclass_cohen_kappa-quadratic", fm.multiclass_cohen_kappa, {"num_classes": C, "weights": "quadratic"},
         _m, lambda p, t: skm.cohen_kappa_score(*reversed(mc_np(p, t)), weights="quadratic", labels=np.arange(C))),
    # multilabel
    Case("multilabel_stat_scores-micro", fm.multilabel_stat_scores, {"num_labels": L, "average": "micro"}, _l,
         ref_ml_stat_scores_micro, integer_state=True),
    Case("multilabel_accuracy-macro", fm.multilabel_accuracy, {"num_labels": L}, _l,
         ref_ml_counts(_acc_ml, "macro")),
    Case("multilabel_precision-micro", fm.multilabel_precision, {"num_labels": L, "average": "micro"}, _l,
         ref_ml(skm.precision_score, "micro", zero_division=0)),
    Case("multilabel_recall-weighted", fm.multilabel_recall, {"num_labels": L, "average": "weighted"}, _l,
         ref_ml(skm.recall_score, "weighted", zero_division=0)),
    Case("multilabel_f1_score-none", fm.multilabel_f1_score, {"num_labels": L, "average": None}, _l,
         ref_ml(skm.f1_score, None, zero_division=0)),
    Case("multilabel_fbeta_score-macro", fm.multilabel_fbeta_score, {"beta": 2.0, "num_labels": L}, _l,
         ref_ml(skm.fbeta_score, "macro", beta=2.0, zero_division=0)),
    Case("multilabel_specificity-micro", fm.multilabel_specificity, {"num_labels": L, "average": "micro"}, _l,
         ref_ml_counts(_spec, "micro")),
    Case("multilabel_negative_predictive_value-macro", fm.multilabel_negative_predictive_value,
         {"num_labels": L}, _l, ref_ml_counts(_npv, "macro")),
    Case("multilabel_jaccard_index-macro", fm.multilabel_jaccard_index, {"num_labels": L}, _l,
         ref_ml(skm.jaccard_score, "macro", zero_division=0)),
    Case("multilabel_hamming_distance-micro", fm.multilabel_hamming_distance, {"num_labels": L, "average": "micro"},
         _l, lambda p, t: skm.hamming_loss(*reversed(ml_np(p, t)))),
    Case("multilabel_exact_match", fm.multilabel_exact_match, {"num_labels": L}, _l,
         lambda p, t: skm.accuracy_score(*reversed(ml_np(p, t)))),
    Case("multilabel_exact_match-samplewise-ignore", fm.multilabel_exact_match,
         {"num_labels": L, "multidim_average": "samplewise", "ignore_index": -1},
         lambda s: _l(s, extra=(2,), ignore=-1),
         ref_tm(tmf.multilabel_exact_match, num_labels=L, multidim_average="samplewise", ignore_index=-1),
         check={**TM, **SAMPLEWISE}),
    Case("multilabel_confusion_matrix", fm.multilabel_confusion_matrix, {"num_labels": L}, _l,
         ref_multilabel_confmat, integer_state=True),
    Case("multilabel_matthews_corrcoef", fm.multilabel_matthews_corrcoef, {"num_labels": L}, _l,
         lambda p, t: skm.matthews_corrcoef(*(x.reshape(-1) for x in reversed(ml_np(p, t))))),
    # fairness
    Case("binary_groups_stat_rates", fm.binary_groups_stat_rates, {"num_groups": 3}, fairness_data,
         lambda p, t, g: ref_groups(p, t, g, "rates")),
    Case("binary_fairness", fm.binary_fairness, {"num_groups": 3}, fairness_data,
         lambda p, t, g: ref_groups(p, t, g, "all")),
    Case("demographic_parity", fm.demographic_parity, {"num_groups": 3},
         lambda s: [(p, g) for p, _, g in fairness_data(s)],
         lambda p, g: ref_groups(p, torch.zeros_like(g), g, "DP")),
    Case("equal_opportunity", fm.equal_opportunity, {"num_groups": 3}, fairness_data,
         lambda p, t, g: ref_groups(p, t, g, "EO")),
    # task facades
    Case("stat_scores-task-multiclass", fm.stat_scores, {"task": "multiclass", "num_classes": C, "average": "none"},
         _m, ref_mc_stat_scores, integer_state=True),
    Case("accuracy-task-binary", fm.accuracy, {"task": "binary"}, _b, ref_binary(skm.accuracy_score)),
    Case("precision-task-multiclass", fm.precision, {"task": "multiclass", "num_classes": C, "average": "micro"},
         _m, ref_mc(skm.precision_score, "micro")),
    Case("recall-task-multilabel", fm.recall, {"task": "multilabel", "num_labels": L, "average": "macro"}, _l,
         ref_ml(skm.recall_score, "macro", zero_division=0)),
    Case("f1_score-task-binary", fm.f1_score, {"task": "binary"}, _b, ref_binary(skm.f1_score, zero_division=0)),
    Case("fbeta_score-task-multiclass", fm.fbeta_score,
         {"task": "multiclass", "beta": 2.0, "num_classes": C, "average": "weighted"}, _m,
         ref_mc(skm.fbeta_score, "weighted", beta=2.0, zero_division=0)),
    Case("specificity-task-binary", fm.specificity, {"task": "binary"}, _b,
         ref_binary(skm.recall_score, pos_label=0, zero_division=0)),
    Case("negative_predictive_value-task-binary", fm.negative_predictive_value, {"task": "binary"}, _b,
         ref_binary(skm.precision_score, pos_label=0, zero_division=0)),
    Case("jaccard_index-task-multilabel", fm.jaccard_index, {"task": "multilabel", "num_labels": L,
                                                              "average": "weighted"},
         _l, ref_ml(skm.jaccard_score, "weighted", zero_division=0)),
    Case("hamming_distance-task-multilabel", fm.hamming_distance, {"task": "multilabel", "num_labels": L,
                                                                    "average": "macro"},
         _l, ref_ml_counts(_ham_ml, "macro")),
    Case("exact_match-task-multiclass", fm.exact_match, {"task": "multiclass", "num_classes": C},  # labels < 2:
         lambda s: _m(s, labels=True, extra=(3,), num_classes=2), ref_exact_match_mc),  # some rows match in full
    Case("confusion_matrix-task-multiclass-all", fm.confusion_matrix,
         {"task": "multiclass", "num_classes": C, "normalize": "all"}, _m,
         lambda p, t: skm.confusion_matrix(*reversed(mc_np(p, t)), labels=np.arange(C), normalize="all")),
    Case("matthews_corrcoef-task-binary", fm.matthews_corrcoef, {"task": "binary"}, _b,
         ref_binary(skm.matthews_corrcoef)),
    Case("cohen_kappa-task-multiclass-linear", fm.cohen_kappa,
         {"task": "multiclass", "num_classes": C, "weights": "linear"}, _m,
         lambda p, t: skm.cohen_kappa_score(*reversed(mc_np(p, t)), weights="linear", labels=np.arange(C))),
]
