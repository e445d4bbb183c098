"""`mean`: the weighted running mean."""
from __future__ import annotations

import warnings
from typing import Literal, NamedTuple, Union

import torch

from fmetrics import validation
from fmetrics.aggregation import _nan
from fmetrics.metric import Metric
from fmetrics.state import merge_fields
from fmetrics.recipe import factory


class MeanState(NamedTuple):
    weighted_sum: torch.Tensor  # float64, sum_i w_i x_i
    weight: torch.Tensor  # float64, sum_i w_i
    nan_count: torch.Tensor  # int64


@factory
def mean(*, nan_strategy: Union[Literal["error", "warn", "ignore", "disable"], float] = "warn") -> Metric:
    """Weighted mean ``sum_i w_i x_i / sum_i w_i`` over every element seen.

    A NaN in a value or its weight leaves both out (per ``nan_strategy``).
    With no weight seen the result is NaN, with a warning (docs/conventions.md).

    Args:
      nan_strategy: NaN values: ``"warn"`` (default, as torchmetrics: left
        out, `finalize` warns with the count), ``"error"`` (left out, `finalize`
        raises), ``"ignore"`` (left out silently), ``"disable"`` (no check: they
        propagate), or a float that replaces them.

    Inputs:
      ``update(state, value, weight=None)``: ``value`` a tensor of any shape
      or a number; ``weight`` (default 1) broadcasts to ``value``.

    Returns:
      float64 0-d tensor.

    Example::

        >>> fmetrics.mean()(torch.tensor([1., 3.]), torch.tensor([1., 3.]))
        tensor(2.5000, dtype=torch.float64)
    """
    name = "mean"
    _nan.check(name, nan_strategy)

    def init():
        zero = torch.zeros((), dtype=torch.float64)
        return MeanState(zero, zero.clone(), torch.zeros((), dtype=torch.int64))

    def unweighted(state, value):
        if nan_strategy == "disable":
            return MeanState(state.weighted_sum + _nan.total(value), state.weight + value.numel(), state.nan_count)
        clean = _nan.unscreened(value, _nan.total)
        if clean is not None:
            return MeanState(state.weighted_sum + clean, state.weight + value.numel(), state.nan_count)
        nans = _nan.nan_count(value)
        if _nan.drops(nan_strategy):
            kept = value.numel() - nans
            return MeanState(state.weighted_sum + _nan.total(value, skip_nan=True), state.weight + kept,
                             state.nan_count + nans)
        return MeanState(state.weighted_sum + _nan.total(_nan.replace(nan_strategy, value)),
                         state.weight + value.numel(), state.nan_count + nans)

    def update(state, value, weight=None):
        value = _nan.as_tensor(name, "value", value)
        if weight is None:
            return unweighted(state, value)
        weight = _nan.as_tensor(name, "weight", weight)
        try:
            weight = torch.broadcast_to(weight, value.shape)
        except RuntimeError:
            raise validation.fail(name, "weight", f"a shape broadcastable to value's {tuple(value.shape)}",
                                  tuple(weight.shape)) from None
        value, weight, nans = _nan.clean(nan_strategy, value, weight)
        acc = state.weight.dtype
        return MeanState(
            state.weighted_sum + (value.to(acc) * weight.to(acc)).sum(),
            state.weight + weight.sum(dtype=acc),
            state.nan_count + nans,
        )

    def finalize(state):
        _nan.report(name, nan_strategy, state.nan_count)
        if not bool(state.weight != 0):
            warnings.warn(f"{name}: no values were seen (empty input, or zero total weight); the mean is "
                          "undefined and set to NaN", UserWarning, stacklevel=2)
            return torch.full_like(state.weighted_sum, float("nan"))
        return state.weighted_sum / state.weight

    tags = MeanState(weighted_sum="sum", weight="sum", nan_count="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize,
                  name=name, reductions=tags, higher_is_better=None, is_differentiable=False)
