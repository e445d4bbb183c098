"""The concatenating state of the rank correlations (`spearman_corrcoef`, `kendall_rank_corrcoef`).

``update`` appends copies of the batch's ``(N, D)`` preds and target as chunks
(O(1) per batch, no host sync, never the caller's buffers). Both metrics with
one ``num_outputs`` are one `fmetrics.Family` state, so a collection of them
keeps one copy of the data. The shared step does not join the chunks (that
would copy the whole state): it finds the NaN/inf chunk by chunk, and each
finalizer reads the chunks (`chunks`) or joins them itself (`data`).

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
    preds: tuple  # the state's (N_i, D) chunks, not joined
    target: tuple
    invalid: validation.Invalid  # non-finite entries, their first value and update call
    width: int  # D (num_outputs)


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
        return Joined(state.preds, state.target, _invalid(state.preds, state.target), num_outputs)

    tags = PairsState(preds="cat", target="cat")
    return Family(name="regression.pairs", key=(num_outputs,), init=init, update=update, reductions=tags,
                  shared=shared, check=_inputs.finite_check(name) if check else None)


def _invalid(px: tuple, py: tuple) -> validation.Invalid:
    """The NaN/inf record of the chunks: one count per chunk, read in one host read (no joined copy)."""
    inv = validation.invalid_init()
    if not sum(c.numel() for c in px):
        return inv
    counts = torch.stack([_nonfinite(x, y).sum() for x, y in zip(px, py)]).cpu()
    count = int(counts.sum())
    if not count:
        return inv._replace(calls=torch.tensor(len(px)))
    call = int(torch.nonzero(counts)[0, 0])
    x, y = px[call], py[call]
    row, col = (int(v) for v in torch.nonzero(_nonfinite(x, y))[0])
    first = x[row, col] if not bool(torch.isfinite(x[row, col])) else y[row, col]
    return validation.Invalid(torch.tensor(count), first.double().cpu(), torch.tensor(call + 1), torch.tensor(len(px)))


def _nonfinite(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ~(torch.isfinite(x) & torch.isfinite(y))


def chunks(name: str, joined: Joined, nan_strategy: str):
    """``(preds, target)`` chunk tuples for a finalizer, after the NaN/inf report of ``nan_strategy``.

    ``"warn"``/``"ignore"`` leave out the rows holding NaN/inf: only the chunks
    that hold some are copied (filtered); the others are the state's own.
    """
    _inputs.report_invalid(name, nan_strategy, joined.invalid)
    xs, ys = joined.preds, joined.target
    if nan_strategy not in ("warn", "ignore") or not int(joined.invalid.count):
        return xs, ys
    pairs = [_finite_rows(x, y) for x, y in zip(xs, ys)]
    return tuple(x for x, _ in pairs), tuple(y for _, y in pairs)


def _finite_rows(x: torch.Tensor, y: torch.Tensor):
    bad = _nonfinite(x, y).any(1)
    if not bool(bad.any()):
        return x, y
    return x[~bad], y[~bad]


def data(name: str, joined: Joined, nan_strategy: str):
    """``(preds, target)`` joined ``(N, D)`` for a finalizer, after the NaN/inf report of ``nan_strategy``."""
    return join(*chunks(name, joined, nan_strategy), joined.width)


def join(xs: tuple, ys: tuple, width: int):
    """The chunks of `chunks` joined: ``(N, D)`` preds and target (a copy of the state when it has several)."""
    empty = torch.empty(0, width)
    return cat_chunks(xs, empty), cat_chunks(ys, empty)


def nan_columns(joined: Joined, xs: tuple, ys: tuple) -> torch.Tensor:
    """Bool ``(D,)`` on the chunks' device: the columns of the `chunks` ``xs``, ``ys`` holding a NaN.

    Only looked for when the record counts non-finite entries.
    """
    nan = torch.zeros(joined.width, dtype=torch.bool, device=xs[0].device if xs else None)
    if int(joined.invalid.count):
        for c in xs + ys:
            nan |= torch.isnan(c).any(0)
    return nan
