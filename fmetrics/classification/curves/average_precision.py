"""Average precision: ``AP = sum_n (R_n - R_{n-1}) P_n`` over the precision-recall curve."""
from __future__ import annotations

import torch

from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import check_average, family
from fmetrics.classification.curves.roc import check_task
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_average_precision", "multiclass_average_precision", "multilabel_average_precision",
           "average_precision"]


def _column(counts, name: str, absent: float = 1.0) -> torch.Tensor:
    precision, recall, _ = _curve.pr(counts, name, absent)
    return _curve.average_precision(precision, recall, counts.exact)


def multi_ap(p, average: str) -> torch.Tensor:
    if average == "micro":
        pooled = p.pooled()
        p.warn_if_hard([pooled])
        return _column(pooled, p.name)
    counts = p.counts()
    p.warn_if_hard(counts)
    values = torch.stack([_column(c, p.name, p.absent_recall) for c in counts])
    return _curve.reduce(values, average, torch.stack([c.pos for c in counts]), p.name)


@factory
def binary_average_precision(*, thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """Average precision (scikit-learn's ``average_precision_score`` when exact; no interpolation).

    Hard 0/1 predictions trigger a warning at ``finalize``.

    Example::

        >>> fmetrics.binary_average_precision()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.8333, dtype=torch.float64)
    """
    fam = family("binary_average_precision", "binary", 1, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: multi_ap(p, "none")[0])


@factory
def multiclass_average_precision(*, num_classes, average="macro", thresholds=None, ignore_index=None,
                                 validate_args=True) -> Metric:
    """One-vs-rest AP per class, reduced by ``average`` (``"macro"``, ``"weighted"``, ``"none"``)."""
    fam = family("multiclass_average_precision", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("macro", "weighted", "none"))
    return fam.metric(lambda p: multi_ap(p, average))


@factory
def multilabel_average_precision(*, num_labels, average="macro", thresholds=None, ignore_index=None,
                                 validate_args=True) -> Metric:
    """AP per label, reduced by ``average`` (``"micro"`` pools every label's pairs)."""
    fam = family("multilabel_average_precision", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("micro", "macro", "weighted", "none"))
    return fam.metric(lambda p: multi_ap(p, average))


@factory
def average_precision(*, task, thresholds=None, num_classes=None, num_labels=None, average="macro",
                      ignore_index=None, validate_args=True) -> Metric:
    """Task facade for average precision."""
    task = check_task("average_precision", task)
    if task == "binary":
        return binary_average_precision(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_average_precision(num_classes=num_classes, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_average_precision(num_labels=num_labels, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
