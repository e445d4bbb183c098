"""`cat`: every value seen, concatenated along dim 0."""
from __future__ import annotations

from typing import Literal, NamedTuple, Union

import torch

from fmetrics.aggregation import _nan
from fmetrics.metric import Metric
from fmetrics.state import cat_chunks, merge_fields
from fmetrics.recipe import factory


class CatState(NamedTuple):
    chunks: tuple  # one tensor per update, joined once in finalize
    nan_count: torch.Tensor  # int64


@factory
def cat(*, nan_strategy: Union[Literal["error", "warn", "ignore", "disable"], float] = "warn") -> Metric:
    """All values in arrival order: ``torch.cat([x_1, x_2, ...])``.

    0-d values become 1-element chunks. Under ``error``/``warn``/``ignore``,
    NaNs are removed in `finalize` (the result is then flattened, as in
    torchmetrics); ``update`` stores a copy of the chunk (never the caller's
    buffer), so it has a static shape. The state grows with the data:
    O(total) over the run.

    Args:
      nan_strategy: NaN values: ``"warn"`` (default, as torchmetrics: left
        out, `finalize` warns with the count), ``"error"`` (left out, `finalize`
        raises), ``"ignore"`` (left out silently), ``"disable"`` (no check: they
        propagate), or a float that replaces them.

    Inputs:
      ``update(state, value)``: a tensor (equal trailing shapes across
      updates), or a Python number.

    Returns:
      the values concatenated on dim 0, in their own dtype (an empty tensor on no data).

    Example::

        >>> fmetrics.cat()(torch.tensor([1., 2.]))
        tensor([1., 2.])
    """
    name = "cat"
    _nan.check(name, nan_strategy)

    def init():
        return CatState((), torch.zeros((), dtype=torch.int64))

    def update(state, value):
        value = _nan.as_tensor(name, "value", value)
        value = (value.reshape(1) if value.dim() == 0 else value).detach().clone()
        if nan_strategy == "disable":
            return CatState(state.chunks + (value,), state.nan_count)
        nans = _nan.nan_count(value)
        if not _nan.drops(nan_strategy):
            value = _nan.replace(nan_strategy, value)
        return CatState(state.chunks + (value,), state.nan_count + nans)

    def finalize(state):
        _nan.report(name, nan_strategy, state.nan_count)
        values = cat_chunks(state.chunks, torch.empty(0))
        if _nan.drops(nan_strategy) and int(state.nan_count):
            values = values[~torch.isnan(values)]
        return values

    tags = CatState(chunks="cat", nan_count="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize,
                  name=name, reductions=tags, higher_is_better=None, is_differentiable=False)
