"""Jaccard index (intersection over union) ``tp / (tp + fp + fn)``; shares the stat-scores state.

Multiclass with ``ignore_index`` inside ``[0, num_classes)``: that class is
left out of the micro and macro averages (as in torchmetrics).
"""
from __future__ import annotations

from typing import Optional

from fmetrics.classification._reduce import check_average, check_zero_division, divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task, scored_member
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_jaccard_index", "multiclass_jaccard_index", "multilabel_jaccard_index", "jaccard_index"]


def _jaccard(name, zero_division):
    zd = check_zero_division(name, zero_division)
    return lambda c: divide(c.tp, c.tp + c.fp + c.fn, zd)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_jaccard_index(*, threshold: float = 0.5, ignore_index: Optional[int] = None, validate_args: bool = True,
                         zero_division: float = 0.0) -> Metric:
    """``tp / (tp + fp + fn)`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_jaccard_index()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor(0.3333, dtype=torch.float64)
    """
    name = "binary_jaccard_index"
    return scored_member(name, "binary", 1, _jaccard(name, zero_division), None, threshold=threshold,
                         ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_jaccard_index(*, num_classes: int, average: Optional[Average] = "macro", ignore_index: Optional[int] = None,
                             validate_args: bool = True, zero_division: float = 0.0) -> Metric:
    """Per-class ``tp / (tp + fp + fn)`` averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_jaccard_index(num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "multiclass_jaccard_index"
    how = check_average(name, average)
    in_range = isinstance(ignore_index, int) and 0 <= ignore_index < num_classes
    return scored_member(name, "multiclass", num_classes, _jaccard(name, zero_division), how,
                         drop_class=ignore_index if in_range and how in ("micro", "macro") else None,
                         ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_jaccard_index(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                             ignore_index: Optional[int] = None, validate_args: bool = True,
                             zero_division: float = 0.0) -> Metric:
    """Per-label ``tp / (tp + fp + fn)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_jaccard_index(num_labels=2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "multilabel_jaccard_index"
    return scored_member(name, "multilabel", num_labels, _jaccard(name, zero_division), average,
                         threshold=threshold, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def jaccard_index(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
                  num_labels: Optional[int] = None, average: Optional[Average] = "macro",
                  ignore_index: Optional[int] = None, validate_args: bool = True,
                  zero_division: float = 0.0) -> Metric:
    """Task facade over the ``*_jaccard_index`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.jaccard_index(task="multiclass", num_classes=3)
        >>> m(torch.tensor([2, 1, 0, 1, 2, 0]), torch.tensor([2, 0, 0, 1, 1, 0]))  # scikit-learn's jaccard_score(average="macro")
        tensor(0.5000, dtype=torch.float64)
    """
    task = check_task("jaccard_index", task, num_classes, num_labels)
    if task == "binary":
        return binary_jaccard_index(threshold=threshold, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    if task == "multiclass":
        return multiclass_jaccard_index(num_classes=num_classes, average=average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    return multilabel_jaccard_index(num_labels=num_labels, threshold=threshold, average=average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
