"""`min` and `max`: running extrema (identity: +inf / -inf)."""
from __future__ import annotations

from typing import Literal, NamedTuple, Union

import torch

from fmetrics.aggregation import _nan
from fmetrics.metric import Metric
from fmetrics.state import merge_fields
from fmetrics.recipe import factory


class ExtremumState(NamedTuple):
    value: torch.Tensor  # float64 running extremum
    nan_count: torch.Tensor  # int64


def _extremum(name: str, tag: str, nan_strategy) -> Metric:
    _nan.check(name, nan_strategy)
    start = float("inf") if tag == "min" else -float("inf")
    reduce = torch.amin if tag == "min" else torch.amax
    combine = torch.minimum if tag == "min" else torch.maximum

    def init():
        return ExtremumState(torch.tensor(start, dtype=torch.float64), torch.zeros((), dtype=torch.int64))

    def update(state, value):
        value = _nan.as_tensor(name, "value", value)
        nans = state.nan_count
        clean = None
        if nan_strategy != "disable" and value.numel():
            clean = _nan.unscreened(value, lambda x: reduce(x.reshape(-1), dim=0))
        if clean is not None:
            return ExtremumState(combine(state.value, clean.to(state.value.dtype)), nans)
        if nan_strategy != "disable":
            nans = nans + _nan.nan_count(value)
            # left-out NaNs become the identity, so they never win
            value = _nan.replace(start if _nan.drops(nan_strategy) else nan_strategy, value)
        if not value.numel():
            return ExtremumState(state.value, nans)
        return ExtremumState(combine(state.value, reduce(value.reshape(-1), dim=0).to(state.value.dtype)), nans)

    def finalize(state):
        _nan.report(name, nan_strategy, state.nan_count)
        return state.value

    tags = ExtremumState(value=tag, nan_count="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize,
                  name=name, reductions=tags, higher_is_better=None, is_differentiable=False)


@factory
def min(*, nan_strategy: Union[Literal["error", "warn", "ignore", "disable"], float] = "warn") -> Metric:  # noqa: A001 - torchmetrics' name
    """Smallest element seen: ``min_i x_i`` (``+inf``, the identity, before any data, as torchmetrics).

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

        >>> fmetrics.min()(torch.tensor([3., -1.]))
        tensor(-1., dtype=torch.float64)
    """
    return _extremum("min", "min", nan_strategy)


@factory
def max(*, nan_strategy: Union[Literal["error", "warn", "ignore", "disable"], float] = "warn") -> Metric:  # noqa: A001 - torchmetrics' name
    """Largest element seen: ``max_i x_i`` (``-inf``, the identity, before any data, as torchmetrics).

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

        >>> fmetrics.max()(torch.tensor([3., -1.]))
        tensor(3., dtype=torch.float64)
    """
    return _extremum("max", "max", nan_strategy)
