"""Negative predictive value ``tn / (tn + fn)``; shares the stat-scores state."""
from __future__ import annotations

from typing import Optional

from fmetrics.classification._reduce import check_zero_division, divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task, scored_member
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = [
    "binary_negative_predictive_value",
    "multiclass_negative_predictive_value",
    "multilabel_negative_predictive_value",
    "negative_predictive_value",
]


def _npv(name, zero_division):
    zd = check_zero_division(name, zero_division)
    return lambda c: divide(c.tn, c.tn + c.fn, zd)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_negative_predictive_value(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global",
                                     ignore_index: Optional[int] = None, validate_args: bool = True,
                                     zero_division: float = 0) -> Metric:
    """``tn / (tn + fn)`` of thresholded binary predictions.

    Example::

        >>> m = fmetrics.binary_negative_predictive_value()
        >>> m(torch.tensor([0.7, 0.2, 0.9, 0.1]), torch.tensor([1, 1, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "binary_negative_predictive_value"
    return scored_member(name, "binary", 1, _npv(name, zero_division), None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_negative_predictive_value(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                                         multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                                         validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-class (one-vs-rest) ``tn / (tn + fn)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multiclass_negative_predictive_value(num_classes=3)
        >>> m(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.8333, dtype=torch.float64)
    """
    name = "multiclass_negative_predictive_value"
    return scored_member(name, "multiclass", num_classes, _npv(name, zero_division), average,
                         support_rule=top_k != 1, top_k=top_k, multidim_average=multidim_average,
                         ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_negative_predictive_value(*, num_labels: int, threshold: float = 0.5,
                                         average: Optional[Average] = "macro", multidim_average: MultidimAverage = "global",
                                         ignore_index: Optional[int] = None, validate_args: bool = True,
                                         zero_division: float = 0) -> Metric:
    """Per-label ``tn / (tn + fn)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_negative_predictive_value(num_labels=2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0., dtype=torch.float64)
    """
    name = "multilabel_negative_predictive_value"
    return scored_member(name, "multilabel", num_labels, _npv(name, zero_division), average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def negative_predictive_value(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
                              num_labels: Optional[int] = None, average: Optional[Average] = "micro",
                              multidim_average: MultidimAverage = "global", top_k: int = 1,
                              ignore_index: Optional[int] = None, validate_args: bool = True,
                              zero_division: float = 0) -> Metric:
    """Task facade over the ``*_negative_predictive_value`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.negative_predictive_value(task="binary")
        >>> m(torch.tensor([0.7, 0.2, 0.9, 0.6, 0.1]), torch.tensor([1, 1, 0, 1, 0]))  # scikit-learn's precision_score(pos_label=0)
        tensor(0.5000, dtype=torch.float64)
    """
    task = check_task("negative_predictive_value", task, num_classes, num_labels)
    if task == "binary":
        return binary_negative_predictive_value(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    if task == "multiclass":
        return multiclass_negative_predictive_value(num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    return multilabel_negative_predictive_value(num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
