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

from typing import Callable, Optional

import torch

from fmetrics.classification._docs import documented
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import Task, Thresholds, check_fraction, family
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
    best = value[i] if i is not None else torch.zeros((), dtype=torch.float64, device=value.device)
    t = thr[i] if i is not None and best != 0 else torch.full((), float("nan"), dtype=thr.dtype, device=thr.device)
    return best, t


def _on_roc(counts, fam, floor, best_sensitivity: bool):
    fpr, tpr, thr = _curve.roc(counts, fam.name)
    value, limit = (tpr, 1 - fpr) if best_sensitivity else (1 - fpr, tpr)
    ok = limit >= floor
    if not bool(ok.any()):
        return (torch.zeros((), dtype=torch.float64, device=value.device),
                torch.full((), 1e6, dtype=thr.dtype, device=thr.device))
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


_NONE = {"recall_at_fixed_precision": "(0, NaN) when no point qualifies (and NaN threshold whenever the recall is 0)",
         "precision_at_fixed_recall": "(0, NaN) when no point qualifies (and NaN threshold whenever the precision is 0)",
         "sensitivity_at_specificity": "(0, 1e6) when no point qualifies",
         "specificity_at_sensitivity": "(0, 1e6) when no point qualifies"}


def _returns(kind: str, task: str) -> str:
    value = kind.split("_at_")[0]
    if task == "binary":
        return (f"a tuple ``({value}, threshold)`` of 0-d tensors: the float64 {value} and the threshold of that "
                f"point (scores' float dtype); {_NONE[kind]}.")
    k = "C" if task == "multiclass" else "L"
    return (f"a tuple of ``({k},)`` tensors: the float64 {value} and the threshold per "
            f"{'class (one-vs-rest)' if task == 'multiclass' else 'label'}; {_NONE[kind]}.")


_INPUTS = {"binary": "scores-binary", "multiclass": "scores-multiclass", "multilabel": "scores-multilabel"}


def _doc(kind: str, task: str):
    return documented(returns=_returns(kind, task) if task else "that of the task's factory.",
                      inputs=_INPUTS[task] if task else "facade")



@factory
@_doc("recall_at_fixed_precision", 'binary')
def binary_recall_at_fixed_precision(*, min_precision: float, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                                     validate_args: bool = True) -> Metric:
    """``(recall, threshold)``: the highest recall with ``precision >= min_precision``.

    Example::

        >>> fmetrics.binary_recall_at_fixed_precision(min_precision=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                               torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.3500))
    """
    return _make("recall_at_fixed_precision", "binary", 1, min_precision, thresholds, ignore_index, validate_args)


@factory
@_doc("recall_at_fixed_precision", 'multiclass')
def multiclass_recall_at_fixed_precision(*, num_classes: int, min_precision: float, thresholds: Thresholds = None,
                                         ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per class (one-vs-rest): ``(recalls (C,), thresholds (C,))``.

    Example::

        >>> m = fmetrics.multiclass_recall_at_fixed_precision(num_classes=3, min_precision=0.5)
        >>> # the best point of scikit-learn's precision_recall_curve per column
        >>> m(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]]),
        ...   torch.tensor([0, 2, 2, 1]))
        (tensor([1., 1., 1.], dtype=torch.float64), tensor([0.7000, 0.4000, 0.3000]))
    """
    return _make("recall_at_fixed_precision", "multiclass", num_classes, min_precision, thresholds, ignore_index,
                 validate_args)


@factory
@_doc("recall_at_fixed_precision", 'multilabel')
def multilabel_recall_at_fixed_precision(*, num_labels: int, min_precision: float, thresholds: Thresholds = None,
                                         ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per label: ``(recalls (L,), thresholds (L,))``.

    Example::

        >>> m = fmetrics.multilabel_recall_at_fixed_precision(num_labels=3, min_precision=0.5)
        >>> # the best point of scikit-learn's precision_recall_curve per column
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))
        (tensor([1., 1., 1.], dtype=torch.float64), tensor([0.7000, 0.6000, 0.4000]))
    """
    return _make("recall_at_fixed_precision", "multilabel", num_labels, min_precision, thresholds, ignore_index,
                 validate_args)


@factory
@_doc("recall_at_fixed_precision", None)
def recall_at_fixed_precision(*, task: Task, min_precision: float, thresholds: Thresholds = None, num_classes: Optional[int] = None,
                              num_labels: Optional[int] = None, ignore_index: Optional[int] = None,
                              validate_args: bool = True) -> Metric:
    """Task facade for recall at fixed precision.

    Example::

        >>> m = fmetrics.recall_at_fixed_precision(task='multiclass', num_classes=3, min_precision=0.5)
        >>> # the best point of scikit-learn's precision_recall_curve per column
        >>> m(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]]),
        ...   torch.tensor([0, 2, 2, 1]))
        (tensor([1., 1., 1.], dtype=torch.float64), tensor([0.7000, 0.4000, 0.3000]))
    """
    return _facade("recall_at_fixed_precision", task, min_precision, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)


@factory
@_doc("precision_at_fixed_recall", 'binary')
def binary_precision_at_fixed_recall(*, min_recall: float, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                                     validate_args: bool = True) -> Metric:
    """``(precision, threshold)``: the highest precision with ``recall >= min_recall``.

    Example::

        >>> fmetrics.binary_precision_at_fixed_recall(min_recall=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                               torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.8000))
    """
    return _make("precision_at_fixed_recall", "binary", 1, min_recall, thresholds, ignore_index, validate_args)


@factory
@_doc("precision_at_fixed_recall", 'multiclass')
def multiclass_precision_at_fixed_recall(*, num_classes: int, min_recall: float, thresholds: Thresholds = None,
                                         ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per class (one-vs-rest): ``(precisions (C,), thresholds (C,))``.

    Example::

        >>> m = fmetrics.multiclass_precision_at_fixed_recall(num_classes=3, min_recall=0.5)
        >>> # the best point of scikit-learn's precision_recall_curve per column
        >>> m(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]]),
        ...   torch.tensor([0, 2, 2, 1]))
        (tensor([1.0000, 0.5000, 1.0000], dtype=torch.float64), tensor([0.7000, 0.4000, 0.3000]))
    """
    return _make("precision_at_fixed_recall", "multiclass", num_classes, min_recall, thresholds, ignore_index,
                 validate_args)


@factory
@_doc("precision_at_fixed_recall", 'multilabel')
def multilabel_precision_at_fixed_recall(*, num_labels: int, min_recall: float, thresholds: Thresholds = None,
                                         ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per label: ``(precisions (L,), thresholds (L,))``.

    Example::

        >>> m = fmetrics.multilabel_precision_at_fixed_recall(num_labels=3, min_recall=0.5)
        >>> # the best point of scikit-learn's precision_recall_curve per column
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))
        (tensor([1.0000, 1.0000, 0.6667], dtype=torch.float64), tensor([0.7000, 0.6000, 0.4000]))
    """
    return _make("precision_at_fixed_recall", "multilabel", num_labels, min_recall, thresholds, ignore_index,
                 validate_args)


@factory
@_doc("precision_at_fixed_recall", None)
def precision_at_fixed_recall(*, task: Task, min_recall: float, thresholds: Thresholds = None, num_classes: Optional[int] = None,
                              num_labels: Optional[int] = None, ignore_index: Optional[int] = None,
                              validate_args: bool = True) -> Metric:
    """Task facade for precision at fixed recall.

    Example::

        >>> m = fmetrics.precision_at_fixed_recall(task='multilabel', num_labels=3, min_recall=0.5)
        >>> # the best point of scikit-learn's precision_recall_curve per column
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))
        (tensor([1.0000, 1.0000, 0.6667], dtype=torch.float64), tensor([0.7000, 0.6000, 0.4000]))
    """
    return _facade("precision_at_fixed_recall", task, min_recall, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)


@factory
@_doc("sensitivity_at_specificity", 'binary')
def binary_sensitivity_at_specificity(*, min_specificity: float, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                                      validate_args: bool = True) -> Metric:
    """``(sensitivity, threshold)``: the highest tpr with ``1 - fpr >= min_specificity``.

    Example::

        >>> fmetrics.binary_sensitivity_at_specificity(min_specificity=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                                 torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.3500))
    """
    return _make("sensitivity_at_specificity", "binary", 1, min_specificity, thresholds, ignore_index,
                 validate_args)


@factory
@_doc("sensitivity_at_specificity", 'multiclass')
def multiclass_sensitivity_at_specificity(*, num_classes: int, min_specificity: float, thresholds: Thresholds = None,
                                          ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per class (one-vs-rest): ``(sensitivities (C,), thresholds (C,))``.

    Example::

        >>> m = fmetrics.multiclass_sensitivity_at_specificity(num_classes=3, min_specificity=0.5)
        >>> # the best point of scikit-learn's roc_curve per column
        >>> m(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]]),
        ...   torch.tensor([0, 2, 2, 1]))
        (tensor([1., 1., 1.], dtype=torch.float64), tensor([0.7000, 0.4000, 0.3000]))
    """
    return _make("sensitivity_at_specificity", "multiclass", num_classes, min_specificity, thresholds,
                 ignore_index, validate_args)


@factory
@_doc("sensitivity_at_specificity", 'multilabel')
def multilabel_sensitivity_at_specificity(*, num_labels: int, min_specificity: float, thresholds: Thresholds = None,
                                          ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per label: ``(sensitivities (L,), thresholds (L,))``.

    Example::

        >>> m = fmetrics.multilabel_sensitivity_at_specificity(num_labels=3, min_specificity=0.5)
        >>> # the best point of scikit-learn's roc_curve per column
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))
        (tensor([1., 1., 1.], dtype=torch.float64), tensor([0.7000, 0.6000, 0.4000]))
    """
    return _make("sensitivity_at_specificity", "multilabel", num_labels, min_specificity, thresholds,
                 ignore_index, validate_args)


@factory
@_doc("sensitivity_at_specificity", None)
def sensitivity_at_specificity(*, task: Task, min_specificity: float, thresholds: Thresholds = None, num_classes: Optional[int] = None,
                               num_labels: Optional[int] = None, ignore_index: Optional[int] = None,
                               validate_args: bool = True) -> Metric:
    """Task facade for sensitivity at specificity.

    Example::

        >>> m = fmetrics.sensitivity_at_specificity(task='multilabel', num_labels=3, min_specificity=0.5)
        >>> # the best point of scikit-learn's roc_curve per column
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))
        (tensor([1., 1., 1.], dtype=torch.float64), tensor([0.7000, 0.6000, 0.4000]))
    """
    return _facade("sensitivity_at_specificity", task, min_specificity, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)


@factory
@_doc("specificity_at_sensitivity", 'binary')
def binary_specificity_at_sensitivity(*, min_sensitivity: float, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                                      validate_args: bool = True) -> Metric:
    """``(specificity, threshold)``: the highest ``1 - fpr`` with ``tpr >= min_sensitivity``.

    Example::

        >>> fmetrics.binary_specificity_at_sensitivity(min_sensitivity=0.5)(torch.tensor([0.1, 0.4, 0.35, 0.8]),
        ...                                                 torch.tensor([0, 0, 1, 1]))
        (tensor(1., dtype=torch.float64), tensor(0.8000))
    """
    return _make("specificity_at_sensitivity", "binary", 1, min_sensitivity, thresholds, ignore_index,
                 validate_args)


@factory
@_doc("specificity_at_sensitivity", 'multiclass')
def multiclass_specificity_at_sensitivity(*, num_classes: int, min_sensitivity: float, thresholds: Thresholds = None,
                                          ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per class (one-vs-rest): ``(specificities (C,), thresholds (C,))``.

    Example::

        >>> m = fmetrics.multiclass_specificity_at_sensitivity(num_classes=3, min_sensitivity=0.5)
        >>> # the best point of scikit-learn's roc_curve per column
        >>> m(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]]),
        ...   torch.tensor([0, 2, 2, 1]))
        (tensor([1.0000, 0.6667, 1.0000], dtype=torch.float64), tensor([0.7000, 0.4000, 0.5000]))
    """
    return _make("specificity_at_sensitivity", "multiclass", num_classes, min_sensitivity, thresholds,
                 ignore_index, validate_args)


@factory
@_doc("specificity_at_sensitivity", 'multilabel')
def multilabel_specificity_at_sensitivity(*, num_labels: int, min_sensitivity: float, thresholds: Thresholds = None,
                                          ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Per label: ``(specificities (L,), thresholds (L,))``.

    Example::

        >>> m = fmetrics.multilabel_specificity_at_sensitivity(num_labels=3, min_sensitivity=0.5)
        >>> # the best point of scikit-learn's roc_curve per column
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))
        (tensor([1.0000, 1.0000, 0.5000], dtype=torch.float64), tensor([0.9000, 0.8000, 0.6000]))
    """
    return _make("specificity_at_sensitivity", "multilabel", num_labels, min_sensitivity, thresholds,
                 ignore_index, validate_args)


@factory
@_doc("specificity_at_sensitivity", None)
def specificity_at_sensitivity(*, task: Task, min_sensitivity: float, thresholds: Thresholds = None, num_classes: Optional[int] = None,
                               num_labels: Optional[int] = None, ignore_index: Optional[int] = None,
                               validate_args: bool = True) -> Metric:
    """Task facade for specificity at sensitivity.

    Example::

        >>> m = fmetrics.specificity_at_sensitivity(task='multiclass', num_classes=3, min_sensitivity=0.5)
        >>> # the best point of scikit-learn's roc_curve per column
        >>> m(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]]),
        ...   torch.tensor([0, 2, 2, 1]))
        (tensor([1.0000, 0.6667, 1.0000], dtype=torch.float64), tensor([0.7000, 0.4000, 0.5000]))
    """
    return _facade("specificity_at_sensitivity", task, min_sensitivity, thresholds, num_classes, num_labels,
                   ignore_index, validate_args)
