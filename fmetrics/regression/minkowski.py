"""`minkowski_distance`: ``(sum |preds - target|^p)^(1/p)``."""
from __future__ import annotations

from typing import NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.state import accum_dtype, merge_fields
from fmetrics.recipe import factory


class MinkowskiState(NamedTuple):
    total: torch.Tensor  # float64 (): sum |p - t|^p


@factory
def minkowski_distance(*, p: float) -> Metric:
    """Minkowski distance ``(sum_i |x_i - y_i|^p)^(1/p)`` over every element, ``p >= 1``.

    Example::

        >>> fmetrics.minkowski_distance(p=3)(torch.tensor([1., 2., 3., 4.]), torch.tensor([2., 3., 4., 5.]))
        tensor(1.5874, dtype=torch.float64)
    """
    name = "minkowski_distance"
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not p >= 1:
        raise validation.fail(name, "p", "a number >= 1", repr(p))
    p = float(p)

    def init():
        return MinkowskiState(torch.zeros((), dtype=accum_dtype()))

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        d = (_inputs.as_acc(preds, state.total) - _inputs.as_acc(target, state.total)).abs()
        return MinkowskiState(state.total + (d ** p).sum())

    def finalize(state):
        return state.total ** (1.0 / p)

    tags = MinkowskiState(total="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("regression.minkowski", p), reductions=tags)
