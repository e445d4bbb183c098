"""The state of metrics that reduce one value per row (cosine similarity, KL and JS divergence).

``reduction="sum"`` / ``"mean"`` keep a float64 sum and a count (sum-mergeable);
``"none"`` / ``None`` keep the per-row values as chunks, joined in `finalize`.
Rows breaking a value rule are left out of the sum (NaN in the ``"none"``
output) and counted; `finalize` raises, warns or ignores per ``on_invalid``.
Rows with a NaN/inf entry are counted and left out likewise, reported per
``nan_strategy`` (docs/regression.md).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.state import accum_dtype, cat_chunks

REDUCTIONS = ("mean", "sum", "none", None)


class RowState(NamedTuple):
    total: torch.Tensor  # float64 (): sum of counted row values
    count: torch.Tensor  # int64 (): counted rows
    invalid: torch.Tensor  # int64 (): finite rows that broke the value rule (left out)
    nonfinite: torch.Tensor  # int64 (): rows with a NaN/inf entry (left out unless nan_strategy="disable")
    rows: tuple  # per-row values (reduction "none" only), joined in finalize


def row_metric(name: str, fn: Callable, reduction, key: tuple, names=("preds", "target"),
               rule: Optional[tuple] = None, on_invalid: str = "error", nan_strategy: str = "error",
               **metadata) -> Metric:
    """``fn(a, b)`` maps float64 ``(N, D)`` inputs to ``(N,)`` row values; ``rule = (text, valid(a, b) -> (N,))``.

    The state is a `fmetrics.Family` keyed by ``key``, whether rows are kept
    (``reduction="none"``) and whether NaN/inf rows are left out.
    """
    _inputs.check_choice(name, "reduction", reduction, REDUCTIONS)
    _inputs.check_policy(name, on_invalid)
    _inputs.check_nan_strategy(name, nan_strategy)
    keep_rows = reduction in ("none", None)
    disable = nan_strategy == "disable"

    def init():
        z = torch.zeros((), dtype=torch.int64)
        return RowState(torch.zeros((), dtype=accum_dtype()), z, z.clone(), z.clone(), ())

    def update(state, a, b):
        a, b = _inputs.pair(name, a, b, names)
        if a.dim() != 2:
            raise validation.fail(name, names[0], "a 2-d tensor (N, D)", f"shape {tuple(a.shape)}")
        a, b = _inputs.as_acc(a, state.total), _inputs.as_acc(b, state.total)
        finite = torch.ones(a.shape[0], dtype=torch.bool, device=a.device) if disable else \
            (torch.isfinite(a) & torch.isfinite(b)).all(-1)
        values = fn(a, b)
        ok = finite if rule is None else finite & rule[1](a, b)
        kept = torch.where(ok, values, torch.nan)
        return RowState(state.total + torch.where(ok, values, 0).sum(), state.count + ok.sum(dtype=torch.int64),
                        state.invalid + validation.count(finite & ~ok), state.nonfinite + validation.count(~finite),
                        (kept,) if keep_rows else ())

    def finish(state):
        _inputs.report_count(name, nan_strategy, state.nonfinite)
        if rule is not None:
            validation.report(name, {rule[0]: state.invalid}, on_invalid)
        if keep_rows:
            return cat_chunks(state.rows, torch.empty(0, dtype=state.total.dtype))
        if reduction == "sum":
            return state.total
        if _inputs.empty(name, state.count):
            return torch.full_like(state.total, float("nan"))
        return state.total / state.count

    tags = RowState(total="sum", count="sum", invalid="sum", nonfinite="sum", rows="cat")
    fam = Family(name=f"regression.{name}", key=(*key, keep_rows, disable), init=init, update=update,
                 reductions=tags, check=_inputs.finite_check(name, names) if nan_strategy == "error" else None)
    return fam.metric(name, finish, **metadata)
