"""`pearson_corrcoef` and the co-moment state it shares with `concordance_corrcoef`.

Per output: the count, the means and centred second moments of preds and
target and their co-moment. The default (``exact=False``) keeps them as
float64 shifted sums (`ComomentSums`, `fmetrics.regression._shifted`) with a
batch's arithmetic in the inputs' dtype; ``exact=True`` keeps Chan-merged
centred moments with float64 arithmetic (`fmetrics.regression._moments`).
The finalizers read the centred view (`centred`) of either.
"""
from __future__ import annotations

import warnings
from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _inputs, _moments, _shifted
from fmetrics.state import accum_dtype

NanStrategy = Literal["error", "warn", "ignore", "disable"]


class PearsonState(NamedTuple):
    n: torch.Tensor  # int64 (): pairs seen
    mean: torch.Tensor  # float64 (2, D): means of preds (row 0) and target (row 1)
    m2: torch.Tensor  # float64 (2, D): sum (x - mean_x)^2, sum (y - mean_y)^2
    c_xy: torch.Tensor  # float64 (D,): sum (x - mean_x)(y - mean_y)
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


class ComomentSums(NamedTuple):
    n: torch.Tensor  # int64 (): pairs seen
    shift: torch.Tensor  # float64 (2, D): the shifts K of preds (row 0) and target (row 1)
    sums: torch.Tensor  # float64 (5, D): sum (x - K), sum (y - K), their squares' sums, sum (x - Kx)(y - Ky)
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


_shifted.pair_types(PearsonState, ComomentSums, "pair")


def centred(state) -> PearsonState:
    """The centred moments of either layout (exact up to float64 rounding)."""
    return _shifted.centred(state, PearsonState)


def comoments(num_outputs: int, nan_strategy: str, name: str, exact: bool = False) -> Family:
    """The co-moment state of Pearson and concordance (one per ``num_outputs``, NaN mode and ``exact``)."""
    _inputs.check_num_outputs(name, num_outputs)
    _inputs.check_nan_strategy(name, nan_strategy)
    _inputs.check_bool(name, "exact", exact)
    mode = _inputs.nan_mode(nan_strategy)
    if not exact:
        return _shifted.family("regression.comoments", ComomentSums, num_outputs, mode, name, "pair")

    def init():
        zero = torch.zeros(2, num_outputs, dtype=accum_dtype())
        return PearsonState(torch.zeros((), dtype=torch.int64), zero, zero.clone(), zero[0].clone(),
                            validation.invalid_init())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        x = _inputs.columns(name, preds, num_outputs, flatten=False)
        y = _inputs.columns(name, target, num_outputs, flatten=False)
        return _moments.update(state, x, y, residual=False, mode=mode, name=name, raw=(preds, target))

    tags = PearsonState(n=None, mean=None, m2=None, c_xy=None, invalid=None)
    return Family(name="regression.comoments", key=(num_outputs, mode, exact), init=init, update=update, reductions=tags,
                  merge=_moments.merge, weigh_rows=_moments.weigh_rows)


def undefined(name: str, state: PearsonState, nan_strategy: str) -> torch.Tensor:
    """Outputs where preds or target is constant (or < 2 pairs); warns when there is one.

    Reports non-finite input first (per ``nan_strategy``): NaN is never called "constant".
    """
    state = centred(state)
    _inputs.report_invalid(name, nan_strategy, state.invalid)
    bad = _moments.degenerate(state.n, state.mean, state.m2).any(0)
    nan = torch.isnan(state.m2).any(0)
    shown = bad & ~nan
    if bool(shown.any()):
        warnings.warn(f"{name}: preds or target is constant (or there are fewer than 2 samples) for "
                      f"{int(shown.sum())} of {shown.numel()} outputs; the correlation is undefined there and set "
                      "to NaN", UserWarning, stacklevel=3)
    return bad


@factory
def pearson_corrcoef(*, num_outputs: int = 1, nan_strategy: NanStrategy = "error", exact: bool = False) -> Metric:
    """Pearson's ``r = sum (x - mx)(y - my) / sqrt(sum (x - mx)^2 sum (y - my)^2)``, clamped to [-1, 1].

    Means and co-moments come from float64 sums of values shifted near the
    data, so data with a large offset keep their precision. Constant preds or target (or fewer than 2
    pairs): NaN and a warning.

    Args:
      num_outputs: number of columns (default ``1``: inputs ``(N,)`` or
        ``(N, 1)``); ``k > 1``: inputs ``(N, k)``, one coefficient per column.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``/``"ignore"`` (the row is left out) or ``"disable"``
        (propagate: NaN); see docs/regression.md.
      exact: ``False`` (default): a batch is shifted, squared and summed in
        the inputs' float32 / float64 dtype into float64 shifted sums (as
        fast as torchmetrics' raw sums; within 1e-6 relative of a float64
        reference on float32 data offset by 1e4). ``True``: float64
        arithmetic per element, within 1e-9 (docs/regression.md, "Precision").

    Inputs:
      ``update(state, preds, target)``: real tensors ``(N,)`` or ``(N, num_outputs)``.

    Returns:
      float64 tensor in ``[-1, 1]``, 0-d or ``(num_outputs,)``. Differentiable
      through the one-shot call.

    Example::

        >>> fmetrics.pearson_corrcoef()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.9849, dtype=torch.float64)
    """
    name = "pearson_corrcoef"
    fam = comoments(num_outputs, nan_strategy, name, exact)

    def finish(state):
        state = centred(state)
        bad = undefined(name, state, nan_strategy)
        denom = torch.sqrt(state.m2[0]) * torch.sqrt(state.m2[1])
        r = torch.where(bad, torch.nan, torch.clamp(state.c_xy / torch.where(bad, 1, denom), -1, 1))
        return r[0] if num_outputs == 1 else r

    return fam.metric(name, finish, higher_is_better=None, is_differentiable=True, bounds=(-1.0, 1.0))
