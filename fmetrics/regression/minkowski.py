"""`minkowski_distance`: ``(sum |preds - target|^p)^(1/p)``."""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _inputs
from fmetrics.state import accum_dtype, merge_fields


class MinkowskiState(NamedTuple):
    total: torch.Tensor  # float64 (): sum |x - y|^p over counted entries
    nonfinite: torch.Tensor  # int64 (): entries with a NaN/inf in preds or target


@factory
def minkowski_distance(*, p: float, nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """Minkowski distance ``(sum_i |x_i - y_i|^p)^(1/p)`` over every element.

    Args:
      p: the order, a number ``>= 1`` (required; ``2`` is the Euclidean distance).
      nan_strategy: NaN/inf in the inputs: ``"error"`` (default; raised at
        once on CPU, else by `finalize`), ``"warn"``/``"ignore"`` (left out)
        or ``"disable"`` (propagate); see docs/regression.md.

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 0-d tensor (0 on no data: the distance of empty vectors).

    Example::

        >>> fmetrics.minkowski_distance(p=3)(torch.tensor([1., 2., 3., 4.]), torch.tensor([2., 3., 4., 5.]))
        tensor(1.5874, dtype=torch.float64)
    """
    name = "minkowski_distance"
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not p >= 1:
        raise validation.fail(name, "p", "a number >= 1", repr(p))
    p = float(p)
    _inputs.check_nan_strategy(name, nan_strategy)
    drop = nan_strategy != "disable"

    def init():
        return MinkowskiState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64))

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        d = _inputs.difference(preds.reshape(-1, 1), target.reshape(-1, 1), state.total).abs_() ** p
        if not drop:
            return MinkowskiState(state.total + d.sum(), state.nonfinite)
        ones = _inputs.finite_ones(d)
        return MinkowskiState(state.total + torch.nansum(d * ones),
                              state.nonfinite + (d.numel() - torch.nansum(ones)).to(torch.int64))

    def finalize(state):
        _inputs.report_count(name, nan_strategy, state.nonfinite)
        return state.total ** (1.0 / p)

    tags = MinkowskiState(total="sum", nonfinite="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, check=_inputs.finite_check(name) if nan_strategy == "error" else None,
                  higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
