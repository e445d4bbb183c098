"""Confusion matrices: ``confmat[target, pred]`` counts, optionally normalized.

Binary ``(2, 2)`` and multilabel ``(L, 2, 2)`` matrices are ``[[tn, fp], [fn, tp]]``
read from the stat-scores state (so they share it with accuracy, F1, ...);
the multiclass ``(C, C)`` matrix has its own state, shared with
`multiclass_matthews_corrcoef` and `multiclass_cohen_kappa`. ``normalize``:
``"true"`` (rows sum to 1), ``"pred"`` (columns), ``"all"``, or ``None``;
``0 / 0`` becomes 0.
"""
from __future__ import annotations

from typing import Callable, Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification._reduce import Counts
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import Task, check_task, stat_scores_family, value_rule
from fmetrics.metric import Metric
from fmetrics.family import Family
from fmetrics.state import accum_dtype
from fmetrics.recipe import factory

__all__ = ["binary_confusion_matrix", "multiclass_confusion_matrix", "multilabel_confusion_matrix",
           "confusion_matrix"]

NORMALIZE = ("true", "pred", "all", "none")


Normalize = Literal["true", "pred", "all", "none"]


class ConfusionMatrixState(NamedTuple):
    confmat: torch.Tensor  # int64 (C, C): rows are targets, columns predictions
    invalid: validation.Invalid  # deferred record of entries that broke the value rule


def _two_by_two(c: Counts) -> torch.Tensor:
    """``(..., L)`` counts -> ``(..., L, 2, 2)`` ``[[tn, fp], [fn, tp]]``."""
    return torch.stack([torch.stack([c.tn, c.fp], -1), torch.stack([c.fn, c.tp], -1)], -2)


def confmat_family(name: str, num: int, ignore_index: Optional[int], validate_args: bool) -> Family:
    """The multiclass ``(C, C)`` confusion-matrix `Family`; its shared step gives the int64 matrix."""
    num = _format.check_num(name, "num_classes", num)
    ignore_index = _format.check_ignore_index(name, ignore_index)
    validate = bool(validate_args)

    def init():
        return ConfusionMatrixState(torch.zeros(num, num, dtype=torch.int64), validation.invalid_init())

    def update(state, preds, target):
        count, raise_nan = value_rule(validate, (preds, target))
        f = _format.multiclass_inputs(name, preds, target, num, ignore_index, validate=count, top_k=1,
                                      raise_nan=raise_nan)
        index = (f.target * num + f.preds).reshape(-1)
        bins = torch.zeros(num * num, dtype=torch.int64, device=index.device)
        bins = bins.scatter_add(0, index, f.keep.reshape(-1).long())
        return ConfusionMatrixState(state.confmat + bins.reshape(num, num), _format.flag(state.invalid, f))

    def merge(a, b):
        return ConfusionMatrixState(a.confmat + b.confmat, validation.invalid_merge(a.invalid, b.invalid))

    def confmat(state):
        _format.report(name, state.invalid, num)
        return state.confmat

    return Family(name="confusion_matrix", key=(num, ignore_index, validate), init=init, update=update,
                  reductions=ConfusionMatrixState(confmat="sum", invalid=None), merge=merge, shared=confmat,
                  check=_format.checker(name, "multiclass", num, ignore_index, nan_in_update=True) if validate else None)


def confmat_member(name: str, task: str, num: int, finish: Callable[[torch.Tensor], object], *,
                   threshold: float = 0.5, ignore_index: Optional[int] = None, validate_args: bool = True,
                   **metadata) -> Metric:
    """A `Metric` whose value is ``finish(confmat)`` of the int64 confusion matrix.

    ``confmat``: binary ``(2, 2)``, multiclass ``(C, C)``, multilabel ``(L, 2, 2)``; binary and multilabel
    read the stat-scores family (shared with accuracy, F1, ...), multiclass `confmat_family`.
    """
    if task == "multiclass":
        return confmat_family(name, num, ignore_index, validate_args).metric(name, finish, **metadata)
    fam = stat_scores_family(name, task, num, threshold=threshold, ignore_index=ignore_index,
                             validate_args=validate_args)
    if task == "binary":
        return fam.metric(name, lambda c: finish(_two_by_two(c)[0]), **metadata)
    return fam.metric(name, lambda c: finish(_two_by_two(c)), **metadata)


def _normalizer(name: str, normalize):
    how = validation.check_policy(name, "normalize", "none" if normalize is None else normalize, NORMALIZE)

    def value(confmat: torch.Tensor):
        confmat = confmat.to(accum_dtype(confmat.device))
        dims = {"true": (-1,), "pred": (-2,), "all": (-2, -1)}[how]
        return torch.nan_to_num(confmat / confmat.sum(dims, keepdim=True), nan=0.0)

    # counts are defined on no data (zeros); their fractions are not (NaN, `_empty`)
    return (lambda confmat: confmat) if how == "none" else _empty.guard(name, no_samples, value)


def no_samples(confmat: torch.Tensor) -> bool:
    """A confusion matrix (``(2, 2)``, ``(C, C)`` or ``(L, 2, 2)``) of a stream in which no entry counted."""
    return not bool(confmat.any())


@factory
@documented(returns="float64 0-d tensor (``(N,)`` for ``multidim_average='samplewise'``).", inputs='binary')
def binary_confusion_matrix(*, threshold: float = 0.5, normalize: Optional[Normalize] = None,
                            ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``[[tn, fp], [fn, tp]]`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_confusion_matrix()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor([[0, 1],
                [1, 1]])
    """
    name = "binary_confusion_matrix"
    return confmat_member(name, "binary", 1, _normalizer(name, normalize), higher_is_better=None, bounds=(0, None), threshold=threshold,
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_confusion_matrix(*, num_classes: int, normalize: Optional[Normalize] = None,
                                ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``(C, C)`` counts of (target, argmax prediction) pairs.

    Example::

        >>> fmetrics.multiclass_confusion_matrix(num_classes=3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor([[1, 1, 0],
                [0, 0, 0],
                [0, 0, 1]])
    """
    name = "multiclass_confusion_matrix"
    return confmat_member(name, "multiclass", num_classes, _normalizer(name, normalize), higher_is_better=None, bounds=(0, None),
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_confusion_matrix(*, num_labels: int, threshold: float = 0.5, normalize: Optional[Normalize] = None,
                                ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """One ``[[tn, fp], [fn, tp]]`` per label: ``(L, 2, 2)``.

    Example::

        >>> m = fmetrics.multilabel_confusion_matrix(num_labels=2)
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor([[[0, 0],
                 [0, 2]],
        <BLANKLINE>
                [[0, 1],
                 [1, 0]]])
    """
    name = "multilabel_confusion_matrix"
    return confmat_member(name, "multilabel", num_labels, _normalizer(name, normalize), higher_is_better=None, bounds=(0, None), threshold=threshold,
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def confusion_matrix(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
                     num_labels: Optional[int] = None, normalize: Optional[Normalize] = None,
                     ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade over the ``*_confusion_matrix`` factories (torchmetrics' arguments).

    Example::

        >>> m = fmetrics.confusion_matrix(task="multiclass", num_classes=3)
        >>> m(torch.tensor([2, 1, 0, 1, 2, 0]), torch.tensor([2, 0, 0, 1, 1, 0]))  # scikit-learn's confusion_matrix (rows: target)
        tensor([[2, 1, 0],
                [0, 1, 1],
                [0, 0, 1]])
    """
    task = check_task("confusion_matrix", task, num_classes, num_labels)
    if task == "binary":
        return binary_confusion_matrix(threshold=threshold, normalize=normalize, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_confusion_matrix(num_classes=num_classes, normalize=normalize, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_confusion_matrix(num_labels=num_labels, threshold=threshold, normalize=normalize, ignore_index=ignore_index, validate_args=validate_args)
