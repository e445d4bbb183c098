"""`min_max`: the best and worst value of a metric across evaluation rounds."""
from __future__ import annotations

from typing import Any, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype
from fmetrics.recipe import factory


class MinMaxState(NamedTuple):
    inner: Any  # the wrapped metric's state for the current round
    low: torch.Tensor  # smallest value of the finished rounds (+inf before any)
    high: torch.Tensor  # largest value of the finished rounds (-inf before any)


@factory
def min_max(metric: Metric) -> Metric:
    """``{"raw", "min", "max"}``: a scalar metric's value and its extrema across rounds.

    torchmetrics' ``MinMaxMetric`` updates its extrema as a side effect of
    ``compute()``. Here ``finalize`` is pure: it returns the extrema over the
    finished rounds *and* the current value, but stores nothing. Rounds are
    closed explicitly by `min_max_reset`, which folds the current value into
    the state and restarts the wrapped metric (torchmetrics' ``compute()`` then
    ``reset()``, which keeps the extrema)::

        >>> m = min_max(fmetrics.mean())
        >>> s = m.update(m.init(), torch.tensor([1.]))
        >>> s = min_max_reset(m, s)                   # round 1: 1.0
        >>> m.finalize(m.update(s, torch.tensor([3.])))  # round 2: 3.0
        {'raw': tensor(3., dtype=torch.float64), 'min': tensor(1., dtype=torch.float64), \
'max': tensor(3., dtype=torch.float64)}

    Across ranks every field merges (extrema by min / max), so reducing a state
    gives the same extrema as one process.

    Args:
      metric: a `fmetrics.Metric` with a scalar value (positional; no options).

    Inputs:
      ``update(state, *inputs)``: the wrapped metric's inputs.

    Returns:
      ``{"raw": value, "min": float64, "max": float64}``.
    """
    name = "min_max"
    if not isinstance(metric, Metric):
        raise validation.fail(name, "metric", "a fmetrics.Metric", type(metric).__name__)

    def init():
        dtype = accum_dtype()
        return MinMaxState(metric.init(), torch.tensor(float("inf"), dtype=dtype),
                           torch.tensor(-float("inf"), dtype=dtype))

    def update(state, *inputs, **kwargs):
        return MinMaxState(metric.update(state.inner, *inputs, **kwargs), state.low, state.high)

    def merge(a, b):
        return MinMaxState(metric.merge(a.inner, b.inner), torch.minimum(a.low, b.low),
                           torch.maximum(a.high, b.high))

    def finalize(state):
        raw = metric.finalize(state.inner)
        value = torch.as_tensor(raw)
        if isinstance(raw, dict) or value.numel() != 1:
            raise validation.fail(name, "metric", "a metric with a scalar value",
                                  "a dict" if isinstance(raw, dict) else f"shape {tuple(value.shape)}")
        value = value.reshape(()).to(device=state.low.device, dtype=state.low.dtype)
        return {"raw": raw, "min": torch.minimum(state.low, value), "max": torch.maximum(state.high, value)}

    tags = MinMaxState(inner=metric.reductions, low="min", high="max")
    key = None if metric.state_key is None else (name, metric.state_key)
    return Metric(init=init, update=update, merge=merge, finalize=finalize,
                  name=f"{name}({metric.name})", state_key=key, reductions=tags,
                  higher_is_better=metric.higher_is_better, bounds=metric.bounds)


def min_max_reset(metric: Metric, state: MinMaxState) -> MinMaxState:
    """Closes a round of a `min_max` metric: the extrema take in its value; the wrapped state restarts."""
    value = metric.finalize(state)
    fresh = metric.init(state.low.device)
    return MinMaxState(fresh.inner, value["min"], value["max"])
