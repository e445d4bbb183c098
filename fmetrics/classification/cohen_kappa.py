"""Cohen's kappa: agreement between predictions and targets beyond chance.

``kappa = 1 - sum(w * confmat) / sum(w * expected)`` with ``expected`` the outer
product of the row and column sums over the total, and ``w`` the disagreement
weights: ``"none"`` (0 on the diagonal, 1 elsewhere), ``"linear"`` ``|i - j|``,
``"quadratic"`` ``(i - j)^2``.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _empty
from fmetrics.classification.confusion_matrix import confmat_member, no_samples
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype
from fmetrics.recipe import factory

__all__ = ["binary_cohen_kappa", "multiclass_cohen_kappa", "cohen_kappa"]

Weights = Optional[Literal["none", "linear", "quadratic"]]


def _kappa(name: str, weights):
    how = validation.check_policy(name, "weights", "none" if weights is None else weights,
                                  ("none", "linear", "quadratic"))

    def value(confmat: torch.Tensor) -> torch.Tensor:
        cm = confmat.to(accum_dtype(confmat.device))
        n = cm.shape[0]
        expected = cm.sum(1, keepdim=True) * cm.sum(0, keepdim=True) / cm.sum()
        idx = torch.arange(n, dtype=cm.dtype, device=cm.device)
        diff = idx[:, None] - idx[None, :]
        w = {"none": (diff != 0).to(cm.dtype), "linear": diff.abs(), "quadratic": diff * diff}[how]
        return 1 - (w * cm).sum() / (w * expected).sum()

    return _empty.guard(name, no_samples, value)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_cohen_kappa(*, threshold: float = 0.5, weights: Weights = None, ignore_index: Optional[int] = None,
                       validate_args: bool = True) -> Metric:
    """Cohen's kappa of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_cohen_kappa()(torch.tensor([0.7, 0.2, 0.9, 0.1]), torch.tensor([1, 1, 0, 0]))
        tensor(0., dtype=torch.float64)
    """
    name = "binary_cohen_kappa"
    return confmat_member(name, "binary", 1, _kappa(name, weights), higher_is_better=True, bounds=(-1.0, 1.0), threshold=threshold,
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_cohen_kappa(*, num_classes: int, weights: Weights = None, ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Cohen's kappa of argmax predictions over ``num_classes`` classes.

    Example::

        >>> fmetrics.multiclass_cohen_kappa(num_classes=3)(torch.tensor([2, 1, 0, 0]), torch.tensor([2, 0, 0, 1]))
        tensor(0.2000, dtype=torch.float64)
    """
    name = "multiclass_cohen_kappa"
    return confmat_member(name, "multiclass", num_classes, _kappa(name, weights), higher_is_better=True, bounds=(-1.0, 1.0), ignore_index=ignore_index,
                          validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def cohen_kappa(*, task: Literal["binary", "multiclass"], threshold: float = 0.5, num_classes: Optional[int] = None,
                weights: Weights = None, ignore_index: Optional[int] = None,
                validate_args: bool = True) -> Metric:
    """Task facade (``"binary" | "multiclass"``) over the ``*_cohen_kappa`` factories.

    Example::

        >>> m = fmetrics.cohen_kappa(task="multiclass", num_classes=3, weights="quadratic")
        >>> # scikit-learn's cohen_kappa_score(weights="quadratic")
        >>> m(torch.tensor([2, 1, 0, 1, 2, 0]), torch.tensor([2, 0, 0, 1, 1, 0]))
        tensor(0.7500, dtype=torch.float64)
    """
    task = check_task("cohen_kappa", task, num_classes, None, ('binary', 'multiclass'))
    if task == "binary":
        return binary_cohen_kappa(threshold=threshold, weights=weights, ignore_index=ignore_index, validate_args=validate_args)
    return multiclass_cohen_kappa(num_classes=num_classes, weights=weights, ignore_index=ignore_index, validate_args=validate_args)
