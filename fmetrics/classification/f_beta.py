"""F-beta ``(1 + b^2) tp / ((1 + b^2) tp + b^2 fn + fp)`` and F1 (``b = 1``); shares the stat-scores state."""
from __future__ import annotations

from typing import Optional

from fmetrics import validation
from fmetrics.classification._reduce import check_zero_division, divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task, scored_member
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = [
    "binary_fbeta_score", "multiclass_fbeta_score", "multilabel_fbeta_score", "fbeta_score",
    "binary_f1_score", "multiclass_f1_score", "multilabel_f1_score", "f1_score",
]


def _fbeta(name, beta, zero_division):
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not beta > 0:
        raise validation.fail(name, "beta", "a float > 0", repr(beta))
    zd = check_zero_division(name, zero_division)
    b2 = float(beta) ** 2
    return lambda c: divide((1 + b2) * c.tp, (1 + b2) * c.tp + b2 * c.fn + c.fp, zd)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_fbeta_score(*, beta: float, threshold: float = 0.5, multidim_average: MultidimAverage = "global",
                       ignore_index: Optional[int] = None, validate_args: bool = True,
                       zero_division: float = 0) -> Metric:
    """F-beta of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_fbeta_score(beta=2.0)(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "binary_fbeta_score"
    return scored_member(name, "binary", 1, _fbeta(name, beta, zero_division), None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_fbeta_score(*, beta: float, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                           multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-class F-beta averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_fbeta_score(beta=0.5, num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.6111, dtype=torch.float64)
    """
    name = "multiclass_fbeta_score"
    return scored_member(name, "multiclass", num_classes, _fbeta(name, beta, zero_division), average,
                         top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_fbeta_score(*, beta: float, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                           multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-label F-beta averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_fbeta_score(beta=1.0, num_labels=2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0.6667, dtype=torch.float64)
    """
    name = "multilabel_fbeta_score"
    return scored_member(name, "multilabel", num_labels, _fbeta(name, beta, zero_division), average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def fbeta_score(*, task: Task, beta: float = 1.0, threshold: float = 0.5, num_classes: Optional[int] = None,
                num_labels: Optional[int] = None, average: Optional[Average] = "micro",
                multidim_average: MultidimAverage = "global", top_k: int = 1, ignore_index: Optional[int] = None,
                validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Task facade over the ``*_fbeta_score`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.fbeta_score(task="multiclass", num_classes=3, beta=2.0, average="macro")
        >>> m(torch.tensor([2, 1, 0, 1, 2, 0]), torch.tensor([2, 0, 0, 1, 1, 0]))  # scikit-learn's fbeta_score(beta=2, average="macro")
        tensor(0.6825, dtype=torch.float64)
    """
    task = check_task("fbeta_score", task, num_classes, num_labels)
    if task == "binary":
        return binary_fbeta_score(beta=beta, threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    if task == "multiclass":
        return multiclass_fbeta_score(beta=beta, num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    return multilabel_fbeta_score(beta=beta, num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_f1_score(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                    validate_args: bool = True, zero_division: float = 0) -> Metric:
    """F1 ``2 tp / (2 tp + fn + fp)`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_f1_score()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "binary_f1_score"
    return scored_member(name, "binary", 1, _fbeta(name, 1.0, zero_division), None, threshold=threshold,
                         multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_f1_score(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                        multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                        validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-class F1 averaged by ``average``.

    Example::

        >>> fmetrics.multiclass_f1_score(num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor(0.5556, dtype=torch.float64)
    """
    name = "multiclass_f1_score"
    return scored_member(name, "multiclass", num_classes, _fbeta(name, 1.0, zero_division), average,
                         top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_f1_score(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                        multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                        validate_args: bool = True, zero_division: float = 0) -> Metric:
    """Per-label F1 averaged by ``average``.

    Example::

        >>> m = fmetrics.multilabel_f1_score(num_labels=2, average="micro")
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor(0.6667, dtype=torch.float64)
    """
    name = "multilabel_f1_score"
    return scored_member(name, "multilabel", num_labels, _fbeta(name, 1.0, zero_division), average,
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def f1_score(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
             num_labels: Optional[int] = None, average: Optional[Average] = "micro", multidim_average: MultidimAverage = "global",
             top_k: int = 1, ignore_index: Optional[int] = None, validate_args: bool = True,
             zero_division: float = 0) -> Metric:
    """Task facade over the ``*_f1_score`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.f1_score(task="multiclass", num_classes=3, average=None)
        >>> m(torch.tensor([2, 1, 0, 1, 2, 0]), torch.tensor([2, 0, 0, 1, 1, 0]))  # scikit-learn's f1_score(average=None)
        tensor([0.8000, 0.5000, 0.6667], dtype=torch.float64)
    """
    task = check_task("f1_score", task, num_classes, num_labels)
    if task == "binary":
        return binary_f1_score(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    if task == "multiclass":
        return multiclass_f1_score(num_classes=num_classes, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
    return multilabel_f1_score(num_labels=num_labels, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args, zero_division=zero_division)
