"""`sum`: the running sum of all values."""
from __future__ import annotations

from typing import Literal, NamedTuple, Union

import torch

from fmetrics.aggregation import _nan
from fmetrics.metric import Metric
from fmetrics.state import merge_fields
from fmetrics.recipe import factory


class SumState(NamedTuple):
    total: torch.Tensor  # float64 sum of kept values
    nan_count: torch.Tensor  # int64, NaNs seen


@factory
def sum(*, nan_strategy: Union[Literal["error", "warn", "ignore", "disable"], float] = "warn") -> Metric:  # noqa: A001 - torchmetrics' name
    """Sum of every element seen: ``sum_i x_i`` (float64; 0 on no data, the empty sum).

    Args:
      nan_strategy: NaN values: ``"warn"`` (default, as torchmetrics: left
        out, `finalize` warns with the count), ``"error"`` (left out, `finalize`
        raises), ``"ignore"`` (left out silently), ``"disable"`` (no check: they
        propagate), or a float that replaces them.

    Inputs:
      ``update(state, value)``: a tensor of any shape, or a Python number.

    Returns:
      float64 0-d tensor.

    Example::

        >>> fmetrics.sum()(torch.tensor([1., 2., 3.]))
        tensor(6., dtype=torch.float64)
    """
    name = "sum"
    _nan.check(name, nan_strategy)

    def init():
        return SumState(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64))

    def update(state, value):
        value = _nan.as_tensor(name, "value", value)
        if nan_strategy == "disable":
            return SumState(state.total + _nan.total(value), state.nan_count)
        clean = _nan.unscreened(value, _nan.total)
        if clean is not None:
            return SumState(state.total + clean, state.nan_count)
        nans = _nan.nan_count(value)
        if _nan.drops(nan_strategy):
            return SumState(state.total + _nan.total(value, skip_nan=True), state.nan_count + nans)
        return SumState(state.total + _nan.total(_nan.replace(nan_strategy, value)), state.nan_count + nans)

    def finalize(state):
        _nan.report(name, nan_strategy, state.nan_count)
        return state.total

    tags = SumState(total="sum", nan_count="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize,
                  name=name, reductions=tags, higher_is_better=None, is_differentiable=False)
