"""Operating points: the best value of one rate subject to a floor on another.

* recall at fixed precision -- max recall with ``precision >= min_precision``
  (ties: higher precision, then higher threshold); threshold NaN when the
  recall is 0.
* precision at fixed recall -- max precision with ``recall >= min_recall``
  (same tie rule); threshold NaN when the precision is 0.
* sensitivity at specificity -- max tpr with ``1 - fpr >= min_specificity``
  (first such point); ``(0, 1e6)`` when none qualifies.
* specificity at sensitivity -- max ``1 - fpr`` with ``tpr >= min_sensitivity``.

Each returns ``(value, threshold)`` (per class / label for multiclass /
multilabel), over the exact or binned curve, as torchmetrics defines them.
"""
from __future__ import annotations

from typing import Callable

import torch

from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import check_fraction, family
from fmetrics.classification.curves.roc import check_task
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = [
    "binary_recall_at_fixed_precision", "multiclass_recall_at_fixed_precision",
    "multilabel_recall_at_fixed_precision", "recall_at_fixed_precision",
    "binary_precision_at_fixed_recall", "multiclass_precision_at_fixed_recall",
    "multilabel_precision_at_fixed_recall", "precision_at_fixed_recall",
    "binary_sensitivity_at_specificity", "multiclass_sensitivity_at_specificity",
    "multilabel_sensitivity_at_specificity", "sensitivity_at_specificity",
    "binary_specificity_at_sensitivity", "multiclass_specificity_at_sensitivity",
    "multilabel_specificity_at_sensitivity", "specificity_at_sensitivity",
]


def _lexmax(keys, mask):
    """Index of the lexicographic maximum of ``keys`` among ``mask`` (first one on full ties), or None."""
    idx = torch.nonzero(mask).reshape(-1)
    if idx.numel() == 0:
        return None
    for key in keys:
        values = key[idx]
        idx = idx[values == values.max()]
    return idx[0]


def _on_pr(counts, fam, floor, best_recall: bool):
    precision, recall, thr = _curve.pr(counts, fam.name, fam.absent_recall)
    n = thr.numel()
    precision, recall = precision[:n], recall[:n]
    value, limit = (recall, precision) if best_recall else (precision, recall)
    # an undefined (0 / 0: no prediction above the threshold) precision or recall never qualifies
    i = _lexmax([value, limit, thr.double()], (limit >= floor) & ~torch.isnan(value))
    best = value[i] if i is not None else torch.zeros((), dtype=torch.float64)
    t = thr[i] if i is not None and best != 0 else torch.tensor(float("nan"), dtype=thr.dtype)
    return best, t


def _on_roc(counts, fam, floor, best_sensitivity: bool):
    fpr, tpr, thr = _curve.roc(counts, fam.name)
    value, limit = (tpr, 1 - fpr) if best_sensitivity else (1 - fpr, tpr)
    ok = limit >= floor
    if not bool(ok.any()):
        return torch.zeros((), dtype=torch.float64), torch.tensor(1e6, dtype=thr.dtype)
    i = torch.nonzero(ok).reshape(-1)[torch.argmax(value[ok])]
    return value[i], thr[i]


_KINDS: dict[str, tuple[str, Callable]] = {
    "recall_at_fixed_precision": ("min_precision", lambda c, n, f: _on_pr(c, n, f, True)),
    "precision_at_fixed_recall": ("min_recall", lambda c, n, f: _on_pr(c, n, f, False)),
    "sensitivity_at_specificity": ("min_specificity", lambda c, n, f: _on_roc(c, n, f, True)),
    "specificity_at_sensitivity": ("min_sensitivity", lambda c, n, f: _on_roc(c, n, f, False)),
}


def _make(kind: str, task: str, num, floor, thresholds, ignore_index, validate_args) -> Metric:
    arg, point = _KINDS[kind]
    fam = family(f"{task}_{kind}", task, num, thresholds, ignore_index, validate_args)
    floor = check_fraction(fam.name, arg, floor)

    def finalize(p):
        results = [point(c, fam, floor) for c in p.counts()]
        if task == "binary":
            return results[0]
        values, thr = zip(*results)
        return torch.stack([v.to(values[0].device) for v in values]), torch.stack([t.to(thr[0].device) for t in thr])

    return fam.metric(finalize)


def _facade(kind: str, task, floor, thresholds, num_classes, num_labels, ignore_index, validate_args) -> Metric:
    task = check_task(kind, task)
    num = {"binary": 1, "multiclass": num_classes, "multilabel": num_labels}[task]
    return _make(kind, task, num, floor, thresholds, ignore_index, validate_args)


@factory
def binary_recall_at_fixed_precision(*, min_precision, thresholds=None, ignore_index=None, validate_args=True):
    """``(recall, threshold)``: the highest recall with ``precision >= min_precision``.

    Example::

        >>> fmetrics.binary_recall_at_fixed_precision(min_precision=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                               torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.3500))
    """
    return _make("recall_at_fixed_precision", "binary", 1, min_precision, thresholds, ignore_index, validate_args)


@factory
def multiclass_recall_at_fixed_precision(*, num_classes, min_precision, thresholds=None, ignore_index=None,
                                         validate_args=True):
    """Per class (one-vs-rest): ``(recalls (C,), thresholds (C,))``."""
    return _make("recall_at_fixed_precision", "multiclass", num_classes, min_precision, thresholds, ignore_index,
                 validate_args)


@factory
def multilabel_recall_at_fixed_precision(*, num_labels, min_precision, thresholds=None, ignore_index=None,
                                         validate_args=True):
    """Per label: ``(recalls (L,), thresholds (L,))``."""
    return _make("recall_at_fixed_precision", "multilabel", num_labels, min_precision, thresholds, ignore_index,
                 validate_args)


@factory
def recall_at_fixed_precision(*, task, min_precision, thresholds=None, num_classes=None, num_labels=None,
                              ignore_index=None, validate_args=True):
    """Task facade for recall at fixed precision."""
    return _facade("recall_at_fixed_precision", task, min_precision, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)


@factory
def binary_precision_at_fixed_recall(*, min_recall, thresholds=None, ignore_index=None, validate_args=True):
    """``(precision, threshold)``: the highest precision with ``recall >= min_recall``.

    Example::

        >>> fmetrics.binary_precision_at_fixed_recall(min_recall=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                               torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.8000))
    """
    return _make("precision_at_fixed_recall", "binary", 1, min_recall, thresholds, ignore_index, validate_args)


@factory
def multiclass_precision_at_fixed_recall(*, num_classes, min_recall, thresholds=None, ignore_index=None,
                                         validate_args=True):
    """Per class (one-vs-rest): ``(precisions (C,), thresholds (C,))``."""
    return _make("precision_at_fixed_recall", "multiclass", num_classes, min_recall, thresholds, ignore_index,
                 validate_args)


@factory
def multilabel_precision_at_fixed_recall(*, num_labels, min_recall, thresholds=None, ignore_index=None,
                                         validate_args=True):
    """Per label: ``(precisions (L,), thresholds (L,))``."""
    return _make("precision_at_fixed_recall", "multilabel", num_labels, min_recall, thresholds, ignore_index,
                 validate_args)


@factory
def precision_at_fixed_recall(*, task, min_recall, thresholds=None, num_classes=None, num_labels=None,
                              ignore_index=None, validate_args=True):
    """Task facade for precision at fixed recall."""
    return _facade("precision_at_fixed_recall", task, min_recall, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)


@factory
def binary_sensitivity_at_specificity(*, min_specificity, thresholds=None, ignore_index=None, validate_args=True):
    """``(sensitivity, threshold)``: the highest tpr with ``1 - fpr >= min_specificity``.

    Example::

        >>> fmetrics.binary_sensitivity_at_specificity(min_specificity=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                                 torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.3500))
    """
    return _make("sensitivity_at_specificity", "binary", 1, min_specificity, thresholds, ignore_index,
                 validate_args)


@factory
def multiclass_sensitivity_at_specificity(*, num_classes, min_specificity, thresholds=None, ignore_index=None,
                                          validate_args=True):
    """Per class (one-vs-rest): ``(sensitivities (C,), thresholds (C,))``."""
    return _make("sensitivity_at_specificity", "multiclass", num_classes, min_specificity, thresholds,
                 ignore_index, validate_args)


@factory
def multilabel_sensitivity_at_specificity(*, num_labels, min_specificity, thresholds=None, ignore_index=None,
                                          validate_args=True):
    """Per label: ``(sensitivities (L,), thresholds (L,))``."""
    return _make("sensitivity_at_specificity", "multilabel", num_labels, min_specificity, thresholds,
                 ignore_index, validate_args)


@factory
def sensitivity_at_specificity(*, task, min_specificity, thresholds=None, num_classes=None, num_labels=None,
                               ignore_index=None, validate_args=True):
    """Task facade for sensitivity at specificity."""
    return _facade("sensitivity_at_specificity", task, min_specificity, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)


@factory
def binary_specificity_at_sensitivity(*, min_sensitivity, thresholds=None, ignore_index=None, validate_args=True):
    """``(specificity, threshold)``: the highest ``1 - fpr`` with ``tpr >= min_sensitivity``.

    Example::

        >>> fmetrics.binary_specificity_at_sensitivity(min_sensitivity=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                                 torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.8000))
    """
    return _make("specificity_at_sensitivity", "binary", 1, min_sensitivity, thresholds, ignore_index,
                 validate_args)


@factory
def multiclass_specificity_at_sensitivity(*, num_classes, min_sensitivity, thresholds=None, ignore_index=None,
                                          validate_args=True):
    """Per class (one-vs-rest): ``(specificities (C,), thresholds (C,))``."""
    return _make("specificity_at_sensitivity", "multiclass", num_classes, min_sensitivity, thresholds,
                 ignore_index, validate_args)


@factory
def multilabel_specificity_at_sensitivity(*, num_labels, min_sensitivity, thresholds=None, ignore_index=None,
                                          validate_args=True):
    """Per label: ``(specificities (L,), thresholds (L,))``."""
    return _make("specificity_at_sensitivity", "multilabel", num_labels, min_sensitivity, thresholds,
                 ignore_index, validate_args)


@factory
def specificity_at_sensitivity(*, task, min_sensitivity, thresholds=None, num_classes=None, num_labels=None,
                               ignore_index=None, validate_args=True):
    """Task facade for specificity at sensitivity."""
    return _facade("specificity_at_sensitivity", task, min_sensitivity, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)
