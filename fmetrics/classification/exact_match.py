"""Exact match: the fraction of samples whose every prediction is right.

Multiclass inputs ``(N, ...)``: a sample matches when all its positions are
predicted right. Multilabel ``(N, L, ...)``: each (sample, position) matches
when all ``L`` labels are right. Entries equal to ``ignore_index`` count as
right. ``multidim_average="samplewise"`` gives one value per sample.
"""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import MultidimAverage, Task, check_task, positive, value_rule
from fmetrics.metric import Metric
from fmetrics.family import Family
from fmetrics.state import accum_dtype, cat_chunks
from fmetrics.recipe import factory

__all__ = ["multiclass_exact_match", "multilabel_exact_match", "exact_match"]


class ExactMatchState(NamedTuple):
    counts: object  # int64 (2,): matches, total; samplewise: tuple of (n, 2) chunks
    invalid: validation.Invalid  # deferred record of entries that broke the value rule


def _exact_match(name, task, num, threshold, multidim_average, ignore_index, validate_args) -> Metric:
    num = _format.check_num(name, "num_classes" if task == "multiclass" else "num_labels", num)
    samplewise = _format.check_multidim_average(name, multidim_average) == "samplewise"
    ignore_index = _format.check_ignore_index(name, ignore_index)
    threshold = _format.check_threshold(name, threshold) if task == "multilabel" else None
    validate = bool(validate_args)

    def init():
        counts = () if samplewise else torch.zeros(2, dtype=torch.int64)
        return ExactMatchState(counts, validation.invalid_init())

    def update(state, preds, target):
        count, raise_nan = value_rule(validate, (preds, target))
        if task == "multiclass":
            f = _format.multiclass_inputs(name, preds, target, num, ignore_index, samplewise, count, top_k=1,
                                          raise_nan=raise_nan)
            right = (f.preds == f.target) | ~f.keep  # (N, M)
            per_sample = torch.stack([right.all(1).long(), torch.ones_like(right[:, 0], dtype=torch.int64)], -1)
        else:
            f = _format.multilabel_inputs(name, preds, target, num, ignore_index, samplewise, count)
            right = ((positive(f.preds, threshold).long() == f.target) | ~f.keep).all(1)  # (N, M)
            ones = torch.ones_like(right, dtype=torch.int64)
            per_sample = torch.stack([right.sum(1, dtype=torch.int64), ones.sum(1)], -1)
        if samplewise:
            counts = state.counts + (per_sample,)
        else:
            counts = state.counts + per_sample.sum(0)
        return ExactMatchState(counts, _format.flag(state.invalid, f))

    def merge(a, b):
        counts = tuple(a.counts) + tuple(b.counts) if samplewise else a.counts + b.counts
        return ExactMatchState(counts, validation.invalid_merge(a.invalid, b.invalid))

    def finalize(state):
        _format.report(name, state.invalid, num if task == "multiclass" else 2)
        counts = state.counts
        if samplewise:
            counts = cat_chunks(counts, torch.zeros(0, 2, dtype=torch.int64, device=state.invalid.count.device))
        counts = counts.to(accum_dtype(counts.device))
        num_, den = counts[..., 0], counts[..., 1]
        if not samplewise and not bool(den):  # no samples: undefined (`_empty`); samplewise: an empty tensor
            _empty.warn(name)
            return torch.full_like(den, float("nan"))
        return torch.where(den != 0, num_ / den.clamp_min(1), 0.0)

    tags = ExactMatchState(counts="cat" if samplewise else "sum", invalid=None)
    key = (task, num, threshold, "samplewise" if samplewise else "global", ignore_index, validate)
    fam = Family(name="exact_match", key=key, init=init, update=update, reductions=tags, merge=merge,
                 check=_format.checker(name, task, num, ignore_index, nan_in_update=True) if validate else None)
    return fam.metric(name, finalize, higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))


@factory
@documented(returns="float64: 0-d, or one value per class (``(C,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multiclass')
def multiclass_exact_match(*, num_classes: int, multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Fraction of samples ``(N, ...)`` whose every position is predicted right.

    Example::

        >>> m = fmetrics.multiclass_exact_match(num_classes=3)
        >>> m(torch.tensor([[0, 1], [2, 2]]), torch.tensor([[0, 1], [2, 0]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return _exact_match("multiclass_exact_match", "multiclass", num_classes, None, multidim_average,
                        ignore_index, validate_args)


@factory
@documented(returns="float64: 0-d, or one value per label (``(L,)``) for ``average='none'`` / ``None``; a leading ``N`` axis for ``multidim_average='samplewise'``.", inputs='multilabel')
def multilabel_exact_match(*, num_labels: int, threshold: float = 0.5, multidim_average: MultidimAverage = "global",
                           ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Fraction of samples whose every label is predicted right (subset accuracy).

    Example::

        >>> m = fmetrics.multilabel_exact_match(num_labels=2)
        >>> m(torch.tensor([[0.9, 0.1], [0.7, 0.8]]), torch.tensor([[1, 0], [1, 0]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return _exact_match("multilabel_exact_match", "multilabel", num_labels, threshold, multidim_average,
                        ignore_index, validate_args)


@factory
@documented(returns="that of the task's factory.", inputs='facade')
def exact_match(*, task: Literal["multiclass", "multilabel"], num_classes: Optional[int] = None, num_labels: Optional[int] = None,
                threshold: float = 0.5, multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                validate_args: bool = True) -> Metric:
    """Task facade (``"multiclass" | "multilabel"``) over the ``*_exact_match`` factories.

    Example::

        >>> m = fmetrics.exact_match(task="multilabel", num_labels=3)
        >>> m(torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]]),
        ...   torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]]))  # scikit-learn's accuracy_score (subset accuracy)
        tensor(0.5000, dtype=torch.float64)
    """
    task = check_task("exact_match", task, num_classes, num_labels, ("multiclass", "multilabel"))
    if task == "multiclass":
        return multiclass_exact_match(num_classes=num_classes, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_exact_match(num_labels=num_labels, threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
