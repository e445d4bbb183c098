"""Confusion matrices: ``confmat[target, pred]`` counts, optionally normalized.

Binary ``(2, 2)`` and multilabel ``(L, 2, 2)`` matrices are ``[[tn, fp], [fn, tp]]``
read from the stat-scores state (so they share it with accuracy, F1, ...);
the multiclass ``(C, C)`` matrix has its own state, shared with
`multiclass_matthews_corrcoef` and `multiclass_cohen_kappa`. ``normalize``:
``"true"`` (rows sum to 1), ``"pred"`` (columns), ``"all"``, or ``None``;
``0 / 0`` becomes 0.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _format
from fmetrics.classification._reduce import Counts
from fmetrics.classification.stat_scores import counts_metric, task_dispatch
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, merge_fields
from fmetrics.recipe import factory

__all__ = ["binary_confusion_matrix", "multiclass_confusion_matrix", "multilabel_confusion_matrix",
           "confusion_matrix"]

NORMALIZE = ("true", "pred", "all", "none")


class ConfusionMatrixState(NamedTuple):
    confmat: torch.Tensor  # int64 (C, C): rows are targets, columns predictions
    invalid: torch.Tensor  # int64 (3,): dropped entries per rule of _format.RULES


def _two_by_two(c: Counts) -> torch.Tensor:
    """``(..., L)`` counts -> ``(..., L, 2, 2)`` ``[[tn, fp], [fn, tp]]``."""
    return torch.stack([torch.stack([c.tn, c.fp], -1), torch.stack([c.fn, c.tp], -1)], -2)


def confmat_metric(name: str, task: str, num: int, finalize_confmat: Callable[[torch.Tensor], object], *,
                   threshold: float = 0.5, ignore_index: Optional[int] = None, validate_args: bool = True
                   ) -> Metric:
    """A `Metric` whose value is ``finalize_confmat(confmat)`` of the int64 confusion matrix.

    ``confmat``: binary ``(2, 2)``, multiclass ``(C, C)``, multilabel ``(L, 2, 2)``.
    """
    if task == "binary":
        return counts_metric(name, task, 1, lambda c: finalize_confmat(_two_by_two(c)[0]), threshold=threshold,
                             ignore_index=ignore_index, validate_args=validate_args)
    if task == "multilabel":
        return counts_metric(name, task, num, lambda c: finalize_confmat(_two_by_two(c)), threshold=threshold,
                             ignore_index=ignore_index, validate_args=validate_args)
    num = _format.check_num(name, "num_classes", num)
    ignore_index = _format.check_ignore_index(name, ignore_index)
    validate = bool(validate_args)

    def init():
        return ConfusionMatrixState(torch.zeros(num, num, dtype=torch.int64), torch.zeros(3, dtype=torch.int64))

    def update(state, preds, target):
        f = _format.multiclass_inputs(name, preds, target, num, ignore_index, validate=validate, top_k=1)
        index = (f.target * num + f.preds).reshape(-1)
        bins = torch.zeros(num * num, dtype=torch.int64, device=index.device)
        bins = bins.scatter_add(0, index, f.keep.reshape(-1).long())
        return ConfusionMatrixState(state.confmat + bins.reshape(num, num), state.invalid + f.invalid)

    def finalize(state):
        _format.report(name, state.invalid)
        return finalize_confmat(state.confmat)

    tags = ConfusionMatrixState(confmat="sum", invalid="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("confusion_matrix", num, ignore_index, validate), reductions=tags)


def _normalizer(name: str, normalize):
    how = validation.check_policy(name, "normalize", "none" if normalize is None else normalize, NORMALIZE)

    def value(confmat: torch.Tensor):
        if how == "none":
            return confmat
        confmat = confmat.to(accum_dtype(confmat.device))
        dims = {"true": (-1,), "pred": (-2,), "all": (-2, -1)}[how]
        return torch.nan_to_num(confmat / confmat.sum(dims, keepdim=True), nan=0.0)

    return value


@factory
def binary_confusion_matrix(*, threshold: float = 0.5, normalize: Optional[str] = None,
                            ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``[[tn, fp], [fn, tp]]`` of thresholded binary predictions.

    Example::

        >>> fmetrics.binary_confusion_matrix()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor([[0, 1],
                [1, 1]])
    """
    name = "binary_confusion_matrix"
    return confmat_metric(name, "binary", 1, _normalizer(name, normalize), threshold=threshold,
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
def multiclass_confusion_matrix(*, num_classes: int, normalize: Optional[str] = None,
                                ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``(C, C)`` counts of (target, argmax prediction) pairs.

    Example::

        >>> fmetrics.multiclass_confusion_matrix(3)(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor([[1, 1, 0],
                [0, 0, 0],
                [0, 0, 1]])
    """
    name = "multiclass_confusion_matrix"
    return confmat_metric(name, "multiclass", num_classes, _normalizer(name, normalize),
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
def multilabel_confusion_matrix(*, num_labels: int, threshold: float = 0.5, normalize: Optional[str] = None,
                                ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """One ``[[tn, fp], [fn, tp]]`` per label: ``(L, 2, 2)``.

    Example::

        >>> m = fmetrics.multilabel_confusion_matrix(2)
        >>> m(torch.tensor([[0.9, 0.8], [0.7, 0.2]]), torch.tensor([[1, 0], [1, 1]]))
        tensor([[[0, 0],
                 [0, 2]],
        <BLANKLINE>
                [[0, 1],
                 [1, 0]]])
    """
    name = "multilabel_confusion_matrix"
    return confmat_metric(name, "multilabel", num_labels, _normalizer(name, normalize), threshold=threshold,
                          ignore_index=ignore_index, validate_args=validate_args)


@factory
def confusion_matrix(*, task: str, threshold: float = 0.5, num_classes: Optional[int] = None,
                     num_labels: Optional[int] = None, normalize: Optional[str] = None,
                     ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade over the ``*_confusion_matrix`` factories (torchmetrics' arguments)."""
    return task_dispatch(
        "confusion_matrix", task, num_classes, num_labels,
        lambda: binary_confusion_matrix(threshold=threshold, normalize=normalize, ignore_index=ignore_index, validate_args=validate_args),
        lambda n: multiclass_confusion_matrix(num_classes=n, normalize=normalize, ignore_index=ignore_index, validate_args=validate_args),
        lambda n: multilabel_confusion_matrix(num_labels=n, threshold=threshold, normalize=normalize, ignore_index=ignore_index, validate_args=validate_args),
    )
