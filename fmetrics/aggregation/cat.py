"""`cat`: every value seen, concatenated along dim 0."""
from __future__ import annotations

from typing import NamedTuple

import torch

from fmetrics.aggregation import _nan
from fmetrics.metric import Metric
from fmetrics.state import cat_chunks, merge_fields
from fmetrics.recipe import factory


class CatState(NamedTuple):
    chunks: tuple  # one tensor per update, joined once in finalize
    nan_count: torch.Tensor  # int64


@factory
def cat(*, nan_strategy="warn") -> Metric:
    """All values in arrival order: ``torch.cat([x_1, x_2, ...])``.

    0-d values become 1-element chunks. Under ``error``/``warn``/``ignore``,
    NaNs are removed in `finalize` (the result is then flattened, as in
    torchmetrics); ``update`` stores the raw chunk, so it has a static shape.
    The state grows with the data: O(total) over the run.

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
        value = value.reshape(1) if value.dim() == 0 else value
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
                  name=name, state_key=(name, str(nan_strategy)), reductions=tags)
