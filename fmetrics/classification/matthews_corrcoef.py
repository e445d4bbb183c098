"""Matthews correlation coefficient from the confusion matrix.

``MCC = (c s - sum_k t_k p_k) / sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2))`` with
``c`` the trace, ``s`` the total, ``t_k`` / ``p_k`` the row / column sums.
Multilabel sums the per-label 2x2 matrices first. Degenerate 2x2 matrices
follow torchmetrics: all correct gives 1, all wrong -1, and a zero
denominator is smoothed with ``eps`` (float32 machine epsilon).
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from fmetrics.classification import _empty
from fmetrics.classification.confusion_matrix import confmat_member, no_samples
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Average, MultidimAverage, Task, check_task
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype
from fmetrics.recipe import factory

__all__ = ["binary_matthews_corrcoef", "multiclass_matthews_corrcoef", "multilabel_matthews_corrcoef",
           "matthews_corrcoef"]

_EPS = float(torch.finfo(torch.float32).eps)


def _degenerate_2x2(tn: int, fp: int, fn: int, tp: int) -> Optional[float]:
    """torchmetrics' value for a 2x2 matrix whose MCC denominator is 0 (``None``: not degenerate)."""
    if tp + tn != 0 and fp + fn == 0:
        return 1.0
    if tp + tn == 0 and fp + fn != 0:
        return -1.0
    if (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn) != 0:
        return None
    root = math.sqrt(_EPS)
    if fn == 0 and tn == 0:
        num = root * (tp - fp)
    elif fp == 0 and tn == 0:
        num = root * (tp - fn)
    elif tp == 0 and fn == 0:
        num = root * (tn - fp)
    elif tp == 0 and fp == 0:
        num = root * (tn - fn)
    else:  # unreachable for counts: a zero margin needs one of the pairs above
        return 0.0
    den = (tp + fp + _EPS) * (tp + fn + _EPS) * (tn + fp + _EPS) * (tn + fn + _EPS)
    return num / math.sqrt(den)


def _mcc(confmat: torch.Tensor) -> torch.Tensor:
    if confmat.dim() == 3:
        confmat = confmat.sum(0)
    dtype = accum_dtype(confmat.device)
    if confmat.numel() == 4:
        special = _degenerate_2x2(*(int(v) for v in confmat.reshape(-1)))
        if special is not None:
            return torch.tensor(special, dtype=dtype, device=confmat.device)
    cm = confmat.to(dtype)
    t, p = cm.sum(1), cm.sum(0)
    s, c = cm.sum(), cm.trace()
    num = c * s - (t * p).sum()
    den = (s * s - (p * p).sum()) * (s * s - (t * t).sum())
    return torch.where(den != 0, num / den.clamp_min(1e-300).sqrt(), torch.zeros((), dtype=dtype))


def _value(name: str):
    """`_mcc`, NaN with a warning on empty input (`fmetrics.classification._empty`)."""
    return _empty.guard(name, no_samples, _mcc)


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_matthews_corrcoef(*, threshold: float = 0.5, ignore_index: Optional[int] = None,
                             validate_args: bool = True) -> Metric:
    """MCC of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_matthews_corrcoef()(torch.tensor([0.7, 0.2, 0.9, 0.1]), torch.tensor([1, 1, 0, 0]))
        tensor(0., dtype=torch.float64)
    """
    return confmat_member("binary_matthews_corrcoef", "binary", 1, _value("binary_matthews_corrcoef"), higher_is_better=True, bounds=(-1.0, 1.0), threshold=threshold,
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_matthews_corrcoef(*, num_classes: int, ignore_index: Optional[int] = None,
                                 validate_args: bool = True) -> Metric:
    """Multiclass MCC (Gorodkin's R_K) of argmax predictions.

    Example::

        >>> fmetrics.multiclass_matthews_corrcoef(num_classes=3)(torch.tensor([2, 1, 0, 0]), torch.tensor([2, 0, 0, 1]))
        tensor(0.2000, dtype=torch.float64)
    """
    return confmat_member("multiclass_matthews_corrcoef", "multiclass", num_classes, _value("multiclass_matthews_corrcoef"), higher_is_better=True, bounds=(-1.0, 1.0),
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_matthews_corrcoef(*, num_labels: int, threshold: float = 0.5, ignore_index: Optional[int] = None,
                                 validate_args: bool = True) -> Metric:
    """MCC of the summed per-label 2x2 confusion matrices.

    Example::

        >>> m = fmetrics.multilabel_matthews_corrcoef(num_labels=2)
        >>> m(torch.tensor([[0.9, 0.8], [0.1, 0.2]]), torch.tensor([[1, 0], [0, 0]]))
        tensor(0.5774, dtype=torch.float64)
    """
    return confmat_member("multilabel_matthews_corrcoef", "multilabel", num_labels, _value("multilabel_matthews_corrcoef"), higher_is_better=True, bounds=(-1.0, 1.0), threshold=threshold,
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def matthews_corrcoef(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
                      num_labels: Optional[int] = None, ignore_index: Optional[int] = None,
                      validate_args: bool = True) -> Metric:
    """Task facade over the ``*_matthews_corrcoef`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.matthews_corrcoef(task="binary")
        >>> m(torch.tensor([0.7, 0.2, 0.9, 0.6, 0.1]), torch.tensor([1, 1, 0, 1, 0]))  # scikit-learn's matthews_corrcoef
        tensor(0.1667, dtype=torch.float64)
    """
    task = check_task("matthews_corrcoef", task, num_classes, num_labels)
    if task == "binary":
        return binary_matthews_corrcoef(threshold=threshold, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_matthews_corrcoef(num_classes=num_classes, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_matthews_corrcoef(num_labels=num_labels, threshold=threshold, ignore_index=ignore_index, validate_args=validate_args)
