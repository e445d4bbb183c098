"""Calibration error: the gap between confidence and accuracy over equal-width confidence bins.

With ``n_bins`` bins over [0, 1] (a confidence of exactly 1 gets a bin of
its own, as in torchmetrics), ``acc_b`` and ``conf_b`` the mean accuracy and
confidence in bin ``b`` and ``p_b`` its share of the samples:

* ``"l1"``  (expected calibration error) -- ``sum_b p_b |acc_b - conf_b|``
* ``"l2"``  (root mean square)            -- ``sqrt(sum_b p_b (acc_b - conf_b)^2)``
* ``"max"`` (maximum calibration error)   -- ``max_b |acc_b - conf_b|``

Binary: the confidence is the positive-class probability and the accuracy
the 0/1 target; multiclass: the top probability and whether its class is the
target. The state is three sums per bin, so memory is O(n_bins).
"""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification._docs import documented
from fmetrics.classification.curves._scores import _as_scores, _if_logits
from fmetrics.classification.curves.roc import check_task
from fmetrics.classification.stat_scores import counting
from fmetrics.metric import Metric
from fmetrics.family import Family
from fmetrics.recipe import factory

__all__ = ["binary_calibration_error", "multiclass_calibration_error", "calibration_error"]

NORMS = ("l1", "l2", "max")
Norm = Literal["l1", "l2", "max"]


class CalibrationState(NamedTuple):
    count: torch.Tensor  # int64 (n_bins + 1,)
    confidence: torch.Tensor  # float64 (n_bins + 1,): sum of confidences per bin
    accuracy: torch.Tensor  # float64 (n_bins + 1,): sum of accuracies per bin
    invalid: validation.Invalid  # deferred record of entries that broke the value rule


def _make(name: str, task: str, num: int, n_bins, norm, ignore_index, validate_args) -> Metric:
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise validation.fail(name, "n_bins", "an integer >= 1", repr(n_bins))
    validation.check_policy(name, "norm", norm, NORMS)
    _format.check_ignore_index(name, ignore_index)
    if task == "multiclass":
        _format.check_num(name, "num_classes", num)
    num_ = num if task == "multiclass" else 2

    def init():
        zeros = torch.zeros(n_bins + 1, dtype=torch.float64)
        return CalibrationState(torch.zeros(n_bins + 1, dtype=torch.int64), zeros, zeros.clone(),
                                validation.invalid_init())

    def update(state, preds, target):
        count = counting(validate_args, (preds, target))
        preds = preds.detach() if isinstance(preds, torch.Tensor) else preds  # the state holds no graph
        if task == "binary":
            f = _format.binary_inputs(name, preds, target, ignore_index, validate=count)
            keep = f.keep.reshape(-1)
            conf = _if_logits(_as_scores(f.preds).reshape(-1), keep, torch.sigmoid)
            acc = f.target.reshape(-1)
        else:
            f = _format.multiclass_inputs(name, preds, target, num, ignore_index, validate=count)
            if not f.preds.is_floating_point():
                raise validation.fail(name, "preds", "float scores of shape (N, C, ...)", tuple(preds.shape))
            keep = f.keep.reshape(-1)
            probs = _if_logits(f.preds.movedim(1, -1).reshape(-1, num).float(), keep[:, None], lambda x: x.softmax(1))
            conf, top = probs.max(1)
            acc = top == f.target.reshape(-1)
        edges = torch.linspace(0, 1, n_bins + 1, dtype=conf.dtype, device=conf.device)
        bins = (torch.bucketize(conf, edges, right=True) - 1).clamp(0, n_bins)
        w = keep.double()
        return CalibrationState(
            state.count + torch.zeros_like(state.count).scatter_add(0, bins, keep.long()),
            state.confidence + torch.zeros_like(state.confidence).scatter_add(0, bins, conf.double() * w),
            state.accuracy + torch.zeros_like(state.accuracy).scatter_add(0, bins, acc.double() * w),
            _format.flag(state.invalid, f),
        )

    def finalize(state):
        if validate_args:
            _format.report(name, state.invalid, num_)
        count = state.count.double()
        gap = torch.nan_to_num(state.accuracy / count) - torch.nan_to_num(state.confidence / count)
        share = count / count.sum()
        if norm == "l1":
            return torch.sum(gap.abs() * share)
        if norm == "max":
            return gap.abs().max()
        return torch.sqrt(torch.sum(gap ** 2 * share).clamp(min=0))

    def merge(a, b):
        return CalibrationState(a.count + b.count, a.confidence + b.confidence, a.accuracy + b.accuracy, validation.invalid_merge(a.invalid, b.invalid))

    tags = CalibrationState(count="sum", confidence="sum", accuracy="sum", invalid=None)
    check = _format.checker(name, task, num_, ignore_index) if validate_args else None
    fam = Family(name="calibration", key=(task, num, n_bins, ignore_index, validate_args), init=init, update=update, reductions=tags,
                 merge=merge, check=check)
    return fam.metric(name, _empty.guard(name, lambda state: not bool(state.count.any()), finalize), is_differentiable=False, higher_is_better=False, bounds=(0.0, 1.0))


_RETURNS = "float64 0-d tensor in [0, 1] (NaN when no sample was kept)."


@factory
@documented(returns=_RETURNS, inputs="scores-binary")
def binary_calibration_error(*, n_bins: int = 15, norm: Norm = "l1", ignore_index: Optional[int] = None,
                             validate_args: bool = True) -> Metric:
    """Calibration error of positive-class probabilities (logits get a sigmoid), see the module docstring.

    Example::

        >>> # by hand: bin [0, .5) holds .25, .25 (accuracy 1/2), bin [.5, 1) .75, .75 (accuracy 1):
        >>> # 0.5 * |0.5 - 0.25| + 0.5 * |1 - 0.75|

        >>> fmetrics.binary_calibration_error(n_bins=2)(torch.tensor([0.25, 0.25, 0.75, 0.75]),
        ...                                             torch.tensor([0, 1, 1, 1]))
        tensor(0.2500, dtype=torch.float64)
    """
    return _make("binary_calibration_error", "binary", 1, n_bins, norm, ignore_index, validate_args)


@factory
@documented(returns=_RETURNS, inputs="scores-multiclass")
def multiclass_calibration_error(*, num_classes: int, n_bins: int = 15, norm: Norm = "l1",
                                 ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Calibration error of the top-class probability (logits get a softmax), see the module docstring.

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.2, 0.3, 0.5], [0.9, 0.05, 0.05]])
        >>> # by hand: confidences .7, .6, .5, .9, correct 1, 0, 1, 0, all in bin [.5, 1]: |0.5 - 0.675|
        >>> fmetrics.multiclass_calibration_error(num_classes=3, n_bins=2)(preds, torch.tensor([0, 2, 2, 1]))
        tensor(0.1750, dtype=torch.float64)
    """
    return _make("multiclass_calibration_error", "multiclass", num_classes, n_bins, norm, ignore_index,
                 validate_args)


@factory
@documented(returns="that of the task's factory.", inputs="facade", task="'binary' or 'multiclass': which factory "
            "to build; the other arguments go to it.")
def calibration_error(*, task: Literal["binary", "multiclass"], n_bins: int = 15, norm: Norm = "l1",
                      num_classes: Optional[int] = None, ignore_index: Optional[int] = None,
                      validate_args: bool = True) -> Metric:
    """Task facade (``"binary"`` or ``"multiclass"``) for the calibration error.

    Example::

        >>> # by hand, with the data of binary_calibration_error: max(0.25, 0.25)
        >>> m = fmetrics.calibration_error(task="binary", n_bins=2, norm="max")
        >>> m(torch.tensor([0.25, 0.25, 0.75, 0.75]), torch.tensor([0, 1, 1, 1]))
        tensor(0.2500, dtype=torch.float64)
    """
    task = check_task("calibration_error", task, ("binary", "multiclass"))
    if task == "binary":
        return binary_calibration_error(n_bins=n_bins, norm=norm, ignore_index=ignore_index, validate_args=validate_args)
    return multiclass_calibration_error(num_classes=num_classes, n_bins=n_bins, norm=norm, ignore_index=ignore_index, validate_args=validate_args)
