"""The concatenating state of the rank correlations (`spearman_corrcoef`, `kendall_rank_corrcoef`).

``update`` appends copies of the batch's ``(N, D)`` preds and target as chunks
(O(1) per batch, no host sync, never the caller's buffers); the finalizers
join them once and rank there. Both metrics with one ``num_outputs`` are one
`fmetrics.Family` state, so a collection of them keeps one copy of the data
and joins it once (the family's shared step).

NaN/inf (docs/regression.md) are found in the shared step, where the data is
all there: ``"error"`` raises naming the count, the first value and its update
call (on CPU the eager check raised earlier); ``"warn"``/``"ignore"`` leave the
rows holding them out; ``"disable"`` keeps them (the coefficient is NaN).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.regression import _inputs
from fmetrics.state import cat_chunks


class PairsState(NamedTuple):
    preds: tuple  # (N_i, D) chunks (copies), joined in finalize
    target: tuple  # (N_i, D) chunks


class Joined(NamedTuple):
    preds: torch.Tensor  # (N, D)
    target: torch.Tensor  # (N, D)
    invalid: validation.Invalid  # non-finite entries, their first value and update call


def family(num_outputs: int, name: str, check: bool) -> Family:
    _inputs.check_num_outputs(name, num_outputs)

    def init():
        return PairsState((), ())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        x = _inputs.columns(name, preds, num_outputs, flatten=False)
        y = _inputs.columns(name, target, num_outputs, flatten=False)
        return PairsState((x.detach().clone(),), (y.detach().clone(),))

    def shared(state):
        empty = torch.empty(0, num_outputs)
        x, y = cat_chunks(state.preds, empty), cat_chunks(state.target, empty)
        return Joined(x, y, _invalid(state.preds, state.target, x, y))

    tags = PairsState(preds="cat", target="cat")
    return Family(name="regression.pairs", key=(num_outputs,), init=init, update=update, reductions=tags,
                  shared=shared, check=_inputs.finite_check(name) if check else None)


def _invalid(px: tuple, py: tuple, x: torch.Tensor, y: torch.Tensor) -> validation.Invalid:
    inv = validation.invalid_init()
    if not x.numel():
        return inv
    bad = ~(torch.isfinite(x) & torch.isfinite(y))
    count = int(bad.sum())
    if not count:
        return inv._replace(calls=torch.tensor(len(px)))
    row, col = (int(v) for v in torch.nonzero(bad)[0])
    first = x[row, col] if not bool(torch.isfinite(x[row, col])) else y[row, col]
    ends = torch.cumsum(torch.tensor([c.shape[0] for c in px]), 0)
    call = int(torch.searchsorted(ends, torch.tensor(row), right=True)) + 1
    return validation.Invalid(torch.tensor(count), first.double().cpu(), torch.tensor(call), torch.tensor(len(px)))


def data(name: str, joined: Joined, nan_strategy: str):
    """``(preds, target)`` for a finalizer, after the NaN/inf report of ``nan_strategy``."""
    _inputs.report_invalid(name, nan_strategy, joined.invalid)
    x, y = joined.preds, joined.target
    if nan_strategy in ("warn", "ignore") and int(joined.invalid.count):
        keep = (torch.isfinite(x) & torch.isfinite(y)).all(1)
        x, y = x[keep], y[keep]
    return x, y
