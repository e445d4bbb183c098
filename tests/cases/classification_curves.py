"""Law-suite cases for the score / curve classification metrics.

Oracles: scikit-learn where it has the metric (AUROC incl. ``max_fpr``, AP,
ROC / PR curves, ranking metrics, hinge loss), torchmetrics' functional API
otherwise (operating points, EER, log-AUC, calibration error, binned curves).
Scores are rounded to one decimal so exact curves see tied scores; logits are
kept outside [0, 1] so that every batch, even of one sample, is detected as
logits (detection is per batch, as in torchmetrics).
"""

import numpy as np
import torch
import torchmetrics.functional.classification as tmf
from sklearn import metrics as skm

import fmetrics as fm
from tests.cases import Case

SIZES = (9, 1, 14, 6)
C, L = 4, 3
TM = {"reference_atol": 1e-6, "reference_rtol": 1e-5}  # torchmetrics computes in float32


def _batches(seed, make):
    g = torch.Generator().manual_seed(seed)
    return [make(g, n) for n in SIZES]


def _target(g, shape, num=2, ignore=False):
    y = torch.randint(0, num, shape, generator=g)
    return torch.where(torch.rand(shape, generator=g) < 0.2, -1, y) if ignore else y


def binary(logits=False, ignore=False, extra=(), signal=0.0):
    """``signal`` > 0: probabilities ``(1 - signal) * U + signal * target`` (informative scores)."""
    def make(g, n):
        shape = (n, *extra)
        if signal:
            y = _target(g, shape, ignore=ignore)
            return ((1 - signal) * torch.rand(shape, generator=g) + signal * y.clamp_min(0)).round(decimals=1), y
        if logits:
            p = (1 + 3 * torch.rand(shape, generator=g)) * (torch.randint(0, 2, shape, generator=g) * 2 - 1)
        else:
            p = torch.rand(shape, generator=g).round(decimals=1)
        return p, _target(g, shape, ignore=ignore)
    return lambda seed: _batches(seed, make)


def multiclass(logits=False, ignore=False, extra=()):
    def make(g, n):
        x = torch.randn((n, C, *extra), generator=g) * 2
        if logits:
            x[:, 0] = x[:, 0].sign() * (1 + x[:, 0].abs())
        return (x if logits else x.softmax(1)), _target(g, (n, *extra), C, ignore)
    return lambda seed: _batches(seed, make)


def multilabel(ignore=False, extra=()):
    def make(g, n):
        shape = (n, L, *extra)
        return torch.rand(shape, generator=g).round(decimals=1), _target(g, shape, ignore=ignore)
    return lambda seed: _batches(seed, make)


def _np(x):
    return x.double().numpy()


def _kept(p, y):
    """Binary / multiclass rows whose target is not ignore_index (-1)."""
    keep = y != -1
    return p[keep], y[keep]


def _sk_binary(fn, **kw):
    return lambda p, y: fn(*reversed([_np(v) for v in _kept(p.reshape(-1), y.reshape(-1))]), **kw)


def _sk_multilabel(fn, **kw):
    return lambda p, y: fn(_np(y), _np(p), **kw)


def _sk_multiclass(fn, **kw):
    return lambda p, y: fn(*reversed([_np(v) for v in _kept(p, y)]), **kw)


def _sk_roc(p, y):
    p, y = _kept(p.reshape(-1), y.reshape(-1))
    fpr, tpr, thr = skm.roc_curve(_np(y), _np(p), drop_intermediate=False)
    return fpr.copy(), tpr.copy(), np.concatenate([[1.0], thr[1:]])  # first threshold: 1 here, inf in sklearn


def _sk_pr(p, y):
    p, y = _kept(p.reshape(-1), y.reshape(-1))
    precision, recall, thr = skm.precision_recall_curve(_np(y), _np(p), drop_intermediate=False)
    return precision.copy(), recall.copy(), thr.copy()


def _sk_ovr_curves(curve):
    """Per-class one-vs-rest curves as lists (the exact multiclass layout)."""
    def ref(p, y):
        p, y = _kept(p, y)
        per = [curve(p[:, c], (y == c).long()) for c in range(C)]
        return tuple(list(parts) for parts in zip(*per))
    return ref


def _sk_ranking(fn):
    return lambda p, y: fn(_np(y), _np(p))


def _sk_ranking_ignored(fn):
    """Per sample over its kept labels (fmetrics' ignore_index rule), averaged over samples."""
    def ref(p, y):
        values = []
        for pi, yi in zip(_np(p), _np(y)):
            keep = yi != -1
            if keep.sum() >= 2:
                values.append(fn(yi[keep][None], pi[keep][None]))
            elif keep.any():
                values.append(0.0)  # one kept label: no (relevant, irrelevant) pair
        return np.mean(values)
    return ref


def _tm(fn, **kw):
    return lambda p, y: fn(p, y, **kw)


def _sigmoid_hinge(p, y):
    y = _np(y)
    return skm.hinge_loss(y * 2 - 1, _np(torch.sigmoid(p)))


_CASES = [
    # ------------------------------------------------------------------ AUROC
    Case("binary_auroc", fm.binary_auroc, {}, binary(), reference=_sk_binary(skm.roc_auc_score)),
    Case("binary_auroc-logits-ignore", fm.binary_auroc, {"ignore_index": -1}, binary(logits=True, ignore=True),
         reference=_sk_binary(skm.roc_auc_score)),
    Case("binary_auroc-max_fpr", fm.binary_auroc, {"max_fpr": 0.3}, binary(extra=(2,)),
         reference=_sk_binary(skm.roc_auc_score, max_fpr=0.3)),
    Case("binary_auroc-binned", fm.binary_auroc, {"thresholds": 11}, binary(),
         reference=_tm(tmf.binary_auroc, thresholds=11), check=TM, integer_state=True),
    Case("multiclass_auroc", fm.multiclass_auroc, {"num_classes": C}, multiclass(),
         reference=_sk_multiclass(skm.roc_auc_score, multi_class="ovr")),
    Case("multiclass_auroc-weighted-binned-ignore", fm.multiclass_auroc,
         {"num_classes": C, "average": "weighted", "thresholds": [0.1, 0.5, 0.3, 0.8], "ignore_index": -1},
         multiclass(logits=True, ignore=True),
         reference=_tm(tmf.multiclass_auroc, num_classes=C, average="weighted", thresholds=[0.1, 0.5, 0.3, 0.8],
                       ignore_index=-1), check=TM, integer_state=True),
    Case("multilabel_auroc-micro", fm.multilabel_auroc, {"num_labels": L, "average": "micro"}, multilabel(),
         reference=_sk_multilabel(skm.roc_auc_score, average="micro")),
    Case("multilabel_auroc-none-ignore", fm.multilabel_auroc, {"num_labels": L, "average": None, "ignore_index": -1},
         multilabel(ignore=True), reference=_tm(tmf.multilabel_auroc, num_labels=L, average=None, ignore_index=-1),
         check=TM),
    Case("auroc-facade", fm.auroc, {"task": "multilabel", "num_labels": L, "average": "weighted"}, multilabel(),
         reference=_sk_multilabel(skm.roc_auc_score, average="weighted")),
    # ------------------------------------------------------------------ average precision
    Case("binary_average_precision", fm.binary_average_precision, {}, binary(),
         reference=_sk_binary(skm.average_precision_score)),
    Case("binary_average_precision-binned-ignore", fm.binary_average_precision,
         {"thresholds": 7, "ignore_index": -1}, binary(logits=True, ignore=True),
         reference=_tm(tmf.binary_average_precision, thresholds=7, ignore_index=-1), check=TM, integer_state=True),
    Case("multiclass_average_precision-none", fm.multiclass_average_precision, {"num_classes": C, "average": None},
         multiclass(), reference=_sk_multiclass(skm.average_precision_score, average=None)),
    Case("multilabel_average_precision-macro-extra", fm.multilabel_average_precision, {"num_labels": L},
         multilabel(extra=(2,)), reference=_tm(tmf.multilabel_average_precision, num_labels=L), check=TM),
    Case("average_precision-facade", fm.average_precision, {"task": "multilabel", "num_labels": L,
                                                            "average": "micro"},
         multilabel(), reference=_sk_multilabel(skm.average_precision_score, average="micro")),
    # ------------------------------------------------------------------ ROC / PR curves
    Case("binary_roc", fm.binary_roc, {}, binary(), reference=_sk_roc),
    Case("binary_roc-binned", fm.binary_roc, {"thresholds": torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])}, binary(),
         reference=_tm(tmf.binary_roc, thresholds=torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0])), check=TM,
         integer_state=True),
    Case("multiclass_roc", fm.multiclass_roc, {"num_classes": C}, multiclass(),
         reference=_sk_ovr_curves(lambda p, y: _sk_roc(p, y))),
    Case("multiclass_roc-macro-binned", fm.multiclass_roc, {"num_classes": C, "average": "macro", "thresholds": 6},
         multiclass(logits=True), reference=_tm(tmf.multiclass_roc, num_classes=C, average="macro", thresholds=6),
         check=TM, integer_state=True),
    Case("multilabel_roc-ignore", fm.multilabel_roc, {"num_labels": L, "ignore_index": -1}, multilabel(ignore=True),
         reference=_tm(tmf.multilabel_roc, num_labels=L, ignore_index=-1), check=TM),
    Case("roc-facade", fm.roc, {"task": "multiclass", "num_classes": C, "average": "micro"}, multiclass(),
         reference=_tm(tmf.multiclass_roc, num_classes=C, average="micro"), check=TM),
    Case("binary_precision_recall_curve", fm.binary_precision_recall_curve, {}, binary(), reference=_sk_pr),
    Case("multiclass_precision_recall_curve-binned", fm.multiclass_precision_recall_curve,
         {"num_classes": C, "thresholds": 5}, multiclass(),
         reference=_tm(tmf.multiclass_precision_recall_curve, num_classes=C, thresholds=5), check=TM,
         integer_state=True),
    Case("multilabel_precision_recall_curve", fm.multilabel_precision_recall_curve, {"num_labels": L},
         multilabel(), reference=_tm(tmf.multilabel_precision_recall_curve, num_labels=L), check=TM),
    Case("precision_recall_curve-facade", fm.precision_recall_curve,
         {"task": "multiclass", "num_classes": C, "average": "macro"}, multiclass(),
         reference=_tm(tmf.multiclass_precision_recall_curve, num_classes=C, average="macro"), check=TM),
    # ------------------------------------------------------------------ operating points
    *[
        Case(f"{task}_{kind}{suffix}", getattr(fm, f"{task}_{kind}"), {**num, arg: level, **kw}, data,
             reference=_tm(getattr(tmf, f"{task}_{kind}"), **num, **{arg: level}, **kw), check=TM)
        for kind, arg in [("recall_at_fixed_precision", "min_precision"),
                          ("precision_at_fixed_recall", "min_recall"),
                          ("sensitivity_at_specificity", "min_specificity"),
                          ("specificity_at_sensitivity", "min_sensitivity")]
        # binary: informative scores and a level 0.8 (on noise at 0.5, recall at precision is (1.0, 0.0) on every seed)
        for task, num, kw, data, suffix, level in [
            ("binary", {}, {}, binary(signal=0.3), "", 0.8),
            ("multiclass", {"num_classes": C}, {"thresholds": 9}, multiclass(), "-binned", 0.5),
            ("multilabel", {"num_labels": L}, {"ignore_index": -1}, multilabel(ignore=True), "-ignore", 0.5),
        ]
    ],
    Case("recall_at_fixed_precision-facade", fm.recall_at_fixed_precision,
         {"task": "binary", "min_precision": 0.7, "thresholds": 5}, binary(),
         reference=_tm(tmf.binary_recall_at_fixed_precision, min_precision=0.7, thresholds=5), check=TM),
    Case("precision_at_fixed_recall-facade", fm.precision_at_fixed_recall,
         {"task": "multiclass", "min_recall": 0.3, "num_classes": C}, multiclass(logits=True),
         reference=_tm(tmf.multiclass_precision_at_fixed_recall, min_recall=0.3, num_classes=C), check=TM),
    Case("sensitivity_at_specificity-facade", fm.sensitivity_at_specificity,
         {"task": "multilabel", "min_specificity": 0.8, "num_labels": L}, multilabel(),
         reference=_tm(tmf.multilabel_sensitivity_at_specificity, min_specificity=0.8, num_labels=L), check=TM),
    Case("specificity_at_sensitivity-facade", fm.specificity_at_sensitivity,
         {"task": "binary", "min_sensitivity": 0.8}, binary(logits=True),
         reference=_tm(tmf.binary_specificity_at_sensitivity, min_sensitivity=0.8), check=TM),
    # ------------------------------------------------------------------ EER, log-AUC
    Case("binary_eer", fm.binary_eer, {}, binary(), reference=_tm(tmf.binary_eer), check=TM),
    Case("multiclass_eer-macro", fm.multiclass_eer, {"num_classes": C, "average": "macro"}, multiclass(),
         reference=_tm(tmf.multiclass_eer, num_classes=C, average="macro"), check=TM),
    Case("multilabel_eer-binned-extra", fm.multilabel_eer, {"num_labels": L, "thresholds": 8},
         multilabel(extra=(2,)),
         reference=_tm(tmf.multilabel_eer, num_labels=L, thresholds=8), check=TM, integer_state=True),
    Case("eer-facade", fm.eer, {"task": "multiclass", "num_classes": C, "average": "micro", "ignore_index": -1},
         multiclass(ignore=True), reference=_tm(tmf.multiclass_eer, num_classes=C, average="micro", ignore_index=-1),
         check=TM),
    Case("binary_logauc", fm.binary_logauc, {"fpr_range": (0.05, 0.5)}, binary(),
         reference=_tm(tmf.binary_logauc, fpr_range=(0.05, 0.5)), check=TM),
    Case("multiclass_logauc", fm.multiclass_logauc, {"num_classes": C, "fpr_range": (0.1, 0.6)}, multiclass(),
         reference=_tm(tmf.multiclass_logauc, num_classes=C, fpr_range=(0.1, 0.6)), check=TM),
    Case("multilabel_logauc-none-binned", fm.multilabel_logauc,
         {"num_labels": L, "fpr_range": (0.2, 0.9), "average": None, "thresholds": 10}, multilabel(),
         reference=_tm(tmf.multilabel_logauc, num_labels=L, fpr_range=(0.2, 0.9), average=None, thresholds=10),
         check=TM, integer_state=True),
    Case("logauc-facade", fm.logauc, {"task": "binary", "fpr_range": (0.2, 0.7), "ignore_index": -1},
         binary(ignore=True), reference=_tm(tmf.binary_logauc, fpr_range=(0.2, 0.7), ignore_index=-1), check=TM),
    # ------------------------------------------------------------------ calibration, hinge
    Case("binary_calibration_error", fm.binary_calibration_error, {"n_bins": 5}, binary(),
         reference=_tm(tmf.binary_calibration_error, n_bins=5), check=TM),
    Case("multiclass_calibration_error-l2-logits", fm.multiclass_calibration_error,
         {"num_classes": C, "norm": "l2", "ignore_index": -1}, multiclass(logits=True, ignore=True),
         reference=_tm(tmf.multiclass_calibration_error, num_classes=C, norm="l2", ignore_index=-1), check=TM),
    Case("calibration_error-facade", fm.calibration_error, {"task": "binary", "norm": "max", "n_bins": 4},
         binary(logits=True), reference=_tm(tmf.binary_calibration_error, norm="max", n_bins=4), check=TM),
    Case("binary_hinge_loss", fm.binary_hinge_loss, {}, binary(), reference=_sk_binary(
        lambda y, p: skm.hinge_loss(y * 2 - 1, p))),
    Case("binary_hinge_loss-squared-logits", fm.binary_hinge_loss, {"squared": True}, binary(logits=True),
         reference=_tm(tmf.binary_hinge_loss, squared=True), check=TM),
    Case("multiclass_hinge_loss", fm.multiclass_hinge_loss, {"num_classes": C}, multiclass(),
         reference=_sk_multiclass(lambda y, p: skm.hinge_loss(y, p, labels=np.arange(C)))),
    Case("multiclass_hinge_loss-one-vs-all-ignore", fm.multiclass_hinge_loss,
         {"num_classes": C, "multiclass_mode": "one-vs-all", "squared": True, "ignore_index": -1},
         multiclass(logits=True, ignore=True),
         reference=_tm(tmf.multiclass_hinge_loss, num_classes=C, multiclass_mode="one-vs-all", squared=True,
                       ignore_index=-1), check=TM),
    Case("hinge_loss-facade", fm.hinge_loss, {"task": "binary"}, binary(logits=True),
         reference=_sigmoid_hinge, check=TM),
    # ------------------------------------------------------------------ multilabel ranking
    Case("multilabel_ranking_average_precision", fm.multilabel_ranking_average_precision, {"num_labels": L},
         multilabel(), reference=_sk_ranking(skm.label_ranking_average_precision_score)),
    Case("multilabel_ranking_loss-ignore", fm.multilabel_ranking_loss, {"num_labels": L, "ignore_index": -1},
         multilabel(ignore=True), reference=_sk_ranking_ignored(skm.label_ranking_loss)),
    Case("multilabel_coverage_error", fm.multilabel_coverage_error, {"num_labels": L}, multilabel(extra=()),
         reference=_sk_ranking(skm.coverage_error)),
]


CASES = list(_CASES)  # every case runs every law, compile and compile epoch included


def _delong_np(scores, y):
    """DeLong et al. (1988) by definition, O(m n): psi over every (positive, negative) pair."""
    x, z = scores[:, y == 1], scores[:, y == 0]
    psi = (x[:, :, None] > z[:, None, :]) + 0.5 * (x[:, :, None] == z[:, None, :])
    cov = np.atleast_2d(np.cov(psi.mean(2))) / x.shape[1] + np.atleast_2d(np.cov(psi.mean(1))) / z.shape[1]
    return psi.mean((1, 2)), cov


def _delong_ref(a, b, t):
    auc, cov = _delong_np(np.stack([a.double().numpy(), b.double().numpy()]), t.numpy())
    z = (auc[1] - auc[0]) / np.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    from scipy.special import erfc
    return {"auroc_a": auc[0], "auroc_b": auc[1], "delta": auc[1] - auc[0], "covariance": cov, "z": z,
            "p_value": erfc(abs(z) / np.sqrt(2))}


def _auroc_ci_ref(p, t):
    auc, cov = _delong_np(p.double().numpy()[None], t.numpy())
    std = np.sqrt(cov[0, 0])
    return {"value": auc[0], "std": std, "ci_low": np.clip(auc[0] - 1.959963984540054 * std, 0, 1),
            "ci_high": np.clip(auc[0] + 1.959963984540054 * std, 0, 1)}


def _two_systems(seed):
    g = torch.Generator().manual_seed(3000 + seed)
    out = []
    for n in (11, 0, 17, 6):
        t = torch.randint(0, 2, (n,), generator=g)
        a = (torch.randn(n, generator=g) + t).mul(2).round() / 2  # ties
        out.append((a, 0.5 * a + torch.randn(n, generator=g) + t, t))
    return out


CASES += [
    Case("delong_test", fm.delong_test, {}, _two_systems, reference=_delong_ref, check={"rtol": 1e-9}),
    Case("binary_auroc_ci", fm.binary_auroc_ci, {}, lambda s: [(a, t) for a, _, t in _two_systems(s)],
         reference=_auroc_ci_ref, check={"rtol": 1e-9}),
]
