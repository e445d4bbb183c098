"""Builder for metrics that average a per-element error: ``mean_i f(preds_i, target_i)``.

MSE, MAE, MSLE, MAPE, SMAPE, log-cosh and Tweedie deviance are all
``total / count`` over a sum-mergeable state (float64 sums of non-negative
terms: no cancellation, so plain sums are exact enough). A value rule
(``preds >= 0`` for MSLE, ...) drops the entries that break it and counts
them; `finalize` raises (``on_invalid="error"``), warns or ignores, and the
kept entries are never lost: ``fm.mean_squared_log_error(on_invalid="ignore")``
finalizes the same state over the valid entries.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.state import accum_dtype, merge_fields


class ElementwiseState(NamedTuple):
    total: torch.Tensor  # float64 (D,): sum of f over kept entries
    count: torch.Tensor  # int64 (D,): kept entries per output
    invalid: torch.Tensor  # int64 (): entries that broke the value rule (dropped)


Rule = tuple  # (description, valid(preds, target) -> bool mask)


def elementwise_mean(
    name: str,
    fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    num_outputs: int,
    key: tuple,
    rule: Optional[Rule] = None,
    on_invalid: str = "error",
    post: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
) -> Metric:
    """``post(sum f(p, t) / n)`` per output.

    ``fn(d, p, t)`` gets ``d = p - t`` as a fresh float64 ``(N, D)`` buffer it may
    overwrite (in-place ops keep large CPU batches free of extra temporaries)
    and the ``(N, D)`` inputs in their own dtype (cast them with `as_acc`).

    With ``num_outputs == 1`` every element is a sample and the value is 0-d;
    otherwise inputs are ``(N, num_outputs)`` and the value is ``(num_outputs,)``.
    ``key`` names the state (equal keys share one state in a collection).
    """
    _inputs.check_num_outputs(name, num_outputs)
    _inputs.check_policy(name, on_invalid)

    def init():
        acc = accum_dtype()
        return ElementwiseState(torch.zeros(num_outputs, dtype=acc), torch.zeros(num_outputs, dtype=torch.int64),
                                torch.zeros((), dtype=torch.int64))

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p = _inputs.columns(name, preds, num_outputs, flatten=True)
        t = _inputs.columns(name, target, num_outputs, flatten=True)
        values = fn(_inputs.difference(p, t, state.total), p, t)
        if rule is None:
            return ElementwiseState(state.total + values.sum(0), state.count + p.shape[0], state.invalid)
        ok = rule[1](p, t)
        return ElementwiseState(
            state.total + torch.where(ok, values, 0).sum(0),
            state.count + ok.sum(0, dtype=torch.int64),
            state.invalid + validation.count(~ok),
        )

    def finalize(state):
        if rule is not None:
            validation.report(name, {f"{rule[0]} (the entries were dropped)": state.invalid}, on_invalid)
        value = state.total / state.count
        value = value if post is None else post(value)
        return value[0] if num_outputs == 1 else value

    tags = ElementwiseState(total="sum", count="sum", invalid="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("regression.elementwise", *key, num_outputs), reductions=tags)
