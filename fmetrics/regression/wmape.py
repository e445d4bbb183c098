"""`weighted_mean_absolute_percentage_error`: ``sum |preds - target| / sum |target|``."""
from __future__ import annotations

from typing import NamedTuple

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.regression.mape import EPSILON
from fmetrics.state import accum_dtype, merge_fields
from fmetrics.recipe import factory


class WMAPEState(NamedTuple):
    abs_error: torch.Tensor  # float64 (D,): sum |p - t|
    scale: torch.Tensor  # float64 (D,): sum |t|


@factory
def weighted_mean_absolute_percentage_error(*, num_outputs: int = 1) -> Metric:
    """WMAPE ``sum_i |p_i - t_i| / max(sum_i |t_i|, 1.17e-6)``.

    Example::

        >>> m = fmetrics.weighted_mean_absolute_percentage_error()
        >>> m(torch.tensor([1., 2., 3.]), torch.tensor([1., 1., 1.]))
        tensor(1., dtype=torch.float64)
    """
    name = "weighted_mean_absolute_percentage_error"
    _inputs.check_num_outputs(name, num_outputs)

    def init():
        zero = torch.zeros(num_outputs, dtype=accum_dtype())
        return WMAPEState(zero, zero.clone())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=True)
        t = _inputs.columns(name, target, num_outputs, flatten=True)
        abs_error = _inputs.difference(p, t, state.scale).abs_().sum(0)
        return WMAPEState(state.abs_error + abs_error, state.scale + t.abs().sum(0, dtype=state.scale.dtype))

    def finalize(state):
        value = state.abs_error / torch.clamp(state.scale, min=EPSILON)
        return value[0] if num_outputs == 1 else value

    tags = WMAPEState(abs_error="sum", scale="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("regression.wmape", num_outputs), reductions=tags)
