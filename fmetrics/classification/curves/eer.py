"""Equal error rate: ``(fpr + fnr) / 2`` at the first ROC point of smallest ``|fpr - fnr|`` (``fnr = 1 - tpr``)."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.classification._docs import documented
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import CurveAverage, Task, Thresholds, check_average, family
from fmetrics.classification.curves.roc import check_task, multi_roc
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_eer", "multiclass_eer", "multilabel_eer", "eer"]


def _eer(fpr: torch.Tensor, tpr: torch.Tensor) -> torch.Tensor:
    gap = torch.abs(fpr - (1 - tpr))
    i = torch.nonzero(gap <= gap.min() + 1e-12)[0, 0]  # the first point, also when rounding splits a tie
    return (fpr[i] + 1 - tpr[i]) / 2


def _multi(p, average: str) -> torch.Tensor:
    fpr, tpr, _ = multi_roc(p, average)
    if average != "none":
        return _eer(fpr, tpr)
    return torch.stack([_eer(f, t) for f, t in zip(fpr, tpr)])


_EER_AVERAGE = ("None / 'none': one EER per class; 'micro': the EER of the curve of every (class score, "
                "is-that-class) pair pooled; 'macro': the EER of the macro-averaged ROC curve (torchmetrics' "
                "definition: every class's tpr interpolated on the pooled fpr grid).")


@factory
@documented(returns="float64 0-d tensor.", inputs="scores-binary")
def binary_eer(*, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
               validate_args: bool = True) -> Metric:
    """Equal error rate of the binary ROC curve (first point of smallest ``|fpr - fnr|``).

    Example::

        >>> fmetrics.binary_eer()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.5000, dtype=torch.float64)
    """
    fam = family("binary_eer", "binary", 1, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: _eer(*_curve.roc(p.counts()[0], fam.name)[:2]))


@factory
@documented(returns="float64: ``(C,)`` for ``average=None`` / ``'none'``, else 0-d.", inputs="scores-multiclass",
            average=_EER_AVERAGE)
def multiclass_eer(*, num_classes: int, thresholds: Thresholds = None, average: CurveAverage = None,
                   ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """EER per class (``average=None``), of the pooled (``"micro"``) or macro-averaged ROC curve.

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> # scikit-learn's roc_curve per class, the point of smallest |fpr - fnr|
        >>> fmetrics.multiclass_eer(num_classes=3)(preds, torch.tensor([0, 2, 2, 1]))
        tensor([0.0000, 0.1667, 0.0000], dtype=torch.float64)
    """
    fam = family("multiclass_eer", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("none", "micro", "macro"))
    return fam.metric(lambda p: _multi(p, average))


@factory
@documented(returns="float64 ``(L,)``: one EER per label.", inputs="scores-multilabel")
def multilabel_eer(*, num_labels: int, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                   validate_args: bool = True) -> Metric:
    """EER per label.

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> fmetrics.multilabel_eer(num_labels=3)(preds, target)  # labels 0, 1 separate perfectly; label 2 by sklearn's roc_curve
        tensor([0.0000, 0.0000, 0.5000], dtype=torch.float64)
    """
    fam = family("multilabel_eer", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: _multi(p, "none"))


@factory
@documented(returns="that of the task's factory.", inputs="facade", average=_EER_AVERAGE + " Multiclass only.")
def eer(*, task: Task, thresholds: Thresholds = None, num_classes: Optional[int] = None,
        num_labels: Optional[int] = None, average: CurveAverage = None, ignore_index: Optional[int] = None,
        validate_args: bool = True) -> Metric:
    """Task facade for the equal error rate.

    Example::

        >>> # by hand: ROC points (fpr, fnr) = (0, 1), (0, .5), (.5, .5), ...; the first with fpr == fnr is (.5, .5)
        >>> fmetrics.eer(task="binary")(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.5000, dtype=torch.float64)
    """
    task = check_task("eer", task)
    if task == "binary":
        return binary_eer(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_eer(num_classes=num_classes, thresholds=thresholds, average=average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_eer(num_labels=num_labels, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
