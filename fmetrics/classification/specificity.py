"""Specificity ``tn / (tn + fp)`` (the true negative rate); shares the stat-scores state."""
from __future__ import annotations

from typing import Optional

from fmetrics.classification._reduce import Counts, divide
from fmetrics.classification.stat_scores import scored_metric, task_dispatch
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_specificity", "multiclass_specificity", "multilabel_specificity", "specificity"]


def _specificity(c: Counts):
    return divide(c.tn, c.tn + c.fp)


@factory
def binary_specificity(*, threshold: float = 0.5, multidim_average: str = "global",
                       ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``tn / (tn + fp)`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_specificity()(torch.tensor([0.7, 0.2, 0.9, 0.1]), torch.tensor([1, 1, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    return scored_metric("binary_specificity", "binary", 1, _specificity, None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
def multiclass_specificity(*, num_classes: int, average: Optional[str] = "macro", top_k: int = 1,
                           multidim_average: str = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-class (one-vs-rest) ``tn / (tn + fp)`` averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_specificity(3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.8889, dtype=torch.float64)
    """
    return scored_metric("multiclass_specificity", "multiclass", num_classes, _specificity, average,
                         top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
def multilabel_specificity(*, num_labels: int, threshold: float = 0.5, average: Optional[str] = "macro",
                           multidim_average: str = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-label ``tn / (tn + fp)`` averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_specificity(2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0., dtype=torch.float64)
    """
    return scored_metric("multilabel_specificity", "multilabel", num_labels, _specificity, average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
def specificity(*, task: str, threshold: float = 0.5, num_classes: Optional[int] = None,
                num_labels: Optional[int] = None, average: Optional[str] = "micro", multidim_average: str = "global",
                top_k: int = 1, ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade over the ``*_specificity`` factories (torchmetrics' arguments)."""
    return task_dispatch(
        "specificity", task, num_classes, num_labels,
        lambda: binary_specificity(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
        lambda n: multiclass_specificity(num_classes=n, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
        lambda n: multilabel_specificity(num_labels=n, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
    )
