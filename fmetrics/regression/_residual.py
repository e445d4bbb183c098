"""The state shared by `r2_score`, `explained_variance` and `relative_squared_error`.

Per output: the count, the target's mean and centred second moment, and the
residual ``e = preds - target``'s mean and centred second moment, all merged
with Chan's formulas (`fmetrics.regression._moments`) in float64. From them::

    TSS = M2_t                       (total sum of squares)
    RSS = M2_e + n mean_e^2          (residual sum of squares; both terms >= 0)
    Var(e) / Var(t) = M2_e / M2_t    (explained variance)

Per ``num_outputs`` and NaN mode, ``exact=True`` is one `fmetrics.Family`
state for the three metrics (the centred moments `ResidualState`, float64
batch arithmetic). The default keeps shifted raw sums
(`fmetrics.regression._shifted`), read through the exact centred view
`centred`: `SquaresSums` for R² and RSE (the target's shifted sums and the
plain ``sum e^2``: R² needs no residual mean), `ResidualSums` for explained
variance (target and residual shifted).
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.regression import _inputs, _moments, _shifted
from fmetrics.state import accum_dtype

MULTIOUTPUT = ("raw_values", "uniform_average", "variance_weighted")


class ResidualState(NamedTuple):
    n: torch.Tensor  # int64 (): rows seen
    mean: torch.Tensor  # float64 (2, D): means of the target (row 0) and the residual preds - target (row 1)
    m2: torch.Tensor  # float64 (2, D): their centred second moments, sum (t - mean_t)^2 and sum (e - mean_e)^2
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


class ResidualSums(NamedTuple):
    n: torch.Tensor  # int64 (): rows seen
    shift: torch.Tensor  # float64 (2, D): the shifts K_t of the target and K_e of the residual e = p - t
    sums: torch.Tensor  # float64 (4, D): sum (t - K_t), sum (e - K_e), sum (t - K_t)^2, sum (e - K_e)^2
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


class SquaresSums(NamedTuple):
    n: torch.Tensor  # int64 (): rows seen
    shift: torch.Tensor  # float64 (1, D): the shift K of the target
    sums: torch.Tensor  # float64 (3, D): sum (t - K), sum (t - K)^2, sum (p - t)^2
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


_shifted.pair_types(ResidualState, ResidualSums, "residual")
_shifted.pair_types(ResidualState, SquaresSums, "r2")


def centred(state) -> ResidualState:
    """The centred moments of either layout (exact up to float64 rounding)."""
    return _shifted.centred(state, ResidualState)


def family(num_outputs: int, nan_strategy: str, name: str, exact: bool = False, squares: bool = False) -> Family:
    """The residual-moment state of `r2_score`, `explained_variance` and `relative_squared_error`:
    shifted sums with the batch in the inputs' dtype (`_shifted`; with ``squares`` the lighter
    `SquaresSums` of R² and RSE, which need no residual mean), or with ``exact`` centred moments with
    float64 batch arithmetic (`_moments.update`)."""
    _inputs.check_num_outputs(name, num_outputs)
    _inputs.check_nan_strategy(name, nan_strategy)
    mode = _inputs.nan_mode(nan_strategy)
    if not exact:
        if squares:
            return _shifted.family("regression.residual_squares", SquaresSums, num_outputs, mode, name, "r2")
        return _shifted.family("regression.residual_moments", ResidualSums, num_outputs, mode, name, "residual")

    def init():
        zero = torch.zeros(2, num_outputs, dtype=accum_dtype())
        return ResidualState(torch.zeros((), dtype=torch.int64), zero, zero.clone(), validation.invalid_init())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=False)
        t = _inputs.columns(name, target, num_outputs, flatten=False)
        return _moments.update(state, t, p, residual=True, mode=mode, name=name, raw=(preds, target))

    tags = ResidualState(n=None, mean=None, m2=None, invalid=None)
    return Family(name="regression.residual_moments", key=(num_outputs, mode, exact), init=init, update=update,
                  reductions=tags, merge=_moments.merge, weigh_rows=_moments.weigh_rows)


def rss(state: ResidualState) -> torch.Tensor:
    """Residual sum of squares ``M2_e + n mean_e^2`` per output (both terms >= 0)."""
    return state.m2[1] + state.n * state.mean[1] * state.mean[1]


def undefined(name: str, state: ResidualState, nan_strategy: str) -> torch.Tensor:
    """Outputs whose target is constant (or with < 2 samples); warns when there is one.

    Reports non-finite input first (per ``nan_strategy``).
    """
    _inputs.report_invalid(name, nan_strategy, state.invalid)
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
