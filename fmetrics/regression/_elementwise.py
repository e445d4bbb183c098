"""The family of metrics that average a per-element error: ``mean_i f(preds_i, target_i)``.

MSE, MAE, MSLE, MAPE, SMAPE, log-cosh and Tweedie deviance are all
``total / count`` over one sum-mergeable state (float64 sums of non-negative
terms: no cancellation, so plain sums are exact enough). `family` declares
that state for one ``f`` as a `fmetrics.Family`; members (MSE and RMSE, or a
metric under several NaN policies) finalize it differently and share it in a
collection.

Bad input (docs/regression.md): entries with a NaN or inf in preds or target
are counted (``nonfinite``); under ``nan_strategy="warn"``/``"ignore"`` they
are left out of the sums, under ``"error"`` `finalize` raises with the count
(on CPU the eager check raises before the state is touched), under
``"disable"`` they propagate. A value rule (``preds >= 0`` for MSLE, ...)
leaves the entries that break it out and counts them (``invalid``);
`finalize` raises, warns or ignores per ``on_invalid``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np
import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.regression import _host, _inputs
from fmetrics.state import accum_dtype


class ElementwiseState(NamedTuple):
    total: torch.Tensor  # float64 (D,): sum of f over counted entries
    count: torch.Tensor  # int64 (D,): counted entries per output
    invalid: torch.Tensor  # int64 (D,): entries that broke the value rule (left out)
    nonfinite: torch.Tensor  # int64 (D,): entries with a NaN/inf in preds or target


TAGS = ElementwiseState(total="sum", count="sum", invalid="sum", nonfinite="sum")

Rule = tuple  # (description, valid(preds, target) -> bool mask)


def family(
    kind: str,
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    num_outputs: int,
    nan_strategy: str,
    rule: Optional[Rule] = None,
    name: str = "",
    exact: bool = True,
    host: bool = False,
    direct: Optional[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = None,
) -> Family:
    """The state ``sum f(p, t)`` and counts per output, for one ``f`` (named ``kind``).

    ``fn(d, p, t)`` gets ``d = p - t`` as a fresh float64 ``(N, D)`` buffer it may
    overwrite (in-place ops keep large CPU batches free of extra temporaries)
    and the ``(N, D)`` inputs in their own dtype (cast them with `as_acc`).
    With ``num_outputs == 1`` every element is a sample. The key holds what
    changes the update: ``kind``, ``num_outputs`` and what happens to
    non-finite entries (counted: ``"error"``; left out: ``"warn"``/``"ignore"``;
    nothing: ``"disable"``), and ``exact``: with ``exact=False`` and float32 / float64 inputs of one
    dtype, ``d`` and ``f`` are computed, and the batch summed, in the inputs' dtype (torchmetrics'
    arithmetic: about 1e-7 relative error in float32), and only the running sums are float64.
    ``host``: small CPU batches take `fmetrics.regression._host`'s path (``f`` of ``d`` alone in torch, the
    float64 sum and the bookkeeping in numpy; without a value rule or ``"warn"``/``"ignore"``).
    ``direct``: ``f(p, t)`` in one pass from the inputs, for CPU batches in eager mode when the batch's
    dtype is the inputs' own (``nan_strategy="error"`` or the numpy path; no value rule, no autograd).
    """
    name = name or kind
    _inputs.check_num_outputs(name, num_outputs)
    _inputs.check_nan_strategy(name, nan_strategy)
    drop = nan_strategy in ("warn", "ignore")
    disable = nan_strategy == "disable"
    host = host and rule is None and not drop

    def init():
        z = torch.zeros(num_outputs, dtype=torch.int64)
        return ElementwiseState(torch.zeros(num_outputs, dtype=accum_dtype()), z, z.clone(), z.clone())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=True)
        t = _inputs.columns(name, target, num_outputs, flatten=True)
        rows = p.shape[0]
        if host and _host.applies(p, t, state.total):
            batch = np.add.reduce(_host.values(p, t, _inputs.work_dtype(state.total.dtype, p, t, exact), fn, direct), 0,
                                  dtype=np.float64)  # f >= 0: no overflow below 1e308
            if not disable:
                _inputs.check_sum(name, ("preds", "target"), batch, preds, target)
            return _fold(state, batch, rows)
        eager = not (disable or drop or _inputs.deferred(preds, target))  # "error", CPU eager: check the sums
        plain = eager and rule is None and not (p.requires_grad or t.requires_grad)  # no autograd graph to keep
        if plain and direct is not None and _inputs.work_dtype(state.total.dtype, p, t, exact) == p.dtype == t.dtype:
            batch = direct(p, t).sum(0)
            _inputs.check_sum(name, ("preds", "target"), batch, preds, target)
            return ElementwiseState(state.total + batch, state.count + rows, state.invalid, state.nonfinite)
        d = _inputs.difference(p, t, state.total, exact)  # non-finite exactly where p or t is
        if disable or eager:
            nonfinite, ones = state.nonfinite, None
        else:
            ones = _inputs.finite_ones(d)
            bad = (rows - torch.nansum(ones, 0)).to(torch.int64)
            nonfinite = state.nonfinite + bad
        if eager and rule is not None:
            _inputs.check_sum(name, ("preds", "target"), d.sum(0), preds, target)
        values = fn(d, p, t)
        if rule is not None:
            ok = rule[1](p, t)
            if ones is not None:
                ok = ok & ~torch.isnan(ones)
            return ElementwiseState(state.total + torch.where(ok, values, 0).sum(0),
                                    state.count + ok.sum(0, dtype=torch.int64),
                                    state.invalid + validation.count(~ok) - (nonfinite - state.nonfinite).sum(),
                                    nonfinite)
        if drop:  # NaN * anything is NaN, and nansum leaves it out
            return ElementwiseState(state.total + torch.nansum(values.mul_(ones), 0), state.count + (rows - bad),
                                    state.invalid, nonfinite)
        batch = values.sum(0)
        if eager:  # f is finite on finite inputs: a non-finite batch sum means a non-finite input
            _inputs.check_sum(name, ("preds", "target"), batch, preds, target)
        return ElementwiseState(state.total + batch, state.count + rows, state.invalid, nonfinite)

    mode = "off" if disable else "drop" if drop else "count"
    return Family(name=f"regression.{kind}", key=(num_outputs, mode, exact), init=init, update=update,
                  reductions=TAGS)


def _fold(state: ElementwiseState, batch: np.ndarray, rows: int) -> ElementwiseState:
    """``state`` plus a small batch's float64 sums ``batch`` (a numpy array: added in numpy) over ``rows`` rows
    (eager CPU, nothing left out; the counts in one torch add); fresh tensors, so no aliasing."""
    return ElementwiseState(torch.from_numpy(state.total.numpy() + batch), state.count + rows, state.invalid,
                            state.nonfinite)


def member(fam: Family, name: str, num_outputs: int, nan_strategy: str, post=None, on_invalid: str = "error",
           rule: Optional[Rule] = None, **metadata) -> Metric:
    """The member ``post(total / count)`` of ``fam`` that reports per ``nan_strategy`` and ``on_invalid``."""
    _inputs.check_policy(name, on_invalid)

    def finish(state):
        _inputs.report_count(name, nan_strategy, state.nonfinite)
        if rule is not None:
            validation.report(name, {rule[0]: state.invalid.sum()}, on_invalid)
        if _inputs.empty(name, state.count):
            value = torch.full_like(state.total, float("nan"))
        else:
            value = state.total / state.count
            value = value if post is None else post(value)
        return value[0] if num_outputs == 1 else value

    return fam.metric(name, finish, **metadata)
