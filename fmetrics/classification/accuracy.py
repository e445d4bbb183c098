"""Accuracy: the fraction of correct predictions.

binary ``(tp + tn) / (tp + fp + tn + fn)``; multiclass per class
``tp / (tp + fn)`` (micro: the fraction of correct samples); multilabel per
label ``(tp + tn) / (tp + fp + tn + fn)``. Shares the stat-scores state.
"""
from __future__ import annotations

from typing import Optional

from fmetrics.classification._reduce import Counts, divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task, scored_member
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_accuracy", "multiclass_accuracy", "multilabel_accuracy", "accuracy"]


def _all_correct(c: Counts):
    return divide(c.tp + c.tn, c.tp + c.tn + c.fp + c.fn)


def _recall(c: Counts):
    return divide(c.tp, c.tp + c.fn)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_accuracy(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                    validate_args: bool = True) -> Metric:
    """``(tp + tn) / (tp + fp + tn + fn)`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_accuracy()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor(0.3333, dtype=torch.float64)
    """
    return scored_member("binary_accuracy", "binary", 1, _all_correct, None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_accuracy(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                        multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                        validate_args: bool = True) -> Metric:
    """Per-class ``tp / (tp + fn)`` averaged by ``average``; ``"micro"`` is the fraction of correct samples.

    Example::

        >>> fmetrics.multiclass_accuracy(num_classes=3, average="micro")(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.6667, dtype=torch.float64)
    """
    return scored_member("multiclass_accuracy", "multiclass", num_classes, _recall, average,
                         support_rule=top_k != 1, top_k=top_k, multidim_average=multidim_average,
                         ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_accuracy(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                        multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                        validate_args: bool = True) -> Metric:
    """Per-label ``(tp + tn) / (tp + fp + tn + fn)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_accuracy(num_labels=3)
        >>> m(torch.tensor([[0.1, 0.9, 0.8], [0.7, 0.2, 0.4]]), torch.tensor([[0, 1, 0], [1, 0, 1]]))
        tensor(0.6667, dtype=torch.float64)
    """
    return scored_member("multilabel_accuracy", "multilabel", num_labels, _all_correct, average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def accuracy(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
             num_labels: Optional[int] = None, average: Optional[Average] = "micro", multidim_average: MultidimAverage = "global",
             top_k: int = 1, ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade (``"binary" | "multiclass" | "multilabel"``) with torchmetrics' arguments.

    Example::

        >>> fmetrics.accuracy(task="multiclass", num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.6667, dtype=torch.float64)
    """
    task = check_task("accuracy", task, num_classes, num_labels)
    if task == "binary":
        return binary_accuracy(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_accuracy(num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_accuracy(num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
