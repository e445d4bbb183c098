"""Exact match: the fraction of samples whose every prediction is right.

Multiclass inputs ``(N, ...)``: a sample matches when all its positions are
predicted right. Multilabel ``(N, L, ...)``: each (sample, position) matches
when all ``L`` labels are right. Entries equal to ``ignore_index`` count as
right. ``multidim_average="samplewise"`` gives one value per sample.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from fmetrics.classification import _format
from fmetrics.classification.stat_scores import positive, task_dispatch
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks, merge_fields
from fmetrics.recipe import factory

__all__ = ["multiclass_exact_match", "multilabel_exact_match", "exact_match"]


class ExactMatchState(NamedTuple):
    counts: object  # int64 (2,): matches, total; samplewise: tuple of (n, 2) chunks
    invalid: torch.Tensor  # int64 (3,): dropped entries per rule of _format.RULES


def _exact_match(name, task, num, threshold, multidim_average, ignore_index, validate_args) -> Metric:
    num = _format.check_num(name, "num_classes" if task == "multiclass" else "num_labels", num)
    samplewise = _format.check_multidim_average(name, multidim_average) == "samplewise"
    ignore_index = _format.check_ignore_index(name, ignore_index)
    threshold = _format.check_threshold(name, threshold) if task == "multilabel" else None
    validate = bool(validate_args)

    def init():
        counts = () if samplewise else torch.zeros(2, dtype=torch.int64)
        return ExactMatchState(counts, torch.zeros(3, dtype=torch.int64))

    def update(state, preds, target):
        if task == "multiclass":
            f = _format.multiclass_inputs(name, preds, target, num, ignore_index, samplewise, validate, top_k=1)
            right = (f.preds == f.target) | ~f.keep  # (N, M)
            per_sample = torch.stack([right.all(1).long(), torch.ones_like(right[:, 0], dtype=torch.int64)], -1)
        else:
            f = _format.multilabel_inputs(name, preds, target, num, ignore_index, samplewise, validate)
            right = ((positive(f.preds, threshold).long() == f.target) | ~f.keep).all(1)  # (N, M)
            ones = torch.ones_like(right, dtype=torch.int64)
            per_sample = torch.stack([right.sum(1, dtype=torch.int64), ones.sum(1)], -1)
        if samplewise:
            counts = state.counts + (per_sample,)
        else:
            counts = state.counts + per_sample.sum(0)
        return ExactMatchState(counts, state.invalid + f.invalid)

    def finalize(state):
        _format.report(name, state.invalid)
        counts = state.counts
        if samplewise:
            counts = cat_chunks(counts, torch.zeros(0, 2, dtype=torch.int64, device=state.invalid.device))
        counts = counts.to(accum_dtype(counts.device))
        num_, den = counts[..., 0], counts[..., 1]
        return torch.where(den != 0, num_ / den.clamp_min(1), 0.0)

    tags = ExactMatchState(counts="cat" if samplewise else "sum", invalid="sum")
    key = ("exact_match", task, num, threshold, "samplewise" if samplewise else "global", ignore_index, validate)
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=key, reductions=tags)


@factory
def multiclass_exact_match(*, num_classes: int, multidim_average: str = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Fraction of samples ``(N, ...)`` whose every position is predicted right.

    Example::

        >>> m = fmetrics.multiclass_exact_match(3)
        >>> m(torch.tensor([[0, 1], [2, 2]]), torch.tensor([[0, 1], [2, 0]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return _exact_match("multiclass_exact_match", "multiclass", num_classes, None, multidim_average,
                        ignore_index, validate_args)


@factory
def multilabel_exact_match(*, num_labels: int, threshold: float = 0.5, multidim_average: str = "global",
                           ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Fraction of samples whose every label is predicted right (subset accuracy).

    Example::

        >>> m = fmetrics.multilabel_exact_match(2)
        >>> m(torch.tensor([[0.9, 0.1], [0.7, 0.8]]), torch.tensor([[1, 0], [1, 0]]))
        tensor(0.5000, dtype=torch.float64)
    """
    return _exact_match("multilabel_exact_match", "multilabel", num_labels, threshold, multidim_average,
                        ignore_index, validate_args)


@factory
def exact_match(*, task: str, num_classes: Optional[int] = None, num_labels: Optional[int] = None,
                threshold: float = 0.5, multidim_average: str = "global", ignore_index: Optional[int] = None,
                validate_args: bool = True) -> Metric:
    """Task facade (``"multiclass" | "multilabel"``) over the ``*_exact_match`` factories."""
    return task_dispatch(
        "exact_match", task, num_classes, num_labels, None,
        lambda n: multiclass_exact_match(num_classes=n, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
        lambda n: multilabel_exact_match(num_labels=n, threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
    )
