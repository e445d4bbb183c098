"""Specificity ``tn / (tn + fp)`` (the true negative rate); shares the stat-scores state."""
from __future__ import annotations

from typing import Optional

from fmetrics.classification._reduce import Counts, divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task, scored_member
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_specificity", "multiclass_specificity", "multilabel_specificity", "specificity"]


def _specificity(c: Counts):
    return divide(c.tn, c.tn + c.fp)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_specificity(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global",
                       ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``tn / (tn + fp)`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_specificity()(torch.tensor([0.7, 0.2, 0.9, 0.1]), torch.tensor([1, 1, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    return scored_member("binary_specificity", "binary", 1, _specificity, None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_specificity(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                           multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-class (one-vs-rest) ``tn / (tn + fp)`` averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_specificity(num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.8889, dtype=torch.float64)
    """
    return scored_member("multiclass_specificity", "multiclass", num_classes, _specificity, average,
                         top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_specificity(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                           multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-label ``tn / (tn + fp)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_specificity(num_labels=2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0., dtype=torch.float64)
    """
    return scored_member("multilabel_specificity", "multilabel", num_labels, _specificity, average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def specificity(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
                num_labels: Optional[int] = None, average: Optional[Average] = "micro", multidim_average: MultidimAverage = "global",
                top_k: int = 1, ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade over the ``*_specificity`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.specificity(task="binary")
        >>> m(torch.tensor([0.7, 0.2, 0.9, 0.6, 0.1]), torch.tensor([1, 1, 0, 1, 0]))  # scikit-learn's recall_score(pos_label=0)
        tensor(0.5000, dtype=torch.float64)
    """
    task = check_task("specificity", task, num_classes, num_labels)
    if task == "binary":
        return binary_specificity(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_specificity(num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_specificity(num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
