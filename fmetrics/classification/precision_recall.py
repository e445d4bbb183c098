"""Precision ``tp / (tp + fp)`` and recall ``tp / (tp + fn)``; ``zero_division`` fills ``0 / 0``.

Both share the stat-scores state with accuracy, F-beta, specificity, ...
"""
from __future__ import annotations

from typing import Optional

from fmetrics.classification._reduce import check_zero_division, divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task, scored_member
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = [
    "binary_precision", "multiclass_precision", "multilabel_precision", "precision",
    "binary_recall", "multiclass_recall", "multilabel_recall", "recall",
]


def _precision(name, zero_division):
    zd = check_zero_division(name, zero_division)
    return lambda c: divide(c.tp, c.tp + c.fp, zd)


def _recall(name, zero_division):
    zd = check_zero_division(name, zero_division)
    return lambda c: divide(c.tp, c.tp + c.fn, zd)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_precision(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                     validate_args: bool = True, zero_division: float = 0) -> Metric:
    """``tp / (tp + fp)`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_precision()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "binary_precision"
    return scored_member(name, "binary", 1, _precision(name, zero_division), None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_precision(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                         multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                         validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-class ``tp / (tp + fp)`` averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_precision(num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.6667, dtype=torch.float64)
    """
    name = "multiclass_precision"
    return scored_member(name, "multiclass", num_classes, _precision(name, zero_division), average,
                         support_rule=top_k != 1, top_k=top_k, multidim_average=multidim_average,
                         ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_precision(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                         multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                         validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-label ``tp / (tp + fp)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_precision(num_labels=2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0.6667, dtype=torch.float64)
    """
    name = "multilabel_precision"
    return scored_member(name, "multilabel", num_labels, _precision(name, zero_division), average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def precision(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
              num_labels: Optional[int] = None, average: Optional[Average] = "micro", multidim_average: MultidimAverage = "global",
              top_k: int = 1, ignore_index: Optional[int] = None, validate_args: bool = True,
              zero_division: float = 0) -> Metric:
    """Task facade over the ``*_precision`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.precision(task="binary")
        >>> m(torch.tensor([0.7, 0.2, 0.9, 0.6, 0.1]), torch.tensor([1, 1, 0, 1, 0]))  # scikit-learn's precision_score
        tensor(0.6667, dtype=torch.float64)
    """
    task = check_task("precision", task, num_classes, num_labels)
    if task == "binary":
        return binary_precision(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    if task == "multiclass":
        return multiclass_precision(num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    return multilabel_precision(num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_recall(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                  validate_args: bool = True, zero_division: float = 0) -> Metric:
    """``tp / (tp + fn)`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_recall()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "binary_recall"
    return scored_member(name, "binary", 1, _recall(name, zero_division), None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_recall(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                      multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                      validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-class ``tp / (tp + fn)`` averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_recall(num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "multiclass_recall"
    return scored_member(name, "multiclass", num_classes, _recall(name, zero_division), average,
                         support_rule=top_k != 1, top_k=top_k, multidim_average=multidim_average,
                         ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_recall(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                      multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                      validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-label ``tp / (tp + fn)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_recall(num_labels=2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0.6667, dtype=torch.float64)
    """
    name = "multilabel_recall"
    return scored_member(name, "multilabel", num_labels, _recall(name, zero_division), average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def recall(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
           num_labels: Optional[int] = None, average: Optional[Average] = "micro", multidim_average: MultidimAverage = "global",
           top_k: int = 1, ignore_index: Optional[int] = None, validate_args: bool = True,
           zero_division: float = 0) -> Metric:
    """Task facade over the ``*_recall`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.recall(task="multilabel", num_labels=3, average="macro")
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))  # scikit-learn's recall_score(average="macro")
        tensor(0.8333, dtype=torch.float64)
    """
    task = check_task("recall", task, num_classes, num_labels)
    if task == "binary":
        return binary_recall(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    if task == "multiclass":
        return multiclass_recall(num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    return multilabel_recall(num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
