"""Hamming distance: ``1 - accuracy`` per class / label, averaged; shares the stat-scores state."""
from __future__ import annotations

from typing import Optional

from fmetrics.classification._reduce import Counts, divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task, scored_member
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_hamming_distance", "multiclass_hamming_distance", "multilabel_hamming_distance",
           "hamming_distance"]


def _wrong(c: Counts):
    return 1 - divide(c.tp + c.tn, c.tp + c.tn + c.fp + c.fn)


def _missed(c: Counts):
    return 1 - divide(c.tp, c.tp + c.fn)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_hamming_distance(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global",
                            ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``(fp + fn) / (tp + fp + tn + fn)``: the fraction of wrong binary predictions.

    Example::

        >>> fmetrics.binary_hamming_distance()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor(0.6667, dtype=torch.float64)
    """
    return scored_member("binary_hamming_distance", "binary", 1, _wrong, None, higher_is_better=False, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_hamming_distance(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                                multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                                validate_args: bool = True) -> Metric:
    """Per-class ``1 - tp / (tp + fn)`` averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_hamming_distance(num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    return scored_member("multiclass_hamming_distance", "multiclass", num_classes, _missed, average, higher_is_better=False,
                         top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_hamming_distance(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                                multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                                validate_args: bool = True) -> Metric:
    """Per-label fraction of wrong predictions averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_hamming_distance(num_labels=2)
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return scored_member("multilabel_hamming_distance", "multilabel", num_labels, _wrong, average, higher_is_better=False,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def hamming_distance(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
                     num_labels: Optional[int] = None, average: Optional[Average] = "micro",
                     multidim_average: MultidimAverage = "global", top_k: int = 1, ignore_index: Optional[int] = None,
                     validate_args: bool = True) -> Metric:
    """Task facade over the ``*_hamming_distance`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.hamming_distance(task="multilabel", num_labels=3)
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))  # scikit-learn's hamming_loss
        tensor(0.1667, dtype=torch.float64)
    """
    task = check_task("hamming_distance", task, num_classes, num_labels)
    if task == "binary":
        return binary_hamming_distance(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_hamming_distance(num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_hamming_distance(num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
