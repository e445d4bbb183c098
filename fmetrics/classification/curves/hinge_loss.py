"""Hinge loss: the mean of ``max(0, 1 - margin)`` (squared with ``squared=True``).

* binary -- ``margin = p`` for a positive, ``-p`` for a negative, where ``p`` is
  the probability (logits get a sigmoid, as in torchmetrics);
* multiclass ``"crammer-singer"`` -- ``margin = p_y - max_{j != y} p_j``;
* multiclass ``"one-vs-all"`` -- per class ``c``, ``margin = +-p_c``: a loss per class.
"""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification._docs import documented
from fmetrics.classification.curves._scores import _as_scores, _if_logits, softmax
from fmetrics.classification.curves.roc import check_task
from fmetrics.classification.stat_scores import counting
from fmetrics.metric import Metric
from fmetrics.family import Family
from fmetrics.recipe import factory

__all__ = ["binary_hinge_loss", "multiclass_hinge_loss", "hinge_loss"]

MODES = ("crammer-singer", "one-vs-all")
Mode = Literal["crammer-singer", "one-vs-all"]


class HingeState(NamedTuple):
    total: torch.Tensor  # float64: sum of the losses (per class for one-vs-all)
    count: torch.Tensor  # int64: kept samples
    invalid: validation.Invalid  # deferred record of entries that broke the value rule


def _make(name, task, num, squared, mode, ignore_index, validate_args) -> Metric:
    if not isinstance(squared, bool):
        raise validation.fail(name, "squared", "a bool", repr(squared))
    _format.check_ignore_index(name, ignore_index)
    num_ = num if task == "multiclass" else 2
    if task == "multiclass":
        _format.check_num(name, "num_classes", num)
        validation.check_policy(name, "multiclass_mode", mode, MODES)
    shape = (num,) if mode == "one-vs-all" else ()

    def init():
        return HingeState(torch.zeros(shape, dtype=torch.float64), torch.zeros((), dtype=torch.int64),
                          validation.invalid_init())

    def update(state, preds, target):
        count = counting(validate_args, (preds, target))
        preds = preds.detach() if isinstance(preds, torch.Tensor) else preds  # the state holds no graph
        if task == "binary":
            f = _format.binary_inputs(name, preds, target, ignore_index, validate=count)
            keep = f.keep.reshape(-1)
            p = _if_logits(_as_scores(f.preds).reshape(-1), keep, torch.sigmoid)
            margin = torch.where(f.target.reshape(-1) == 1, p, -p)
        else:
            f = _format.multiclass_inputs(name, preds, target, num, ignore_index, validate=count)
            if not f.preds.is_floating_point():
                raise validation.fail(name, "preds", "float scores of shape (N, C, ...)", tuple(preds.shape))
            keep = f.keep.reshape(-1)
            p = _if_logits(f.preds.movedim(1, -1).reshape(-1, num).float(), keep[:, None], softmax)
            onehot = f.target.reshape(-1, 1) == torch.arange(num, device=p.device)
            if mode == "one-vs-all":
                margin = torch.where(onehot, p, -p)
                keep = keep[:, None]
            else:
                margin = (p * onehot).sum(1) - p.masked_fill(onehot, -torch.inf).amax(1)
        loss = (1 - margin.double()).clamp(min=0)
        loss = torch.where(keep, loss ** 2 if squared else loss, 0.0)
        return HingeState(state.total + loss.sum(0), state.count + validation.count(keep.reshape(-1)),
                          _format.flag(state.invalid, f))

    def finalize(state):
        if validate_args:
            _format.report(name, state.invalid, num_)
        return state.total / state.count

    def merge(a, b):
        return HingeState(a.total + b.total, a.count + b.count, validation.invalid_merge(a.invalid, b.invalid))

    tags = HingeState(total="sum", count="sum", invalid=None)
    check = _format.checker(name, task, num_, ignore_index) if validate_args else None
    fam = Family(name="hinge", key=(task, num, squared, mode, ignore_index, validate_args), init=init, update=update, reductions=tags,
                 merge=merge, check=check)
    return fam.metric(name, _empty.guard(name, lambda state: not bool(state.count.any()), finalize), is_differentiable=False, higher_is_better=False, bounds=(0.0, None))


@factory
@documented(returns="float64 0-d tensor (NaN when no sample was kept).", inputs="scores-binary")
def binary_hinge_loss(*, squared: bool = False, ignore_index: Optional[int] = None,
                      validate_args: bool = True) -> Metric:
    """Mean binary hinge loss over probabilities (see the module docstring).

    Example::

        >>> # by hand: margins -0.25 (a negative) and 0.75 (a positive): (1.25 + 0.25) / 2

        >>> fmetrics.binary_hinge_loss()(torch.tensor([0.25, 0.75]), torch.tensor([0, 1]))
        tensor(0.7500, dtype=torch.float64)
    """
    return _make("binary_hinge_loss", "binary", 1, squared, None, ignore_index, validate_args)


@factory
@documented(returns="float64: 0-d for 'crammer-singer', ``(C,)`` for 'one-vs-all' (NaN when no sample was kept).",
            inputs="scores-multiclass")
def multiclass_hinge_loss(*, num_classes: int, squared: bool = False, multiclass_mode: Mode = "crammer-singer",
                          ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Mean multiclass hinge loss: a scalar (Crammer-Singer) or one loss per class (one-vs-all).

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> # by hand: margins p_y - max_other = .5, -.3, .2, -.1; mean of 1 - margin = (.5 + 1.3 + .8 + 1.1) / 4
        >>> fmetrics.multiclass_hinge_loss(num_classes=3)(preds, torch.tensor([0, 2, 2, 1]))
        tensor(0.9250, dtype=torch.float64)
    """
    return _make("multiclass_hinge_loss", "multiclass", num_classes, squared, multiclass_mode, ignore_index,
                 validate_args)


@factory
@documented(returns="that of the task's factory.", inputs="facade", task="'binary' or 'multiclass': which factory "
            "to build; the other arguments go to it.")
def hinge_loss(*, task: Literal["binary", "multiclass"], num_classes: Optional[int] = None, squared: bool = False,
               multiclass_mode: Mode = "crammer-singer", ignore_index: Optional[int] = None,
               validate_args: bool = True) -> Metric:
    """Task facade (``"binary"`` or ``"multiclass"``) for the hinge loss.

    Example::

        >>> # by hand: squared losses 1.25^2 and 0.25^2, mean (1.5625 + 0.0625) / 2
        >>> fmetrics.hinge_loss(task="binary", squared=True)(torch.tensor([0.25, 0.75]), torch.tensor([0, 1]))
        tensor(0.8125, dtype=torch.float64)
    """
    task = check_task("hinge_loss", task, ("binary", "multiclass"))
    if task == "binary":
        return binary_hinge_loss(squared=squared, ignore_index=ignore_index, validate_args=validate_args)
    return multiclass_hinge_loss(num_classes=num_classes, squared=squared, multiclass_mode=multiclass_mode, ignore_index=ignore_index, validate_args=validate_args)
