"""ROC curve: ``(fpr, tpr, thresholds)`` with ``fpr = FP / N`` and ``tpr = TP / P`` at each threshold."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics import validation
from fmetrics.classification._docs import MEANING, documented
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import CurveAverage, Task, Thresholds, check_average, family
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


_RETURNS_ONE = ("a tuple ``(fpr, tpr, thresholds)`` of 1-D tensors: fpr and tpr float64, thresholds decreasing "
                "(exact: 1.0 then every distinct score; binned: the T thresholds).")
_RETURNS_MANY = ("``(fpr, tpr, thresholds)`` per column: exact, three lists of 1-D tensors (one per class / label); "
                 "binned, ``(K, T)`` float64 rate tensors and the ``(T,)`` thresholds; with ``average`` 'micro' or "
                 "'macro', one curve of 1-D tensors.")


@factory
@documented(returns=_RETURNS_ONE, inputs="scores-binary")
def binary_roc(*, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
               validate_args: bool = True) -> Metric:
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
@documented(returns=_RETURNS_MANY, inputs="scores-multiclass", average=MEANING["curve_average"])
def multiclass_roc(*, num_classes: int, thresholds: Thresholds = None, average: CurveAverage = None,
                   ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """One-vs-rest ROC curve per class (``average=None``: lists when exact, ``(C, T)`` tensors when binned).

    ``average="micro"``: the curve of all (class score, is-that-class) pairs
    pooled; ``"macro"``: every class's tpr interpolated on the pooled fpr grid,
    averaged (torchmetrics' definition).

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> fpr, tpr, thr = fmetrics.multiclass_roc(num_classes=3)(preds, torch.tensor([0, 2, 2, 1]))
        >>> fpr[1], tpr[1]  # class 1: scikit-learn's roc_curve(target == 1, preds[:, 1], drop_intermediate=False)
        (tensor([0.0000, 0.3333, 0.3333, 0.6667, 1.0000], dtype=torch.float64), tensor([0., 0., 1., 1., 1.], dtype=torch.float64))
    """
    fam = family("multiclass_roc", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("none", "micro", "macro"))
    return fam.metric(lambda p: multi_roc(p, average))


@factory
@documented(returns=_RETURNS_MANY.rsplit("; with", 1)[0] + ".", inputs="scores-multilabel")
def multilabel_roc(*, num_labels: int, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                   validate_args: bool = True) -> Metric:
    """ROC curve per label (lists when exact, ``(L, T)`` tensors when binned).

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> fpr, tpr, thr = fmetrics.multilabel_roc(num_labels=3, thresholds=3)(preds, target)
        >>> tpr  # thresholds 1, 0.5, 0; by hand: the share of each label's positives scoring >= t
        tensor([[0.0000, 1.0000, 1.0000],
                [0.0000, 1.0000, 1.0000],
                [0.0000, 0.5000, 1.0000]], dtype=torch.float64)
    """
    fam = family("multilabel_roc", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: multi_roc(p, "none"))


def check_task(name: str, task, allowed=("binary", "multiclass", "multilabel")) -> str:
    return validation.check_policy(name, "task", task, allowed)


@factory
@documented(returns="that of the task's factory.", inputs="facade", average=MEANING["curve_average"] + " Multiclass only.")
def roc(*, task: Task, thresholds: Thresholds = None, num_classes: Optional[int] = None,
        num_labels: Optional[int] = None, average: CurveAverage = None, ignore_index: Optional[int] = None,
        validate_args: bool = True) -> Metric:
    """Task facade: `binary_roc`, `multiclass_roc` or `multilabel_roc`.

    Example::

        >>> fpr, tpr, thr = fmetrics.roc(task="binary")(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        >>> thr  # scikit-learn's roc_curve(drop_intermediate=False) thresholds, its first (inf) read as 1
        tensor([1.0000, 0.8000, 0.4000, 0.3500, 0.1000])
    """
    task = check_task("roc", task)
    if task == "binary":
        return binary_roc(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_roc(num_classes=num_classes, thresholds=thresholds, average=average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_roc(num_labels=num_labels, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
