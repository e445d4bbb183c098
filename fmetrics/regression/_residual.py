"""The state shared by `r2_score`, `explained_variance` and `relative_squared_error`.

Per output: the count, the target's mean and centred second moment, and the
residual ``e = target - preds``'s mean and centred second moment, all merged
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
    mean_target: torch.Tensor  # float64 (D,)
    m2_target: torch.Tensor  # float64 (D,): sum (t - mean_t)^2
    mean_error: torch.Tensor  # float64 (D,): mean of t - p
    m2_error: torch.Tensor  # float64 (D,): sum (e - mean_e)^2


def merge(a: ResidualState, b: ResidualState) -> ResidualState:
    n, w_b, cross = _moments.weights(a.n, b.n, a.mean_target.dtype)
    dt, de = b.mean_target - a.mean_target, b.mean_error - a.mean_error
    return ResidualState(
        n,
        _moments.merge_mean(a.mean_target, b.mean_target, w_b),
        _moments.merge_comoment(a.m2_target, b.m2_target, dt, dt, cross),
        _moments.merge_mean(a.mean_error, b.mean_error, w_b),
        _moments.merge_comoment(a.m2_error, b.m2_error, de, de, cross),
    )


def residual_metric(name: str, num_outputs: int, finalize) -> Metric:
    """A `Metric` over `ResidualState` with the given ``finalize``."""
    _inputs.check_num_outputs(name, num_outputs)

    def init():
        zero = torch.zeros(num_outputs, dtype=accum_dtype())
        return ResidualState(torch.zeros((), dtype=torch.int64), zero, zero.clone(), zero.clone(), zero.clone())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=False)
        t = _inputs.columns(name, target, num_outputs, flatten=False)
        acc = state.mean_target.dtype
        t64 = t.to(acc, copy=True)
        e = t64 - p.to(acc)
        (mt, ct), (me, ce) = _moments.centre_(t64), _moments.centre_(e)
        batch = ResidualState(_moments.batch_count(t), mt, _inputs.square(ct).sum(0), me,
                              _inputs.square(ce).sum(0))
        return merge(state, batch)

    tags = ResidualState(n=None, mean_target=None, m2_target=None, mean_error=None, m2_error=None)
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=name,
                  state_key=("regression.residual_moments", num_outputs), reductions=tags)


def undefined(name: str, state: ResidualState) -> torch.Tensor:
    """Outputs whose target is constant (or with < 2 samples); warns when there is one."""
    bad = _moments.degenerate(state.n, state.mean_target, state.m2_target)
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
