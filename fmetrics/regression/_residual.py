"""The state shared by `r2_score`, `explained_variance` and `relative_squared_error`.

Per output: the count, the target's mean and centred second moment, and the
residual ``e = preds - target``'s mean and centred second moment, all merged
with Chan's formulas (`fmetrics.regression._moments`) in float64. From them::

    TSS = M2_t                       (total sum of squares)
    RSS = M2_e + n mean_e^2          (residual sum of squares; both terms >= 0)
    Var(e) / Var(t) = M2_e / M2_t    (explained variance)

Every configuration of the three metrics with one ``num_outputs`` has the same
state key, so a collection of them runs one update.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _moments
from fmetrics.state import accum_dtype

MULTIOUTPUT = ("raw_values", "uniform_average", "variance_weighted")


class ResidualState(NamedTuple):
    n: torch.Tensor  # int64 (): rows seen
    mean: torch.Tensor  # float64 (2, D): means of the target (row 0) and the residual preds - target (row 1)
    m2: torch.Tensor  # float64 (2, D): their centred second moments, sum (t - mean_t)^2 and sum (e - mean_e)^2


def merge(a: ResidualState, b: ResidualState) -> ResidualState:
    n, w_b, cross = _moments.weights(a.n, b.n, a.mean.dtype)
    d = b.mean - a.mean
    return ResidualState(n, _moments.merge_mean(a.mean, b.mean, w_b), _moments.merge_comoment(a.m2, b.m2, d, d, cross))


def residual_metric(name: str, num_outputs: int, finalize) -> Metric:
    """A `Metric` over `ResidualState` with the given ``finalize``."""
    _inputs.check_num_outputs(name, num_outputs)

    def init():
        zero = torch.zeros(2, num_outputs, dtype=accum_dtype())
        return ResidualState(torch.zeros((), dtype=torch.int64), zero, zero.clone())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=False)
        t = _inputs.columns(name, target, num_outputs, flatten=False)
        if t.shape[0] == 0:
            return state
        acc = state.mean.dtype
        if t.numel() <= _moments.STACK_LIMIT:  # one (N, 2, D) buffer: half the operations
            z = torch.stack((t, p), 1).to(acc)
            z[:, 1].sub_(z[:, 0])  # the residual p - t, exact for float32 inputs
            k = _moments.shift(state.n, state.mean, z[0])
            z = z.sub_(k)
            s1, s2 = z.sum(0), _inputs.square(z).sum(0)
        else:  # two (N, D) buffers: fewer bytes moved
            ct = t.to(acc, copy=True)
            ce = p.to(acc, copy=True).sub_(ct)
            k = _moments.shift(state.n, state.mean, torch.stack((ct[0], ce[0])))
            ct, ce = ct.sub_(k[0]), ce.sub_(k[1])
            s1 = torch.stack((ct.sum(0), ce.sum(0)))
            s2 = torch.stack((_inputs.square(ct).sum(0), _inputs.square(ce).sum(0)))
        n, mean, w = _moments.absorb(state.n, t.shape[0], k, s1)
        return ResidualState(n, mean, torch.addcmul(state.m2 + s2, s1, w, value=-1))

    tags = ResidualState(n=None, mean=None, m2=None)
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=name,
                  state_key=("regression.residual_moments", num_outputs), reductions=tags)


def rss(state: ResidualState) -> torch.Tensor:
    """Residual sum of squares ``M2_e + n mean_e^2`` per output (both terms >= 0)."""
    return state.m2[1] + state.n * state.mean[1] * state.mean[1]


def undefined(name: str, state: ResidualState) -> torch.Tensor:
    """Outputs whose target is constant (or with < 2 samples); warns when there is one."""
    bad = _moments.degenerate(state.n, state.mean[0], state.m2[0])
    if bool(bad.any()):
        warnings.warn(f"{name}: the target is constant (or has fewer than 2 samples) for "
                      f"{int(bad.sum())} of {bad.numel()} outputs; the score is undefined there and set to NaN",
                      UserWarning, stacklevel=3)
    return bad


def average(scores: torch.Tensor, weights: torch.Tensor, bad: torch.Tensor, multioutput: str, num_outputs: int):
    """``multioutput`` reduction of per-output ``scores`` (NaN where ``bad``)."""
    if multioutput == "raw_values":
        return scores[0] if num_outputs == 1 else scores
    if multioutput == "uniform_average":
        return scores.mean()
    w = torch.where(bad, 0, weights)
    total = w.sum()
    value = (w * torch.where(bad, 0, scores)).sum() / total
    return torch.where(total > 0, value, torch.nan)
