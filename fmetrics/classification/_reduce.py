"""Averaging of per-class scores, shared by the stat-score family (torchmetrics' rules).

``counts`` hold float64 ``tp, fp, tn, fn`` with the class axis last (a leading
sample axis for ``multidim_average="samplewise"``). ``average``:

* ``"binary"``   -- the single class: ``score(counts)[..., 0]``.
* ``"micro"``    -- ``score`` of the counts summed over classes.
* ``"macro"``    -- mean of per-class scores; for multiclass, classes that
  never occur (``tp + fp + fn == 0``, or ``tp + fn == 0`` with ``top_k > 1``
  where torchmetrics uses that rule) are left out of the mean.
* ``"weighted"`` -- per-class scores weighted by support ``tp + fn``.
* ``"none"``     -- the per-class scores.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from fmetrics import validation

AVERAGES = ("micro", "macro", "weighted", "none")


class Counts(NamedTuple):
    tp: torch.Tensor
    fp: torch.Tensor
    tn: torch.Tensor
    fn: torch.Tensor


def check_average(name: str, average) -> str:
    """``None`` means ``"none"``, as in torchmetrics."""
    return validation.check_policy(name, "average", "none" if average is None else average, AVERAGES)


def check_zero_division(name: str, zero_division) -> float:
    if isinstance(zero_division, bool) or zero_division not in (0, 1):
        raise validation.fail(name, "zero_division", "0 or 1", repr(zero_division))
    return float(zero_division)


def divide(num: torch.Tensor, den: torch.Tensor, zero_division: float = 0.0) -> torch.Tensor:
    """``num / den`` with ``zero_division`` where ``den == 0``."""
    return torch.where(den != 0, num / torch.where(den != 0, den, 1), zero_division)


def average(counts: Counts, score: Callable[[Counts], torch.Tensor], how: str, *, multilabel: bool,
            support_rule: bool = False) -> torch.Tensor:
    """Applies ``how`` (see the module docstring) to ``score`` over ``counts``.

    ``support_rule``: a multiclass macro average drops classes with no support
    (``tp + fn == 0``) instead of classes that never occur.
    """
    if how == "binary":
        return score(counts)[..., 0]
    if how == "micro":
        return score(Counts(*(x.sum(-1) for x in counts)))
    values = score(counts)
    if how == "none":
        return values
    tp, fp, _, fn = counts
    if how == "weighted":
        weights = tp + fn
    elif multilabel:
        weights = torch.ones_like(values)
    else:
        weights = ((tp + fn) > 0 if support_rule else (tp + fp + fn) > 0).to(values.dtype)
    return divide((weights * values).sum(-1), weights.sum(-1))
