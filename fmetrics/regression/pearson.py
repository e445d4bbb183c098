"""`pearson_corrcoef`: ``C_xy / sqrt(M2_x M2_y)`` from Chan-merged co-moments."""
from __future__ import annotations

import warnings
from typing import NamedTuple

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _moments
from fmetrics.state import accum_dtype
from fmetrics.recipe import factory


class PearsonState(NamedTuple):
    n: torch.Tensor  # int64 (): pairs seen
    mean: torch.Tensor  # float64 (2, D): means of preds (row 0) and target (row 1)
    m2: torch.Tensor  # float64 (2, D): sum (x - mean_x)^2, sum (y - mean_y)^2
    c_xy: torch.Tensor  # float64 (D,): sum (x - mean_x)(y - mean_y)


def _merge(a: PearsonState, b: PearsonState) -> PearsonState:
    n, w_b, cross = _moments.weights(a.n, b.n, a.mean.dtype)
    d = b.mean - a.mean
    return PearsonState(
        n,
        _moments.merge_mean(a.mean, b.mean, w_b),
        _moments.merge_comoment(a.m2, b.m2, d, d, cross),
        _moments.merge_comoment(a.c_xy, b.c_xy, d[0], d[1], cross),
    )


def comoment_metric(name: str, num_outputs: int, finalize) -> Metric:
    """A `Metric` over `PearsonState` (shared by Pearson and concordance) with ``finalize``."""
    _inputs.check_num_outputs(name, num_outputs)

    def init():
        zero = torch.zeros(2, num_outputs, dtype=accum_dtype())
        return PearsonState(torch.zeros((), dtype=torch.int64), zero, zero.clone(), zero[0].clone())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        x = _inputs.columns(name, preds, num_outputs, flatten=False)
        y = _inputs.columns(name, target, num_outputs, flatten=False)
        if x.shape[0] == 0:
            return state
        acc = state.mean.dtype
        if x.numel() <= _moments.STACK_LIMIT:  # one (N, 2, D) buffer: half the operations
            z = torch.stack((x, y), 1).to(acc)
            k = _moments.shift(state.n, state.mean, z[0])
            z = z.sub_(k)
            s1, sxy = z.sum(0), (z[:, 0] * z[:, 1]).sum(0)
            s2 = _inputs.square(z).sum(0)
        else:  # two (N, D) buffers: fewer bytes moved
            k = _moments.shift(state.n, state.mean, torch.stack((x[0], y[0])))
            dx, dy = x.to(acc, copy=True).sub_(k[0]), y.to(acc, copy=True).sub_(k[1])
            s1, sxy = torch.stack((dx.sum(0), dy.sum(0))), (dx * dy).sum(0)
            s2 = torch.stack((_inputs.square(dx, dy).sum(0), _inputs.square(dy, dx).sum(0)))
        n, mean, w = _moments.absorb(state.n, x.shape[0], k, s1)
        return PearsonState(n, mean, torch.addcmul(state.m2 + s2, s1, w, value=-1),
                            torch.addcmul(state.c_xy + sxy, s1[0], w[1], value=-1))

    tags = PearsonState(n=None, mean=None, m2=None, c_xy=None)
    return Metric(init=init, update=update, merge=_merge, finalize=finalize, name=name,
                  state_key=("regression.comoments", num_outputs), reductions=tags)


def undefined(name: str, state: PearsonState) -> torch.Tensor:
    """Outputs where preds or target is constant (or < 2 pairs); warns when there is one."""
    bad = _moments.degenerate(state.n, state.mean, state.m2).any(0)
    if bool(bad.any()):
        warnings.warn(f"{name}: preds or target is constant (or there are fewer than 2 samples) for "
                      f"{int(bad.sum())} of {bad.numel()} outputs; the correlation is undefined there and set "
                      "to NaN", UserWarning, stacklevel=3)
    return bad


@factory
def pearson_corrcoef(*, num_outputs: int = 1) -> Metric:
    """Pearson's ``r = sum (x - mx)(y - my) / sqrt(sum (x - mx)^2 sum (y - my)^2)``, clamped to [-1, 1].

    Inputs ``(N,)`` or ``(N, num_outputs)`` (one coefficient per column).
    Means and co-moments are Chan-merged in float64, so data with a large
    offset keep their precision. Constant preds or target: NaN and a warning.

    Example::

        >>> fmetrics.pearson_corrcoef()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.9849, dtype=torch.float64)
    """
    name = "pearson_corrcoef"

    def finalize(state):
        bad = undefined(name, state)
        denom = torch.sqrt(state.m2[0]) * torch.sqrt(state.m2[1])
        r = torch.where(bad, torch.nan, torch.clamp(state.c_xy / torch.where(bad, 1, denom), -1, 1))
        return r[0] if num_outputs == 1 else r

    return comoment_metric(name, num_outputs, finalize)
