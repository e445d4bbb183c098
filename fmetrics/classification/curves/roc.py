"""ROC curve: ``(fpr, tpr, thresholds)`` with ``fpr = FP / N`` and ``tpr = TP / P`` at each threshold."""
from __future__ import annotations

import torch

from fmetrics import validation
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import check_average, family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_roc", "multiclass_roc", "multilabel_roc", "roc"]


def macro_roc(curves: list, exact: bool):
    """torchmetrics' macro ROC: every column's tpr interpolated on the pooled, sorted fpr, then averaged."""
    fprs, tprs, thrs = zip(*curves)
    thr = torch.cat(thrs).sort(descending=True).values
    fpr = torch.cat(fprs).sort().values
    tpr = sum(_curve.interp(fpr, f, t) for f, t in zip(fprs, tprs)) / len(curves)
    return fpr, tpr, thr


def multi_roc(p, average: str):
    """``average``: ``"none"`` (per column), ``"micro"`` (pooled) or ``"macro"`` (`macro_roc`)."""
    if average == "micro":
        return _curve.roc(p.pooled(), p.name)
    counts = p.counts()
    exact = counts[0].exact
    curves = [_curve.roc(c, p.name) for c in counts]
    if average == "macro":
        return macro_roc(curves, exact)
    fpr, tpr, thr = zip(*curves)
    return _curve.stack(fpr, exact), _curve.stack(tpr, exact), (list(thr) if exact else thr[0])


@factory
def binary_roc(*, thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """Binary ROC curve ``(fpr, tpr, thresholds)``.

    Exact (``thresholds=None``): one point per distinct score, decreasing,
    starting at ``(0, 0)`` with threshold 1 (scikit-learn's ``roc_curve`` with
    ``drop_intermediate=False``, up to that first threshold). Binned: one point
    per threshold, ``score >= t`` counts as positive. With no positives
    (negatives) in target, tpr (fpr) is all zeros and a warning is issued.

    Example::

        >>> fpr, tpr, thr = fmetrics.binary_roc()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        >>> fpr, tpr
        (tensor([0.0000, 0.0000, 0.5000, 0.5000, 1.0000], ...), tensor([0.0000, 0.5000, 0.5000, 1.0000, 1.0000], ...))
    """
    fam = family("binary_roc", "binary", 1, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: _curve.roc(p.counts()[0], fam.name))


@factory
def multiclass_roc(*, num_classes, thresholds=None, average=None, ignore_index=None, validate_args=True) -> Metric:
    """One-vs-rest ROC curve per class (``average=None``: lists when exact, ``(C, T)`` tensors when binned).

    ``average="micro"``: the curve of all (class score, is-that-class) pairs
    pooled; ``"macro"``: every class's tpr interpolated on the pooled fpr grid,
    averaged (torchmetrics' definition).
    """
    fam = family("multiclass_roc", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("none", "micro", "macro"))
    return fam.metric(lambda p: multi_roc(p, average))


@factory
def multilabel_roc(*, num_labels, thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """ROC curve per label (lists when exact, ``(L, T)`` tensors when binned)."""
    fam = family("multilabel_roc", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: multi_roc(p, "none"))


def check_task(name: str, task, allowed=("binary", "multiclass", "multilabel")) -> str:
    return validation.check_policy(name, "task", task, allowed)


@factory
def roc(*, task, thresholds=None, num_classes=None, num_labels=None, average=None, ignore_index=None,
        validate_args=True) -> Metric:
    """Task facade: `binary_roc`, `multiclass_roc` or `multilabel_roc`."""
    task = check_task("roc", task)
    if task == "binary":
        return binary_roc(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_roc(num_classes=num_classes, thresholds=thresholds, average=average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_roc(num_labels=num_labels, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
