"""Log-AUC: the area under ``tpr`` against ``log10(fpr)`` over ``fpr_range``, divided by the range's width."""
from __future__ import annotations

import warnings
from typing import Literal, Optional, Tuple

import torch

from fmetrics import validation
from fmetrics.classification._docs import documented
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import Task, Thresholds, check_average, family
from fmetrics.classification.curves.roc import check_task
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_logauc", "multiclass_logauc", "multilabel_logauc", "logauc"]


def _check_range(name: str, fpr_range) -> tuple:
    ok = isinstance(fpr_range, (tuple, list)) and len(fpr_range) == 2 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in fpr_range)
    if not ok or not 0 <= fpr_range[0] < fpr_range[1] <= 1:
        raise validation.fail(name, "fpr_range", "a tuple (low, high) with 0 <= low < high <= 1", repr(fpr_range))
    return float(fpr_range[0]), float(fpr_range[1])


def _interp(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """``fp(xp)`` at ``x``, linear between the points sorted by ``xp`` and extended past the ends (as torchmetrics)."""
    xp, order = torch.sort(xp, stable=True)
    fp = fp[order]
    slope = (fp[1:] - fp[:-1]) / (xp[1:] - xp[:-1])
    i = (torch.searchsorted(xp, x) - 1).clamp(0, slope.numel() - 1)
    return fp[i] + slope[i] * (x - xp[i])


def _logauc(fpr: torch.Tensor, tpr: torch.Tensor, fpr_range: tuple, name: str) -> torch.Tensor:
    if fpr.numel() < 2:
        warnings.warn(f"{name}: the ROC curve has fewer than two points; log-AUC is 0", UserWarning, stacklevel=3)
        return torch.zeros((), dtype=torch.float64, device=fpr.device)
    bounds = torch.tensor(fpr_range, dtype=torch.float64, device=fpr.device)
    tpr = torch.cat([tpr, _interp(bounds, fpr, tpr)]).sort().values
    log_fpr = torch.log10(torch.cat([fpr, bounds]).sort().values)
    log_bounds = torch.log10(bounds)
    lo = int(torch.nonzero(log_fpr == log_bounds[0])[-1])
    hi = int(torch.nonzero(log_fpr == log_bounds[1])[-1])
    return _curve.auc(log_fpr[lo:hi + 1], tpr[lo:hi + 1]) / (log_bounds[1] - log_bounds[0])


def _multi(p, fpr_range, average: str) -> torch.Tensor:
    curves = [_curve.roc(c, p.name) for c in p.counts()]
    values = torch.stack([_logauc(f, t, fpr_range, p.name) for f, t, _ in curves])
    return _curve.reduce(values, average, None, p.name)


_AVERAGE = "'macro' the unweighted mean over classes / labels; 'none' / None one value per class / label."
LogAverage = Optional[Literal["macro", "none"]]


@factory
@documented(returns="float64 0-d tensor in [0, 1] (0, with a warning, when the ROC curve has fewer than two points).",
            inputs="scores-binary")
def binary_logauc(*, fpr_range: Tuple[float, float] = (0.001, 0.1), thresholds: Thresholds = None,
                  ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Log-AUC: ``int tpr d(log10 fpr) / (log10 high - log10 low)`` over ``fpr_range = (low, high)``.

    The ROC curve is interpolated linearly (in fpr) at both bounds; tpr and
    fpr are then sorted independently, as torchmetrics does.

    Example::

        >>> # by hand: the ROC curve has tpr 0.5 for every fpr in (0, 0.5), so over (0.001, 0.1) the mean is 0.5
        >>> fmetrics.binary_logauc()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.5000, dtype=torch.float64)
    """
    fam = family("binary_logauc", "binary", 1, thresholds, ignore_index, validate_args)
    fpr_range = _check_range(fam.name, fpr_range)
    return fam.metric(lambda p: _multi(p, fpr_range, "none")[0])


@factory
@documented(returns="float64: 0-d, or ``(C,)`` for ``average='none'`` / ``None``.", inputs="scores-multiclass",
            average=_AVERAGE)
def multiclass_logauc(*, num_classes: int, fpr_range: Tuple[float, float] = (0.001, 0.1), average: LogAverage = "macro",
                      thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                      validate_args: bool = True) -> Metric:
    """One-vs-rest log-AUC per class, ``average`` ``"macro"`` or ``"none"``.

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> # by hand: classes 0 and 2 reach tpr 1 at fpr 0 (log-AUC 1); class 1 has tpr 0 up to fpr 1/3 (log-AUC 0)
        >>> fmetrics.multiclass_logauc(num_classes=3, average=None)(preds, torch.tensor([0, 2, 2, 1]))
        tensor([1., 0., 1.], dtype=torch.float64)
    """
    fam = family("multiclass_logauc", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    fpr_range = _check_range(fam.name, fpr_range)
    average = check_average(fam.name, average, ("macro", "none"))
    return fam.metric(lambda p: _multi(p, fpr_range, average))


@factory
@documented(returns="float64: 0-d, or ``(L,)`` for ``average='none'`` / ``None``.", inputs="scores-multilabel",
            average=_AVERAGE)
def multilabel_logauc(*, num_labels: int, fpr_range: Tuple[float, float] = (0.001, 0.1), average: LogAverage = "macro",
                      thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                      validate_args: bool = True) -> Metric:
    """Log-AUC per label, ``average`` ``"macro"`` or ``"none"``.

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> # by hand: labels 0, 1 reach tpr 1 at fpr 0 (1 each); label 2 has tpr 0 below fpr 0.5 (0): mean 2/3
        >>> fmetrics.multilabel_logauc(num_labels=3)(preds, target)
        tensor(0.6667, dtype=torch.float64)
    """
    fam = family("multilabel_logauc", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    fpr_range = _check_range(fam.name, fpr_range)
    average = check_average(fam.name, average, ("macro", "none"))
    return fam.metric(lambda p: _multi(p, fpr_range, average))


@factory
@documented(returns="that of the task's factory.", inputs="facade",
            average=_AVERAGE + " Multiclass and multilabel; the facade's default is None, as torchmetrics'.")
def logauc(*, task: Task, thresholds: Thresholds = None, num_classes: Optional[int] = None,
           num_labels: Optional[int] = None, fpr_range: Tuple[float, float] = (0.001, 0.1), average: LogAverage = None,
           ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade for log-AUC (``average=None``: per class / label, as torchmetrics' facade).

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> fmetrics.logauc(task="multilabel", num_labels=3)(preds, target)  # by hand, as in multilabel_logauc
        tensor([1., 1., 0.], dtype=torch.float64)
    """
    task = check_task("logauc", task)
    if task == "binary":
        return binary_logauc(fpr_range=fpr_range, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_logauc(num_classes=num_classes, fpr_range=fpr_range, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_logauc(num_labels=num_labels, fpr_range=fpr_range, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
