"""Precision-recall curve: ``(precision, recall, thresholds)`` with ``P = TP / (TP + FP)``, ``R = TP / P``."""
from __future__ import annotations

import torch

from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import check_average, family
from fmetrics.classification.curves.roc import check_task
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = [
    "binary_precision_recall_curve",
    "multiclass_precision_recall_curve",
    "multilabel_precision_recall_curve",
    "precision_recall_curve",
]


def multi_pr(p, average: str):
    """``average``: ``"none"`` (per column), ``"micro"`` (pooled) or ``"macro"`` (torchmetrics' interpolation)."""
    if average == "micro":
        return _curve.pr(p.pooled(), p.name)  # pooled: a 0/1 column, as torchmetrics
    counts = p.counts()
    exact = counts[0].exact
    precision, recall, thr = zip(*(_curve.pr(c, p.name, p.absent_recall) for c in counts))
    if average == "macro":
        grid = torch.cat(precision).sort().values
        mean_recall = sum(_curve.interp(grid, p, r) for p, r in zip(precision, recall)) / len(counts)
        return grid, mean_recall, torch.cat(thr).sort().values
    return _curve.stack(precision, exact), _curve.stack(recall, exact), (list(thr) if exact else thr[0])


@factory
def binary_precision_recall_curve(*, thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """Binary precision-recall curve ``(precision, recall, thresholds)``.

    Exact: one point per distinct score in increasing threshold order, then
    the point ``(1, 0)`` (scikit-learn's ``precision_recall_curve`` with
    ``drop_intermediate=False``). Binned: one point per threshold (``NaN``
    where undefined), then ``(1, 0)``.

    Example::

        >>> p, r, t = fmetrics.binary_precision_recall_curve()(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                                    torch.tensor([0, 0, 1, 1]))
        >>> p, r
        (tensor([0.5000, 0.6667, 0.5000, 1.0000, 1.0000], ...), tensor([1.0000, 1.0000, 0.5000, 0.5000, 0.0000], ...))
    """
    fam = family("binary_precision_recall_curve", "binary", 1, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: _curve.pr(p.counts()[0], fam.name))


@factory
def multiclass_precision_recall_curve(*, num_classes, thresholds=None, average=None, ignore_index=None,
                                      validate_args=True) -> Metric:
    """One-vs-rest PR curve per class; ``average`` ``"micro"`` pools, ``"macro"`` interpolates and averages."""
    fam = family("multiclass_precision_recall_curve", "multiclass", num_classes, thresholds, ignore_index,
                 validate_args)
    average = check_average(fam.name, average, ("none", "micro", "macro"))
    return fam.metric(lambda p: multi_pr(p, average))


@factory
def multilabel_precision_recall_curve(*, num_labels, thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """PR curve per label (lists when exact, ``(L, T + 1)`` tensors when binned)."""
    fam = family("multilabel_precision_recall_curve", "multilabel", num_labels, thresholds, ignore_index,
                 validate_args)
    return fam.metric(lambda p: multi_pr(p, "none"))


@factory
def precision_recall_curve(*, task, thresholds=None, num_classes=None, num_labels=None, average=None,
                           ignore_index=None, validate_args=True) -> Metric:
    """Task facade for the precision-recall curve."""
    task = check_task("precision_recall_curve", task)
    if task == "binary":
        return binary_precision_recall_curve(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_precision_recall_curve(num_classes=num_classes, thresholds=thresholds, average=average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_precision_recall_curve(num_labels=num_labels, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
