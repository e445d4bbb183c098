"""`weighted_mean_absolute_percentage_error`: ``sum |preds - target| / sum |target|``."""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _inputs
from fmetrics.regression.mape import EPSILON
from fmetrics.state import accum_dtype, merge_fields


class WMAPEState(NamedTuple):
    abs_error: torch.Tensor  # float64 (D,): sum |p - t|
    scale: torch.Tensor  # float64 (D,): sum |t|
    count: torch.Tensor  # int64 (D,): counted entries
    nonfinite: torch.Tensor  # int64 (D,): entries with a NaN/inf in preds or target


@factory
def weighted_mean_absolute_percentage_error(*, num_outputs: int = 1, nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """WMAPE ``sum_i |p_i - t_i| / max(sum_i |t_i|, 1.17e-6)``.

    Args:
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      nan_strategy: NaN/inf in the inputs: ``"error"`` (default; raised at
        once on CPU, else by `finalize`), ``"warn"``/``"ignore"`` (left out)
        or ``"disable"`` (propagate); see docs/regression.md.

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 tensor, 0-d or ``(num_outputs,)``; NaN with a warning on no data.

    Example::

        >>> m = fmetrics.weighted_mean_absolute_percentage_error()
        >>> m(torch.tensor([1., 2., 3.]), torch.tensor([1., 1., 1.]))
        tensor(1., dtype=torch.float64)
    """
    name = "weighted_mean_absolute_percentage_error"
    _inputs.check_num_outputs(name, num_outputs)
    _inputs.check_nan_strategy(name, nan_strategy)
    drop = nan_strategy != "disable"

    def init():
        zero = torch.zeros(num_outputs, dtype=accum_dtype())
        count = torch.zeros(num_outputs, dtype=torch.int64)
        return WMAPEState(zero, zero.clone(), count, count.clone())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=True)
        t = _inputs.columns(name, target, num_outputs, flatten=True)
        err = _inputs.difference(p, t, state.scale).abs_()
        scale = t.to(state.scale.dtype).abs()
        rows = p.shape[0]
        if not drop:
            return WMAPEState(state.abs_error + err.sum(0), state.scale + scale.sum(0), state.count + rows,
                              state.nonfinite)
        ones = _inputs.finite_ones(err)  # NaN where p or t is not finite
        bad = (rows - torch.nansum(ones, 0)).to(torch.int64)
        return WMAPEState(state.abs_error + torch.nansum(err.mul_(ones), 0),
                          state.scale + torch.nansum(scale.mul_(ones), 0), state.count + (rows - bad),
                          state.nonfinite + bad)

    def finalize(state):
        _inputs.report_count(name, nan_strategy, state.nonfinite)
        if _inputs.empty(name, state.count):
            value = torch.full_like(state.abs_error, float("nan"))
        else:
            value = state.abs_error / torch.clamp(state.scale, min=EPSILON)
        return value[0] if num_outputs == 1 else value

    tags = WMAPEState(abs_error="sum", scale="sum", count="sum", nonfinite="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, check=_inputs.finite_check(name) if nan_strategy == "error" else None,
                  higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
