"""Equal error rate: ``(fpr + fnr) / 2`` at the first ROC point of smallest ``|fpr - fnr|`` (``fnr = 1 - tpr``)."""
from __future__ import annotations

import torch

from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import check_average, family
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


@factory
def binary_eer(*, thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """Equal error rate of the binary ROC curve (first point of smallest ``|fpr - fnr|``).

    Example::

        >>> fmetrics.binary_eer()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.5000, dtype=torch.float64)
    """
    fam = family("binary_eer", "binary", 1, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: _eer(*_curve.roc(p.counts()[0], fam.name)[:2]))


@factory
def multiclass_eer(*, num_classes, thresholds=None, average=None, ignore_index=None, validate_args=True) -> Metric:
    """EER per class (``average=None``), of the pooled (``"micro"``) or macro-averaged ROC curve."""
    fam = family("multiclass_eer", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("none", "micro", "macro"))
    return fam.metric(lambda p: _multi(p, average))


@factory
def multilabel_eer(*, num_labels, thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """EER per label."""
    fam = family("multilabel_eer", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: _multi(p, "none"))


@factory
def eer(*, task, thresholds=None, num_classes=None, num_labels=None, average=None, ignore_index=None,
        validate_args=True) -> Metric:
    """Task facade for the equal error rate."""
    task = check_task("eer", task)
    if task == "binary":
        return binary_eer(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_eer(num_classes=num_classes, thresholds=thresholds, average=average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_eer(num_labels=num_labels, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
