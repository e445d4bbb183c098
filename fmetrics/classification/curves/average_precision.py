"""Average precision: ``AP = sum_n (R_n - R_{n-1}) P_n`` over the precision-recall curve."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.classification._docs import MEANING, documented
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import ClassAverage, ScoreAverage, Task, Thresholds, check_average, family
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


_MANY = "float64: 0-d, or one value per {} (``({},)``) for ``average='none'`` / ``None``."


@factory
@documented(returns="float64 0-d tensor.", inputs="scores-binary")
def binary_average_precision(*, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                             validate_args: bool = True) -> Metric:
    """Average precision (scikit-learn's ``average_precision_score`` when exact; no interpolation).

    Hard 0/1 predictions trigger a warning at ``finalize``.

    Example::

        >>> fmetrics.binary_average_precision()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.8333, dtype=torch.float64)
    """
    fam = family("binary_average_precision", "binary", 1, thresholds, ignore_index, validate_args)
    return fam.metric(lambda p: multi_ap(p, "none")[0])


@factory
@documented(returns=_MANY.format("class", "C"), inputs="scores-multiclass", average=MEANING["score_average"])
def multiclass_average_precision(*, num_classes: int, average: ClassAverage = "macro", thresholds: Thresholds = None,
                                 ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """One-vs-rest AP per class, reduced by ``average`` (``"macro"``, ``"weighted"``, ``"none"``).

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> m = fmetrics.multiclass_average_precision(num_classes=3)  # sklearn average_precision_score(one_hot, preds)
        >>> m(preds, torch.tensor([0, 2, 2, 1]))
        tensor(0.8333, dtype=torch.float64)
    """
    fam = family("multiclass_average_precision", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("macro", "weighted", "none"))
    return fam.metric(lambda p: multi_ap(p, average))


@factory
@documented(returns=_MANY.format("label", "L"), inputs="scores-multilabel", average=MEANING["score_average"])
def multilabel_average_precision(*, num_labels: int, average: ScoreAverage = "macro", thresholds: Thresholds = None,
                                 ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """AP per label, reduced by ``average`` (``"micro"`` pools every label's pairs).

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> fmetrics.multilabel_average_precision(num_labels=3, average=None)(preds, target)  # sklearn, average=None
        tensor([1.0000, 1.0000, 0.5833], dtype=torch.float64)
    """
    fam = family("multilabel_average_precision", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("micro", "macro", "weighted", "none"))
    return fam.metric(lambda p: multi_ap(p, average))


@factory
@documented(returns="that of the task's factory.", inputs="facade",
            average=MEANING["score_average"] + " Multiclass and multilabel.")
def average_precision(*, task: Task, thresholds: Thresholds = None, num_classes: Optional[int] = None,
                      num_labels: Optional[int] = None, average: ScoreAverage = "macro",
                      ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade for average precision.

    Example::

        >>> m = fmetrics.average_precision(task="multilabel", num_labels=3)  # sklearn average_precision_score
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))
        tensor(0.8611, dtype=torch.float64)
    """
    task = check_task("average_precision", task)
    if task == "binary":
        return binary_average_precision(thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_average_precision(num_classes=num_classes, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_average_precision(num_labels=num_labels, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
