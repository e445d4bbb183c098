"""Precision-recall curve: ``(precision, recall, thresholds)`` with ``P = TP / (TP + FP)``, ``R = TP / P``."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.classification._docs import MEANING, documented
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import CurveAverage, Task, Thresholds, check_average, family
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


_RETURNS_ONE = ("a tuple ``(precision, recall, thresholds)``: precision and recall float64 of length T + 1 (the last "
                "point is (1, 0)), thresholds increasing, length T (exact: the distinct scores).")
_RETURNS_MANY = ("``(precision, recall, thresholds)`` per column: exact, three lists of 1-D tensors (one per class / "
                 "label); binned, ``(K, T + 1)`` float64 tensors and the ``(T,)`` thresholds; with ``average`` "
                 "'micro' or 'macro', one curve of 1-D tensors.")


@factory
@documented(returns=_RETURNS_ONE, inputs="scores-binary")
def binary_precision_recall_curve(*, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                                  validate_args: bool = True) -> Metric:
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
@documented(returns=_RETURNS_MANY, inputs="scores-multiclass", average=MEANING["curve_average"])
def multiclass_precision_recall_curve(*, num_classes: int, thresholds: Thresholds = None, average: CurveAverage = None,
                                      ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """One-vs-rest PR curve per class; ``average`` ``"micro"`` pools, ``"macro"`` interpolates and averages.

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> p, r, t = fmetrics.multiclass_precision_recall_curve(num_classes=3)(preds, torch.tensor([0, 2, 2, 1]))
        >>> p[2], r[2]  # class 2: scikit-learn's precision_recall_curve(target == 2, preds[:, 2], drop_intermediate=False)
        (tensor([0.5000, 1.0000, 1.0000, 1.0000], dtype=torch.float64), tensor([1.0000, 1.0000, 0.5000, 0.0000], dtype=torch.float64))
    """
    fam = family("multiclass_precision_recall_curve", "multiclass", num_classes, thresholds, ignore_index,
                 validate_args)
    average = check_average(fam.name, average, ("none", "micro", "macro"))
    return fam.metric(lambda p: multi_pr(p, average))


@factory
@documented(returns=_RETURNS_MANY.rsplit("; with", 1)[0] + ".", inputs="scores-multilabel")
def multilabel_precision_recall_curve(*, num_labels: int, thresholds: Thresholds = None,
                                      ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """PR curve per label (lists when exact, ``(L, T + 1)`` tensors when binned).

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> p, r, t = fmetrics.multilabel_precision_recall_curve(num_labels=3)(preds, target)
        >>> p[2], r[2], t[2]  # label 2: scikit-learn's precision_recall_curve(drop_intermediate=False)
        (tensor([0.5000, 0.6667, 0.5000, 0.0000, 1.0000], dtype=torch.float64), tensor([1.0000, 1.0000, 0.5000, 0.0000, 0.0000], dtype=torch.float64), tensor([0.1000, 0.4000, 0.6000, 0.8000]))
    """
    fam = family("multilabel_precision_recall_curve", "multilabel", num_labels, thresholds, ignore_index,
                 validate_args)
    return fam.metric(lambda p: multi_pr(p, "none"))


@factory
@documented(returns="that of the task's factory.", inputs="facade", average=MEANING["curve_average"] + " Multiclass only.")
def precision_recall_curve(*, task: Task, thresholds: Thresholds = None, num_classes: Optional[int] = None,
                           num_labels: Optional[int] = None, average: CurveAverage = None,
                           ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade for the precision-recall curve.

    Example::

        >>> m = fmetrics.precision_recall_curve(task="binary", thresholds=3)
        >>> m(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))  # by hand, score >= t is positive
        (tensor([0.5000, 1.0000,    nan, 1.0000], dtype=torch.float64), tensor([1.0000, 0.5000, 0.0000, 0.0000], dtype=torch.float64), tensor([0.0000, 0.5000, 1.0000]))
    """
    task = check_task("precision_recall_curve", task)
    if task == "binary":
        return binary_precision_recall_curve(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_precision_recall_curve(num_classes=num_classes, thresholds=thresholds, average=average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_precision_recall_curve(num_labels=num_labels, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
