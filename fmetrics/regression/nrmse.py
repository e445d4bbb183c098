"""`normalized_root_mean_squared_error`: RMSE divided by a statistic of the target."""
from __future__ import annotations

from typing import NamedTuple

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _moments
from fmetrics.state import accum_dtype
from fmetrics.recipe import factory

NORMALIZATIONS = ("mean", "range", "std", "l2")


class NRMSEState(NamedTuple):
    sum_squared_error: torch.Tensor  # float64 (D,)
    n: torch.Tensor  # int64 (): rows seen
    mean: torch.Tensor  # float64 (D,): target mean (Chan)
    m2: torch.Tensor  # float64 (D,): sum (t - mean)^2 (Chan)
    min: torch.Tensor  # float64 (D,)
    max: torch.Tensor  # float64 (D,)
    sum_squares: torch.Tensor  # float64 (D,): sum t^2, the squared L2 norm


def _merge(a: NRMSEState, b: NRMSEState) -> NRMSEState:
    n, w_b, cross = _moments.weights(a.n, b.n, a.mean.dtype)
    d = b.mean - a.mean
    return NRMSEState(a.sum_squared_error + b.sum_squared_error, n, _moments.merge_mean(a.mean, b.mean, w_b),
                      _moments.merge_comoment(a.m2, b.m2, d, d, cross), torch.minimum(a.min, b.min),
                      torch.maximum(a.max, b.max), a.sum_squares + b.sum_squares)


@factory
def normalized_root_mean_squared_error(*, normalization: str = "mean", num_outputs: int = 1) -> Metric:
    """NRMSE ``sqrt(1/n sum (p - t)^2) / s(t)``.

    ``s`` per ``normalization``: ``"mean"`` the target mean, ``"range"``
    ``max - min``, ``"std"`` the population standard deviation (Chan-merged,
    float64), ``"l2"`` ``sqrt(sum t^2)``. A zero ``s`` gives ``inf`` (as
    torchmetrics). All four normalizations share one state.

    Example::

        >>> m = fmetrics.normalized_root_mean_squared_error("range")
        >>> m(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 1.]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "normalized_root_mean_squared_error"
    _inputs.check_choice(name, "normalization", normalization, NORMALIZATIONS)
    _inputs.check_num_outputs(name, num_outputs)

    def init():
        zero = torch.zeros(num_outputs, dtype=accum_dtype())
        inf = torch.full((num_outputs,), float("inf"), dtype=zero.dtype)
        return NRMSEState(zero, torch.zeros((), dtype=torch.int64), zero.clone(), zero.clone(), inf, -inf,
                          zero.clone())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=True)
        t = _inputs.columns(name, target, num_outputs, flatten=True)
        sse = _inputs.square(_inputs.difference(p, t, state.mean)).sum(0)
        mean, c = _moments.centre(t, state.mean.dtype)
        m2 = _inputs.square(c).sum(0)
        sum_squares = _inputs.square(t.to(state.mean.dtype, copy=True)).sum(0)
        lo, hi = (t.amin(0).to(state.min), t.amax(0).to(state.max)) if t.shape[0] else (state.min, state.max)
        batch = NRMSEState(sse, _moments.batch_count(t), mean, m2, lo, hi, sum_squares)
        return _merge(state, batch)

    def finalize(state):
        rmse = torch.sqrt(state.sum_squared_error / state.n)
        if normalization == "mean":
            denom = state.mean
        elif normalization == "range":
            denom = state.max - state.min
        elif normalization == "std":
            denom = torch.sqrt(state.m2 / state.n)
        else:
            denom = torch.sqrt(state.sum_squares)
        value = rmse / denom
        return value[0] if num_outputs == 1 else value

    tags = NRMSEState(sum_squared_error="sum", n=None, mean=None, m2=None, min="min", max="max", sum_squares="sum")
    return Metric(init=init, update=update, merge=_merge, finalize=finalize, name=name,
                  state_key=("regression.nrmse", num_outputs), reductions=tags)
