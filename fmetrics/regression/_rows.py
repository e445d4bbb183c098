"""The state of metrics that reduce one value per row (cosine similarity, KL and JS divergence).

``reduction="sum"`` / ``"mean"`` keep a float64 sum and a count (sum-mergeable);
``"none"`` / ``None`` keep the per-row values as chunks, joined in `finalize`.
Rows breaking a value rule are dropped from the sum (NaN in the ``"none"``
output) and counted; `finalize` raises, warns or ignores per ``on_invalid``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.state import accum_dtype, cat_chunks, merge_fields

REDUCTIONS = ("mean", "sum", "none", None)


class RowState(NamedTuple):
    total: torch.Tensor  # float64 (): sum of kept row values
    count: torch.Tensor  # int64 (): kept rows
    invalid: torch.Tensor  # int64 (): rows that broke the value rule
    rows: tuple  # per-row values (reduction "none" only), joined in finalize


def row_metric(name: str, fn: Callable, reduction, key: tuple, names=("preds", "target"),
               rule: Optional[tuple] = None, on_invalid: str = "error") -> Metric:
    """``fn(a, b)`` maps float64 ``(N, D)`` inputs to ``(N,)`` row values; ``rule = (text, valid(a, b) -> (N,))``."""
    _inputs.check_choice(name, "reduction", reduction, REDUCTIONS)
    _inputs.check_policy(name, on_invalid)
    keep_rows = reduction in ("none", None)

    def init():
        return RowState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64),
                        torch.zeros((), dtype=torch.int64), ())

    def update(state, a, b):
        a, b = _inputs.pair(name, a, b, names)
        if a.dim() != 2:
            raise validation.fail(name, names[0], "a 2-d tensor (N, D)", f"shape {tuple(a.shape)}")
        a, b = _inputs.as_acc(a, state.total), _inputs.as_acc(b, state.total)
        values = fn(a, b)
        ok = rule[1](a, b) if rule is not None else torch.ones_like(values, dtype=torch.bool)
        kept = torch.where(ok, values, torch.nan)
        return RowState(state.total + torch.where(ok, values, 0).sum(), state.count + ok.sum(dtype=torch.int64),
                        state.invalid + validation.count(~ok), state.rows + ((kept,) if keep_rows else ()))

    def finalize(state):
        if rule is not None:
            validation.report(name, {f"{rule[0]} (the rows were dropped)": state.invalid}, on_invalid)
        if keep_rows:
            return cat_chunks(state.rows, torch.empty(0, dtype=state.total.dtype))
        return state.total if reduction == "sum" else state.total / state.count

    tags = RowState(total="sum", count="sum", invalid="sum", rows="cat")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=(f"regression.{name}", *key, keep_rows), reductions=tags)
