"""Log-AUC: the area under ``tpr`` against ``log10(fpr)`` over ``fpr_range``, divided by the range's width."""
from __future__ import annotations

import warnings

import torch

from fmetrics import validation
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import check_average, family
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
        return torch.zeros((), dtype=torch.float64)
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


@factory
def binary_logauc(*, fpr_range=(0.001, 0.1), thresholds=None, ignore_index=None, validate_args=True) -> Metric:
    """Log-AUC: ``int tpr d(log10 fpr) / (log10 high - log10 low)`` over ``fpr_range = (low, high)``.

    The ROC curve is interpolated linearly (in fpr) at both bounds; tpr and
    fpr are then sorted independently, as torchmetrics does.

    Example::

        >>> fmetrics.binary_logauc()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.5000, dtype=torch.float64)
    """
    fam = family("binary_logauc", "binary", 1, thresholds, ignore_index, validate_args)
    fpr_range = _check_range(fam.name, fpr_range)
    return fam.metric(lambda p: _multi(p, fpr_range, "none")[0])


@factory
def multiclass_logauc(*, num_classes, fpr_range=(0.001, 0.1), average="macro", thresholds=None, ignore_index=None,
                      validate_args=True) -> Metric:
    """One-vs-rest log-AUC per class, ``average`` ``"macro"`` or ``"none"``."""
    fam = family("multiclass_logauc", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    fpr_range = _check_range(fam.name, fpr_range)
    average = check_average(fam.name, average, ("macro", "none"))
    return fam.metric(lambda p: _multi(p, fpr_range, average))


@factory
def multilabel_logauc(*, num_labels, fpr_range=(0.001, 0.1), average="macro", thresholds=None, ignore_index=None,
                      validate_args=True) -> Metric:
    """Log-AUC per label, ``average`` ``"macro"`` or ``"none"``."""
    fam = family("multilabel_logauc", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    fpr_range = _check_range(fam.name, fpr_range)
    average = check_average(fam.name, average, ("macro", "none"))
    return fam.metric(lambda p: _multi(p, fpr_range, average))


@factory
def logauc(*, task, thresholds=None, num_classes=None, num_labels=None, fpr_range=(0.001, 0.1), average=None,
           ignore_index=None, validate_args=True) -> Metric:
    """Task facade for log-AUC (``average=None``: per class / label, as torchmetrics' facade)."""
    task = check_task("logauc", task)
    if task == "binary":
        return binary_logauc(fpr_range=fpr_range, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_logauc(num_classes=num_classes, fpr_range=fpr_range, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_logauc(num_labels=num_labels, fpr_range=fpr_range, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
