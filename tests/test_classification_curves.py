"""Randomized parity of the score / curve metrics against scikit-learn (torchmetrics where sklearn has none).

Every comparison goes through `close`, which records the largest absolute
deviation per oracle; run with ``-s`` to see the summary.
"""
import itertools
import warnings

import numpy as np
import pytest
import torch
import torchmetrics.functional.classification as tmf
from sklearn import metrics as skm

import fmetrics as fm

C, L, N = 5, 4, 150
SEEDS = (0, 1, 2)
DEVIATION = {"sklearn": 0.0, "torchmetrics": 0.0}


FLOOR = {"recall_at_fixed_precision": "min_precision", "precision_at_fixed_recall": "min_recall",
         "sensitivity_at_specificity": "min_specificity", "specificity_at_sensitivity": "min_sensitivity"}


@pytest.fixture(scope="module", autouse=True)
def _summary():
    yield
    print(f"\nlargest deviation from the oracles: {DEVIATION}")


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [y for part in x for y in _flat(part)]
    return [torch.as_tensor(np.array(x) if not isinstance(x, torch.Tensor) else x).double().reshape(-1)]


def close(actual, expected, oracle="torchmetrics", atol=1e-6):
    a, e = _flat(actual), _flat(expected)
    assert len(a) == len(e), (len(a), len(e))
    for x, y in zip(a, e):
        assert x.shape == y.shape, (x.shape, y.shape)
        both = torch.isnan(x) & torch.isnan(y)
        dev = (x - y).abs().masked_fill(both, 0)
        if dev.numel():
            DEVIATION[oracle] = max(DEVIATION[oracle], float(dev.max()))
        torch.testing.assert_close(x, y, atol=atol, rtol=1e-5, equal_nan=True)


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def batched(metric, *inputs, pieces=3):
    """The metric over ``pieces`` uneven batches (states merged pairwise, as two ranks would)."""
    n = inputs[0].shape[0]
    cuts = [0, n // 5, n // 2, n]
    states = []
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        states.append(metric.update(metric.init(), *(x[lo:hi] for x in inputs)))
    s = states[0]
    for other in states[1:]:
        s = metric.merge(s, other)
    return quiet(metric.finalize, s)


# ---------------------------------------------------------------------- data


def binary_data(seed, logits=False, ignore=False, ties=True, n=N):
    g = torch.Generator().manual_seed(seed)
    p = torch.randn(n, generator=g) * 2 if logits else torch.rand(n, generator=g)
    if ties and not logits:
        p = p.round(decimals=1)
    y = torch.randint(0, 2, (n,), generator=g)
    if ignore:
        y = torch.where(torch.rand(n, generator=g) < 0.2, -1, y)
    return p, y


def multiclass_data(seed, logits=False, ignore=False, n=N):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, C, generator=g) * 2
    y = torch.randint(0, C, (n,), generator=g)
    if ignore:
        y = torch.where(torch.rand(n, generator=g) < 0.2, -1, y)
    return (x if logits else x.softmax(1)), y


def multilabel_data(seed, ignore=False, n=N):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(n, L, generator=g).round(decimals=1)
    y = torch.randint(0, 2, (n, L), generator=g)
    if ignore:
        y = torch.where(torch.rand(n, L, generator=g) < 0.2, -1, y)
    return p, y


def eer_oracle(fpr, tpr):
    """EER on torchmetrics' ROC curve(s), taking the FIRST point of smallest |fpr - fnr|.

    torchmetrics' own ``argmin`` picks among exactly tied points by float32
    rounding (ties are common: ``|a / N - b / P|`` repeats); fmetrics takes
    the first, so the oracle applies that rule to torchmetrics' curve.
    """
    if isinstance(fpr, (list, tuple)) or fpr.dim() == 2:
        return torch.stack([eer_oracle(f, t) for f, t in zip(fpr, tpr)])
    fpr, tpr = fpr.double(), tpr.double()
    gap = (fpr - (1 - tpr)).abs()
    i = torch.nonzero(gap <= gap.min() + 1e-6)[0, 0]
    return (fpr[i] + 1 - tpr[i]) / 2


def logauc_oracle(fpr, tpr, bounds):
    """Log-AUC of torchmetrics' ROC curve(s), with ``np.interp`` at the bounds.

    torchmetrics' own log-AUC sorts the curve with an unstable ``argsort``, so
    at duplicated fpr values it may interpolate on the wrong side of a ROC
    step; np.interp keeps the curve's order.
    """
    if isinstance(fpr, (list, tuple)) or fpr.dim() == 2:
        return torch.stack([logauc_oracle(f, t, bounds) for f, t in zip(fpr, tpr)])
    fpr, tpr = fpr.double().numpy(), tpr.double().numpy()
    at = np.interp(bounds, fpr, tpr)
    f, t = np.sort(np.concatenate([fpr, bounds])), np.sort(np.concatenate([tpr, at]))
    lo, hi = np.nonzero(f == bounds[0])[0][-1], np.nonzero(f == bounds[1])[0][-1]
    log_f = np.log10(f[lo:hi + 1])
    return torch.tensor(np.trapezoid(t[lo:hi + 1], log_f) / (np.log10(bounds[1]) - np.log10(bounds[0])))


def kept(p, y):
    keep = y != -1
    return p[keep].double().numpy(), y[keep].numpy()


# ---------------------------------------------------------------------- binary vs scikit-learn


@pytest.mark.parametrize("seed,logits,ignore", itertools.product(SEEDS, (False, True), (False, True)))
def test_binary_exact_vs_sklearn(seed, logits, ignore):
    p, y = binary_data(seed, logits, ignore)
    ii = -1 if ignore else None
    sp, sy = kept(torch.sigmoid(p) if logits else p, y)
    close(batched(fm.binary_auroc(ignore_index=ii), p, y), skm.roc_auc_score(sy, sp), "sklearn")
    for max_fpr in (0.1, 0.5):
        close(batched(fm.binary_auroc(max_fpr=max_fpr, ignore_index=ii), p, y), skm.roc_auc_score(sy, sp, max_fpr=max_fpr),
              "sklearn")
    close(batched(fm.binary_average_precision(ignore_index=ii), p, y), skm.average_precision_score(sy, sp), "sklearn")
    fpr, tpr, thr = batched(fm.binary_roc(ignore_index=ii), p, y)
    sfpr, stpr, sthr = skm.roc_curve(sy, sp, drop_intermediate=False)
    close((fpr, tpr, thr[1:]), (sfpr, stpr, sthr[1:]), "sklearn")
    assert thr[0] == 1  # torchmetrics' first threshold (sklearn: inf)
    prec, rec, thr = batched(fm.binary_precision_recall_curve(ignore_index=ii), p, y)
    close((prec, rec, thr), skm.precision_recall_curve(sy, sp, drop_intermediate=False), "sklearn")
    close(batched(fm.binary_hinge_loss(ignore_index=ii), p, y), skm.hinge_loss(sy * 2 - 1, sp), "sklearn")


@pytest.mark.parametrize("seed,logits,ignore", itertools.product(SEEDS, (False, True), (False, True)))
def test_binary_vs_torchmetrics(seed, logits, ignore):
    p, y = binary_data(seed, logits, ignore)
    ii = -1 if ignore else None
    for thresholds in (None, 11, [0.05, 0.5, 0.2, 0.9]):
        kw = {"thresholds": thresholds, "ignore_index": ii}
        tm = {"thresholds": thresholds, "ignore_index": ii}
        close(batched(fm.binary_auroc(**kw), p, y), tmf.binary_auroc(p, y, **tm))
        close(batched(fm.binary_auroc(max_fpr=0.4, **kw), p, y), tmf.binary_auroc(p, y, max_fpr=0.4, **tm))
        close(batched(fm.binary_average_precision(**kw), p, y), tmf.binary_average_precision(p, y, **tm))
        close(batched(fm.binary_roc(**kw), p, y), tmf.binary_roc(p, y, **tm))
        close(batched(fm.binary_precision_recall_curve(**kw), p, y), tmf.binary_precision_recall_curve(p, y, **tm))
        close(batched(fm.binary_eer(**kw), p, y), eer_oracle(*tmf.binary_roc(p, y, **tm)[:2]))
        if not isinstance(thresholds, list):  # log-AUC over an unsorted threshold list is not a curve
            close(batched(fm.binary_logauc(fpr_range=(0.15, 0.5), **kw), p, y),
                  logauc_oracle(*tmf.binary_roc(p, y, **tm)[:2], (0.15, 0.5)))
        for floor in (0.3, 0.75):
            for kind in ("recall_at_fixed_precision", "precision_at_fixed_recall", "sensitivity_at_specificity",
                         "specificity_at_sensitivity"):
                close(batched(getattr(fm, f"binary_{kind}")(**{FLOOR[kind]: floor}, **kw), p, y),
                      getattr(tmf, f"binary_{kind}")(p, y, floor, **tm))
    for norm, n_bins in itertools.product(("l1", "l2", "max"), (1, 7, 15)):
        close(batched(fm.binary_calibration_error(n_bins=n_bins, norm=norm, ignore_index=ii), p, y),
              tmf.binary_calibration_error(p, y, n_bins, norm, ignore_index=ii))
    for squared in (False, True):
        close(batched(fm.binary_hinge_loss(squared=squared, ignore_index=ii), p, y),
              tmf.binary_hinge_loss(p, y, squared, ignore_index=ii))


# ---------------------------------------------------------------------- multiclass


@pytest.mark.parametrize("seed,ignore", itertools.product(SEEDS, (False, True)))
def test_multiclass_vs_sklearn(seed, ignore):
    p, y = multiclass_data(seed, ignore=ignore)
    ii = -1 if ignore else None
    sp, sy = p[y != -1].double().numpy(), y[y != -1].numpy()
    for average in ("macro", "weighted"):
        close(batched(fm.multiclass_auroc(num_classes=C, average=average, ignore_index=ii), p, y),
              skm.roc_auc_score(sy, sp, multi_class="ovr", average=average), "sklearn")
        close(batched(fm.multiclass_average_precision(num_classes=C, average=average, ignore_index=ii), p, y),
              skm.average_precision_score(sy, sp, average=average), "sklearn")
    onehot = np.eye(C)[sy]
    close(batched(fm.multiclass_auroc(num_classes=C, average=None, ignore_index=ii), p, y),
          skm.roc_auc_score(onehot, sp, average=None), "sklearn")
    close(batched(fm.multiclass_average_precision(num_classes=C, average="none", ignore_index=ii), p, y),
          skm.average_precision_score(sy, sp, average=None), "sklearn")
    fprs, tprs, thrs = batched(fm.multiclass_roc(num_classes=C, ignore_index=ii), p, y)
    for c in range(C):
        sfpr, stpr, sthr = skm.roc_curve(onehot[:, c], sp[:, c], drop_intermediate=False)
        close((fprs[c], tprs[c], thrs[c][1:]), (sfpr, stpr, sthr[1:]), "sklearn")
    close(batched(fm.multiclass_hinge_loss(num_classes=C, ignore_index=ii), p, y),
          skm.hinge_loss(sy, sp, labels=np.arange(C)), "sklearn")


@pytest.mark.parametrize("seed,logits,ignore", itertools.product(SEEDS[:2], (False, True), (False, True)))
def test_multiclass_vs_torchmetrics(seed, logits, ignore):
    p, y = multiclass_data(seed, logits, ignore)
    ii = -1 if ignore else None
    for thresholds in (None, 9):
        kw = {"thresholds": thresholds, "ignore_index": ii}
        for average in ("macro", "weighted", None):
            close(batched(fm.multiclass_auroc(num_classes=C, average=average, **kw), p, y),
                  tmf.multiclass_auroc(p, y, C, average, **kw))
            close(batched(fm.multiclass_average_precision(num_classes=C, average=average, **kw), p, y),
                  tmf.multiclass_average_precision(p, y, C, average, **kw))
        for average in (None, "micro", "macro"):
            close(batched(fm.multiclass_roc(num_classes=C, average=average, **kw), p, y),
                  tmf.multiclass_roc(p, y, C, average=average, **kw))
            close(batched(fm.multiclass_precision_recall_curve(num_classes=C, average=average, **kw), p, y),
                  tmf.multiclass_precision_recall_curve(p, y, C, average=average, **kw))
            close(batched(fm.multiclass_eer(num_classes=C, average=average, **kw), p, y),
                  eer_oracle(*tmf.multiclass_roc(p, y, C, average=average, **kw)[:2]))
        for average in ("macro", None):
            per_class = logauc_oracle(*tmf.multiclass_roc(p, y, C, **kw)[:2], (0.01, 0.3))
            close(batched(fm.multiclass_logauc(num_classes=C, fpr_range=(0.01, 0.3), average=average, **kw), p, y),
                  per_class if average is None else per_class.mean())
        for kind in ("recall_at_fixed_precision", "precision_at_fixed_recall", "sensitivity_at_specificity",
                     "specificity_at_sensitivity"):
            close(batched(getattr(fm, f"multiclass_{kind}")(num_classes=C, **{FLOOR[kind]: 0.4}, **kw), p, y),
                  getattr(tmf, f"multiclass_{kind}")(p, y, C, 0.4, **kw))
    for norm in ("l1", "l2", "max"):
        close(batched(fm.multiclass_calibration_error(num_classes=C, n_bins=10, norm=norm, ignore_index=ii), p, y),
              tmf.multiclass_calibration_error(p, y, C, 10, norm, ignore_index=ii))
    for mode, squared in itertools.product(("crammer-singer", "one-vs-all"), (False, True)):
        close(batched(fm.multiclass_hinge_loss(num_classes=C, squared=squared, multiclass_mode=mode, ignore_index=ii), p, y),
              tmf.multiclass_hinge_loss(p, y, C, squared, mode, ignore_index=ii))


# ---------------------------------------------------------------------- multilabel


@pytest.mark.parametrize("seed", SEEDS)
def test_multilabel_vs_sklearn(seed):
    p, y = multilabel_data(seed)
    sp, sy = p.double().numpy(), y.numpy()
    for average in ("micro", "macro", "weighted", None):
        close(batched(fm.multilabel_auroc(num_labels=L, average=average), p, y), skm.roc_auc_score(sy, sp, average=average), "sklearn")
        close(batched(fm.multilabel_average_precision(num_labels=L, average=average), p, y),
              skm.average_precision_score(sy, sp, average=average), "sklearn")
    close(batched(fm.multilabel_ranking_average_precision(num_labels=L), p, y),
          skm.label_ranking_average_precision_score(sy, sp), "sklearn")
    close(batched(fm.multilabel_ranking_loss(num_labels=L), p, y), skm.label_ranking_loss(sy, sp), "sklearn")
    close(batched(fm.multilabel_coverage_error(num_labels=L), p, y), skm.coverage_error(sy, sp), "sklearn")


@pytest.mark.parametrize("seed", SEEDS)
def test_multilabel_ranking_with_ignore_index(seed):
    """Ignored labels leave that sample's ranking: sklearn per sample over its kept labels."""
    p, y = multilabel_data(seed, ignore=True)
    lrap, loss, cover = [], [], []
    for pi, yi in zip(p.double().numpy(), y.numpy()):
        keep = yi != -1
        yk, pk = yi[keep], pi[keep]
        if not keep.any():
            continue
        if keep.sum() == 1:  # sklearn needs two labels; one label: no pair, perfect ranking
            lrap.append(1.0), loss.append(0.0), cover.append(float(yk[0] == 1))
            continue
        lrap.append(skm.label_ranking_average_precision_score(yk[None], pk[None]))
        loss.append(skm.label_ranking_loss(yk[None], pk[None]))
        cover.append(skm.coverage_error(yk[None], pk[None]))
    close(batched(fm.multilabel_ranking_average_precision(num_labels=L, ignore_index=-1), p, y), np.mean(lrap), "sklearn")
    close(batched(fm.multilabel_ranking_loss(num_labels=L, ignore_index=-1), p, y), np.mean(loss), "sklearn")
    close(batched(fm.multilabel_coverage_error(num_labels=L, ignore_index=-1), p, y), np.mean(cover), "sklearn")


@pytest.mark.parametrize("seed,ignore", itertools.product(SEEDS[:2], (False, True)))
def test_multilabel_vs_torchmetrics(seed, ignore):
    p, y = multilabel_data(seed, ignore)
    ii = -1 if ignore else None
    for thresholds in (None, 6):
        kw = {"thresholds": thresholds, "ignore_index": ii}
        for average in ("micro", "macro", "weighted", None):
            close(batched(fm.multilabel_auroc(num_labels=L, average=average, **kw), p, y), tmf.multilabel_auroc(p, y, L, average, **kw))
            close(batched(fm.multilabel_average_precision(num_labels=L, average=average, **kw), p, y),
                  tmf.multilabel_average_precision(p, y, L, average, **kw))
        close(batched(fm.multilabel_roc(num_labels=L, **kw), p, y), tmf.multilabel_roc(p, y, L, **kw))
        close(batched(fm.multilabel_precision_recall_curve(num_labels=L, **kw), p, y),
              tmf.multilabel_precision_recall_curve(p, y, L, **kw))
        close(batched(fm.multilabel_eer(num_labels=L, **kw), p, y), eer_oracle(*tmf.multilabel_roc(p, y, L, **kw)[:2]))
        close(batched(fm.multilabel_logauc(num_labels=L, fpr_range=(0.15, 0.5), average=None, **kw), p, y),
              logauc_oracle(*tmf.multilabel_roc(p, y, L, **kw)[:2], (0.15, 0.5)))
        for kind in ("recall_at_fixed_precision", "precision_at_fixed_recall", "sensitivity_at_specificity",
                     "specificity_at_sensitivity"):
            close(batched(getattr(fm, f"multilabel_{kind}")(num_labels=L, **{FLOOR[kind]: 0.6}, **kw), p, y),
                  getattr(tmf, f"multilabel_{kind}")(p, y, L, 0.6, **kw))


def test_facades_match_task_factories():
    p, y = multiclass_data(0)
    pb, yb = binary_data(0)
    pl, yl = multilabel_data(0)
    close(fm.auroc(task="multiclass", num_classes=C, average="weighted")(p, y), fm.multiclass_auroc(num_classes=C, average="weighted")(p, y))
    close(fm.average_precision(task="binary", thresholds=5)(pb, yb), fm.binary_average_precision(thresholds=5)(pb, yb))
    close(fm.roc(task="multilabel", num_labels=L)(pl, yl), fm.multilabel_roc(num_labels=L)(pl, yl))
    close(fm.precision_recall_curve(task="binary")(pb, yb), fm.binary_precision_recall_curve()(pb, yb))
    close(fm.eer(task="multiclass", num_classes=C, average="macro")(p, y), fm.multiclass_eer(num_classes=C, average="macro")(p, y))
    close(fm.logauc(task="multiclass", num_classes=C)(p, y), fm.multiclass_logauc(num_classes=C, average=None)(p, y))
    close(fm.calibration_error(task="multiclass", num_classes=C)(p, y), fm.multiclass_calibration_error(num_classes=C)(p, y))
    close(fm.hinge_loss(task="multiclass", num_classes=C, multiclass_mode="one-vs-all")(p, y),
          fm.multiclass_hinge_loss(num_classes=C, multiclass_mode="one-vs-all")(p, y))
    close(fm.recall_at_fixed_precision(task="binary", min_precision=0.5)(pb, yb), fm.binary_recall_at_fixed_precision(min_precision=0.5)(pb, yb))
    close(fm.specificity_at_sensitivity(task="multilabel", min_sensitivity=0.5, num_labels=L)(pl, yl),
          fm.multilabel_specificity_at_sensitivity(num_labels=L, min_sensitivity=0.5)(pl, yl))


# ---------------------------------------------------------------------- nasty cases


def test_all_tied_scores():
    p, y = torch.full((40,), 0.3), torch.arange(40) % 2
    close(fm.binary_auroc()(p, y), skm.roc_auc_score(y.numpy(), p.numpy()), "sklearn")
    close(fm.binary_average_precision()(p, y), skm.average_precision_score(y.numpy(), p.numpy()), "sklearn")
    close(fm.binary_roc()(p, y), tmf.binary_roc(p, y))
    close(fm.binary_eer()(p, y), eer_oracle(*tmf.binary_roc(p, y)[:2]))
    pl = torch.full((10, L), 0.5)
    yl = (torch.arange(10 * L).reshape(10, L) % 3 == 0).long()
    close(fm.multilabel_ranking_average_precision(num_labels=L)(pl, yl),
          skm.label_ranking_average_precision_score(yl.numpy(), pl.numpy()), "sklearn")
    close(fm.multilabel_ranking_loss(num_labels=L)(pl, yl), skm.label_ranking_loss(yl.numpy(), pl.numpy()), "sklearn")
    close(fm.multilabel_coverage_error(num_labels=L)(pl, yl), skm.coverage_error(yl.numpy(), pl.numpy()), "sklearn")


@pytest.mark.parametrize("thresholds", [None, 5])
def test_all_negative_targets_follow_torchmetrics(thresholds):
    p, y = torch.rand(30, generator=torch.Generator().manual_seed(0)), torch.zeros(30, dtype=torch.long)
    with pytest.warns(UserWarning) if thresholds is None else warnings.catch_warnings():
        got = fm.binary_auroc(thresholds=thresholds)(p, y)
    close(got, quiet(tmf.binary_auroc, p, y, thresholds=thresholds))
    close(quiet(fm.binary_average_precision(thresholds=thresholds), p, y),
          quiet(tmf.binary_average_precision, p, y, thresholds=thresholds))
    close(quiet(fm.binary_roc(thresholds=thresholds), p, y), quiet(tmf.binary_roc, p, y, thresholds=thresholds))
    close(quiet(fm.binary_precision_recall_curve(thresholds=thresholds), p, y),
          quiet(tmf.binary_precision_recall_curve, p, y, thresholds=thresholds))


def test_single_sample():
    p, y = torch.tensor([0.7]), torch.tensor([1])
    close(quiet(fm.binary_auroc(), p, y), quiet(tmf.binary_auroc, p, y))
    close(quiet(fm.binary_roc(), p, y), quiet(tmf.binary_roc, p, y))
    close(quiet(fm.binary_precision_recall_curve(), p, y), quiet(tmf.binary_precision_recall_curve, p, y))
    close(fm.binary_calibration_error()(p, y), tmf.binary_calibration_error(p, y))
    pm, ym = torch.tensor([[0.1, 0.6, 0.3]]), torch.tensor([1])
    close(quiet(fm.multiclass_auroc(num_classes=3, average=None), pm, ym), quiet(tmf.multiclass_auroc, pm, ym, 3, None))
    pl, yl = torch.tensor([[0.2, 0.9, 0.4]]), torch.tensor([[0, 1, 1]])
    close(fm.multilabel_ranking_loss(num_labels=3)(pl, yl), skm.label_ranking_loss(yl.numpy(), pl.numpy()), "sklearn")


@pytest.mark.parametrize("thresholds", [None, 7])
def test_class_absent_from_all_data(thresholds):
    p, y = multiclass_data(3)
    y = torch.where(y == 2, 0, y)  # class 2 never occurs
    for average in ("macro", "weighted", None):
        close(quiet(fm.multiclass_auroc(num_classes=C, average=average, thresholds=thresholds), p, y),
              quiet(tmf.multiclass_auroc, p, y, C, average, thresholds))
        close(quiet(fm.multiclass_average_precision(num_classes=C, average=average, thresholds=thresholds), p, y),
              quiet(tmf.multiclass_average_precision, p, y, C, average, thresholds))


def test_batch_entirely_ignored_changes_nothing():
    p, y = binary_data(4)
    m = fm.binary_auroc(ignore_index=-1)
    s = m.update(m.init(), p, y)
    s2 = m.update(s, torch.rand(9), torch.full((9,), -1))
    close(m.finalize(s2), m.finalize(s))
    mc = fm.multiclass_average_precision(num_classes=C, thresholds=5, ignore_index=-1)
    pm, ym = multiclass_data(4)
    s = mc.update(mc.init(), pm, ym)
    torch.testing.assert_close(mc.update(s, pm[:6], torch.full((6,), -1)).hist, s.hist)


def test_extra_dimensions_are_flattened():
    g = torch.Generator().manual_seed(5)
    p, y = torch.rand(20, 3, generator=g), torch.randint(0, 2, (20, 3), generator=g)
    close(fm.binary_auroc()(p, y), skm.roc_auc_score(y.reshape(-1).numpy(), p.reshape(-1).numpy()), "sklearn")
    pm, ym = torch.randn(20, C, 3, generator=g).softmax(1), torch.randint(0, C, (20, 3), generator=g)
    close(fm.multiclass_auroc(num_classes=C)(pm, ym), tmf.multiclass_auroc(pm, ym, C))
    close(fm.multiclass_calibration_error(num_classes=C)(pm, ym), tmf.multiclass_calibration_error(pm, ym, C))


def test_float_and_column_targets():
    p, y = binary_data(6)
    want = fm.binary_auroc()(p, y)
    close(fm.binary_auroc()(p, y.float()), want)
    close(fm.binary_auroc()(p, y[:, None]), want)


@pytest.mark.parametrize("thresholds", [None, 8])
def test_logits_and_extra_dimensions_with_ignore_index(thresholds):
    g = torch.Generator().manual_seed(7)
    pl, yl = torch.randn(40, L, 3, generator=g) * 3, torch.randint(-1, 2, (40, L, 3), generator=g)
    kw = {"thresholds": thresholds, "ignore_index": -1}
    for average in ("micro", "macro", None):
        close(batched(fm.multilabel_auroc(num_labels=L, average=average, **kw), pl, yl), tmf.multilabel_auroc(pl, yl, L, average, **kw))
        close(batched(fm.multilabel_average_precision(num_labels=L, average=average, **kw), pl, yl),
              tmf.multilabel_average_precision(pl, yl, L, average, **kw))
    close(batched(fm.multilabel_roc(num_labels=L, **kw), pl, yl), tmf.multilabel_roc(pl, yl, L, **kw))
    pm, ym = torch.randn(40, C, 3, generator=g) * 3, torch.randint(-1, C, (40, 3), generator=g)
    for average in ("macro", "weighted", None):
        close(batched(fm.multiclass_auroc(num_classes=C, average=average, **kw), pm, ym), tmf.multiclass_auroc(pm, ym, C, average, **kw))
        close(batched(fm.multiclass_average_precision(num_classes=C, average=average, **kw), pm, ym),
              tmf.multiclass_average_precision(pm, ym, C, average, **kw))
    close(batched(fm.multiclass_calibration_error(num_classes=C, ignore_index=-1), pm, ym),
          tmf.multiclass_calibration_error(pm, ym, C, ignore_index=-1))
    close(batched(fm.multiclass_hinge_loss(num_classes=C, ignore_index=-1), pm, ym),
          tmf.multiclass_hinge_loss(pm, ym, C, ignore_index=-1))


@pytest.mark.parametrize("ignore", [False, True])
def test_exact_state_mixes_logit_and_probability_batches(ignore):
    """Exact binary / multilabel states keep raw scores and apply the sigmoid per logits batch in finalize."""
    g = torch.Generator().manual_seed(11)
    probs, logits = torch.rand(30, generator=g), torch.randn(25, generator=g) * 3
    yp, yl = torch.randint(0, 2, (30,), generator=g), torch.randint(0, 2, (25,), generator=g)
    kw = {}
    if ignore:  # an ignored entry outside [0, 1] must not turn a probability batch into logits
        probs, yp = torch.cat([probs, torch.tensor([7.0])]), torch.cat([yp, torch.tensor([-1])])
        kw = {"ignore_index": -1}
    m = fm.binary_auroc(**kw)
    s = m.update(m.update(m.init(), probs, yp), logits, yl)
    keep = yp >= 0
    p, y = torch.cat([probs[keep], logits.sigmoid()]), torch.cat([yp[keep], yl])
    close(quiet(m.finalize, s), skm.roc_auc_score(y.numpy(), p.double().numpy()), "sklearn")
    roc = fm.binary_roc(**kw)
    s = roc.update(roc.update(roc.init(), logits, yl), probs, yp)
    close(quiet(roc.finalize, s), tmf.binary_roc(torch.cat([logits.sigmoid(), probs[keep]]), torch.cat([yl, yp[keep]])))
    pl, tl = torch.randn(20, L, generator=g) * 3, torch.randint(0, 2, (20, L), generator=g)
    pp, tp = torch.rand(15, L, generator=g), torch.randint(0, 2, (15, L), generator=g)
    ml = fm.multilabel_auroc(num_labels=L, average=None)
    s = ml.update(ml.update(ml.init(), pl, tl), pp, tp)
    want = [skm.roc_auc_score(torch.cat([tl, tp])[:, k].numpy(), torch.cat([pl.sigmoid(), pp])[:, k].double().numpy())
            for k in range(L)]
    close(quiet(ml.finalize, s), torch.tensor(want), "sklearn")


def test_exact_state_without_validation_applies_logits_per_batch():
    g = torch.Generator().manual_seed(12)
    probs, logits = torch.rand(30, generator=g), torch.randn(25, generator=g) * 3
    yp, yl = torch.randint(0, 2, (30,), generator=g), torch.randint(0, 2, (25,), generator=g)
    m = fm.binary_auroc(validate_args=False)
    s = m.update(m.update(m.init(), probs, yp), logits, yl)
    want = skm.roc_auc_score(torch.cat([yp, yl]).numpy(), torch.cat([probs, logits.sigmoid()]).double().numpy())
    close(quiet(m.finalize, s), want, "sklearn")
