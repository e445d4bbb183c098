"""`normalized_root_mean_squared_error`: RMSE divided by a statistic of the target.

The default state is R²'s shifted sums (`fmetrics.regression._residual.SquaresSums`:
``n``, the target's shift ``K``, ``sum (t - K)``, ``sum (t - K)^2`` and ``sum (p - t)^2``)
plus the target's ``min`` and ``max``; ``sum t^2 = S2 + K (2 S1 + n K)`` in float64.
``exact=True`` keeps the centred float64 state `NRMSEState`.
"""
from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch

from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _moments, _residual, _shifted
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
    nonfinite: torch.Tensor  # int64 (): entries with a NaN/inf in preds or target


def _merge(a: NRMSEState, b: NRMSEState) -> NRMSEState:
    n, w_b, cross = _moments.weights(a.n, b.n, a.mean.dtype)
    d = b.mean - a.mean
    return NRMSEState(a.sum_squared_error + b.sum_squared_error, n, _moments.merge_mean(a.mean, b.mean, w_b),
                      _moments.merge_comoment(a.m2, b.m2, d, d, cross), torch.minimum(a.min, b.min),
                      torch.maximum(a.max, b.max), a.sum_squares + b.sum_squares, a.nonfinite + b.nonfinite)


class NRMSESums(NamedTuple):
    squares: _residual.SquaresSums  # n, the target's shift K, sum (t - K), sum (t - K)^2, sum (p - t)^2
    min: torch.Tensor  # float64 (D,): the target's minimum
    max: torch.Tensor  # float64 (D,): the target's maximum


def _merge_sums(a: NRMSESums, b: NRMSESums) -> NRMSESums:
    return NRMSESums(_shifted.merge(a.squares, b.squares), torch.minimum(a.min, b.min), torch.maximum(a.max, b.max))


WIDE = 64  # columns of a row-folded view: a min/max over dim 0 of fewer columns is not vectorized


def _extremes(t: torch.Tensor) -> tuple:
    """Per-column ``(min, max)`` of ``(N, D)`` ``t``. On a large batch ``k`` rows (a power of 2 dividing ``N``, up
    to ``WIDE / D``) are folded into one row of ``k D`` columns first: ~17 against ~140 µs at 4096x16 on CPU
    (under ``torch.compile``, where the size may be symbolic, the plain reduction)."""
    n, d = t.shape
    large = n * d >= 4096 and not torch.compiler.is_compiling()
    k = math.gcd(n, 1 << max(WIDE // d, 1).bit_length() - 1) if large else 1
    if k == 1:
        return torch.aminmax(t, dim=0)
    wide = t.reshape(n // k, k * d)
    return wide.amin(0).reshape(k, d).amin(0), wide.amax(0).reshape(k, d).amax(0)


def _shifted_family(num_outputs: int, nan_strategy: str, name: str) -> Family:
    """The default state: shifted sums (`_shifted`, layout ``"r2"``) with the batch in the inputs' dtype."""
    mode = _inputs.nan_mode(nan_strategy)

    def init():
        zero = torch.zeros(num_outputs, dtype=accum_dtype())
        return NRMSESums(_shifted.init(_residual.SquaresSums, num_outputs, "r2", zero.dtype),
                         torch.full_like(zero, float("inf")), torch.full_like(zero, -float("inf")))

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=True)
        t = _inputs.columns(name, target, num_outputs, flatten=True)
        squares = _shifted.update(state.squares, t, p, layout="r2", mode=mode, name=name, raw=(preds, target))
        if t.shape[0] == 0:
            return state._replace(squares=squares)
        if mode == "drop":  # the extremes of the rows kept
            keep = (_inputs.row_weights(p) * _inputs.row_weights(t))[:, None] > 0
            lo = _extremes(torch.where(keep, t, float("inf")))[0]
            hi = _extremes(torch.where(keep, t, -float("inf")))[1]
        else:
            lo, hi = _extremes(t)
        return NRMSESums(squares, torch.minimum(state.min, lo), torch.maximum(state.max, hi))

    return Family(name="regression.nrmse_sums", key=(num_outputs, mode), init=init, update=update,
                  reductions=NRMSESums(squares=None, min="min", max="max"), merge=_merge_sums)


def _view(state) -> NRMSEState:
    """The `NRMSEState` of a default state (``nonfinite`` unused: 0)."""
    if isinstance(state, NRMSEState):
        return state
    sq = state.squares
    c = _residual.centred(sq)
    n, k, sums = sq.n, sq.shift[0], sq.sums
    sum_squares = sums[1] + k * (2 * sums[0] + n * k)
    return NRMSEState(sums[2], n, c.mean[0], c.m2[0], state.min, state.max, sum_squares,
                      torch.zeros((), dtype=torch.int64))


def family(num_outputs: int, nan_strategy: str, name: str, exact: bool = False) -> Family:
    """One state for the four normalizations (rows with a NaN/inf are left out unless ``"disable"``): shifted
    sums, or with ``exact`` the centred `NRMSEState` with float64 batch arithmetic."""
    _inputs.check_num_outputs(name, num_outputs)
    _inputs.check_nan_strategy(name, nan_strategy)
    if not exact:
        return _shifted_family(num_outputs, nan_strategy, name)
    drop = nan_strategy != "disable"

    def init():
        zero = torch.zeros(num_outputs, dtype=accum_dtype())
        inf = torch.full((num_outputs,), float("inf"), dtype=zero.dtype)
        return NRMSEState(zero, torch.zeros((), dtype=torch.int64), zero.clone(), zero.clone(), inf, -inf,
                          zero.clone(), torch.zeros((), dtype=torch.int64))

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=True)
        t = _inputs.columns(name, target, num_outputs, flatten=True)
        d = _inputs.difference(p, t, state.mean)
        t64 = t.to(state.mean.dtype, copy=True)
        nonfinite, rows = state.nonfinite, _moments.batch_count(t)
        if drop:  # rows with a NaN/inf anywhere are left out (weight 0)
            nonfinite = nonfinite + _inputs.nonfinite_columns(torch.cat((p.to(t64.dtype), t64), 1)).sum()
            w = (_inputs.row_weights(d) * _inputs.row_weights(t64))[:, None]
            d = torch.nan_to_num(d, nan=0.0, posinf=0.0, neginf=0.0).mul_(w)
            t64 = torch.nan_to_num(t64, nan=0.0, posinf=0.0, neginf=0.0)
            rows = w.sum().to(torch.int64)
            mean = (t64 * w).sum(0) / torch.clamp(rows, min=1)
            c = (t64 - mean).mul_(w)
            lo = _extremes(torch.where(w > 0, t64, float("inf")))[0] if t.shape[0] else state.min
            hi = _extremes(torch.where(w > 0, t64, -float("inf")))[1] if t.shape[0] else state.max
            t64 = t64 * w
        else:
            mean, c = _moments.centre_(t64.clone())
            lo, hi = _extremes(t64) if t.shape[0] else (state.min, state.max)
        sse = _inputs.square(d).sum(0)
        batch = NRMSEState(sse, rows, mean, _inputs.square(c).sum(0), lo, hi, _inputs.square(t64).sum(0),
                           torch.zeros_like(nonfinite))
        return _merge(state._replace(nonfinite=nonfinite), batch)

    tags = NRMSEState(sum_squared_error="sum", n=None, mean=None, m2=None, min="min", max="max", sum_squares="sum",
                      nonfinite="sum")
    return Family(name="regression.nrmse", key=(num_outputs, drop), init=init, update=update, reductions=tags,
                  merge=_merge, check=_inputs.finite_check(name) if nan_strategy == "error" else None)


@factory
def normalized_root_mean_squared_error(*, normalization: Literal["mean", "range", "std", "l2"] = "mean",
                                       num_outputs: int = 1,
                                       nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error",
                                       exact: bool = False) -> Metric:
    """NRMSE ``sqrt(1/n sum (p - t)^2) / s(t)`` for a statistic ``s`` of the target.

    All four normalizations share one state (a `fmetrics.Family`). A zero
    ``s`` -- a constant target for ``"std"`` and ``"range"`` -- gives ``inf``
    (``NaN`` when the error is 0 too), as torchmetrics, however the data is
    split: a standard deviation that is zero up to the rounding of the mean
    (``sqrt(M2 / n) <= 64 eps |mean|``) counts as zero. Sums are float64 sums of
    values shifted near the data (`fmetrics.regression._shifted`), so offset
    data keep their precision.

    Args:
      normalization: ``"mean"`` (default: the target mean), ``"range"``
        (``max - min``), ``"std"`` (the population standard deviation,
        from the float64 sums) or ``"l2"`` (``sqrt(sum t^2)``).
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``/``"ignore"`` (the row is left out) or ``"disable"``
        (propagate).
      exact: ``False`` (default): a batch is shifted, squared and summed in
        the inputs' float32 / float64 dtype into float64 shifted sums (as
        fast as torchmetrics' raw sums; within 1e-6 relative of a float64
        reference on float32 data offset by 1e4). ``True``: float64
        arithmetic per element, within 1e-9 (docs/regression.md, "Precision").

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 tensor, 0-d or ``(num_outputs,)``; NaN with a warning on no data.

    Example::

        >>> m = fmetrics.normalized_root_mean_squared_error(normalization="range")
        >>> m(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 1.]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "normalized_root_mean_squared_error"
    _inputs.check_choice(name, "normalization", normalization, NORMALIZATIONS)
    _inputs.check_bool(name, "exact", exact)
    fam = family(num_outputs, nan_strategy, name, exact)

    def finish(state):
        if isinstance(state, NRMSEState):
            _inputs.report_count(name, nan_strategy, state.nonfinite)
        else:
            _inputs.report_invalid(name, nan_strategy, state.squares.invalid)
        state = _view(state)
        if _inputs.empty(name, state.n):
            return torch.full((), float("nan"), dtype=state.mean.dtype) if num_outputs == 1 else \
                torch.full_like(state.mean, float("nan"))
        rmse = torch.sqrt(state.sum_squared_error / state.n)
        if normalization == "mean":
            denom = state.mean
        elif normalization == "range":
            denom = state.max - state.min
        elif normalization == "std":
            constant = _moments.degenerate(torch.clamp(state.n, min=2), state.mean, state.m2)
            denom = torch.where(constant, 0.0, torch.sqrt(state.m2 / state.n))
        else:
            denom = torch.sqrt(state.sum_squares)
        value = rmse / denom
        return value[0] if num_outputs == 1 else value

    return fam.metric(name, finish, higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
