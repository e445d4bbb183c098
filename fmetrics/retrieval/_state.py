"""The state every retrieval metric shares: the rows seen, as chunks, plus value-rule counts.

``update(state, preds, target, indexes)`` appends one chunk per argument (O(1),
no host sync); grouping by query happens once, in `finalize` (see `_ranking`).
All retrieval metrics with the same ``ignore_index`` have the same state key,
so a `fmetrics.collection` of them runs one update per batch.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.state import merge_fields


class RetrievalState(NamedTuple):
    preds: tuple  # float chunks, flattened
    target: tuple  # bool / integer / float chunks, flattened
    indexes: tuple  # int64 chunks, flattened
    negative_indexes: torch.Tensor  # int64: rows with a query id < 0
    non_binary_targets: torch.Tensor  # int64: kept rows whose target is not 0 or 1
    nan_preds: torch.Tensor  # int64: rows whose score is NaN


TAGS = RetrievalState(preds="cat", target="cat", indexes="cat",
                      negative_indexes="sum", non_binary_targets="sum", nan_preds="sum")
merge = merge_fields(TAGS)


def state_key(ignore_index: Optional[int]) -> tuple:
    return ("retrieval", ignore_index)


def init() -> RetrievalState:
    zero = torch.zeros((), dtype=torch.int64)
    return RetrievalState((), (), (), zero, zero.clone(), zero.clone())


def _check_inputs(name: str, preds, target, indexes) -> None:
    if indexes is None:
        raise validation.fail(name, "indexes", "a tensor of query ids, one per row of `preds`", "None")
    for arg, x in (("preds", preds), ("target", target), ("indexes", indexes)):
        if not isinstance(x, torch.Tensor):
            raise validation.fail(name, arg, "a tensor", type(x).__name__)
    if not preds.is_floating_point():
        raise validation.fail(name, "preds", "a floating point tensor of scores", f"dtype {preds.dtype}")
    if target.is_complex():
        raise validation.fail(name, "target", "a bool, integer or float tensor", f"dtype {target.dtype}")
    if indexes.is_floating_point() or indexes.is_complex() or indexes.dtype == torch.bool:
        raise validation.fail(name, "indexes", "an integer tensor of query ids", f"dtype {indexes.dtype}")
    if not (preds.shape == target.shape == indexes.shape):
        raise validation.fail(name, "indexes", "`preds`, `target` and `indexes` of the same shape",
                              f"{tuple(preds.shape)}, {tuple(target.shape)} and {tuple(indexes.shape)}")


def _non_binary(t: torch.Tensor, ignore_index: Optional[int]) -> torch.Tensor:
    """Nonzero where a target is not 0 or 1 (nor ``ignore_index``).

    Integer targets take one op, ``t >> 1`` (0 exactly for 0 and 1; negative
    values stay negative): ~2.5x faster than two comparisons on a 10^4-row batch.
    """
    if t.dtype == torch.bool:
        out = torch.zeros_like(t)
    elif t.is_floating_point():
        out = (t != 0) & (t != 1)
    else:
        out = t >> 1
    return out if ignore_index is None else (out != 0) & (t != ignore_index)


def make_update(name: str, ignore_index: Optional[int]):
    """``update(state, preds, target, indexes)``: checks metadata eagerly, counts value rules."""

    def update(state: RetrievalState, preds, target, indexes=None) -> RetrievalState:
        _check_inputs(name, preds, target, indexes)
        p = preds.detach().reshape(-1)
        t = target.detach().reshape(-1)
        q = indexes.detach().reshape(-1).to(torch.int64)
        return RetrievalState(
            state.preds + (p,),
            state.target + (t,),
            state.indexes + (q,),
            state.negative_indexes + torch.count_nonzero(q < 0),
            state.non_binary_targets + torch.count_nonzero(_non_binary(t, ignore_index)),
            state.nan_preds + torch.count_nonzero(torch.isnan(p)),
        )

    return update


def report(name: str, state: RetrievalState, binary: bool) -> None:
    """Raises for broken value rules (graded metrics accept any target value)."""
    counts = {
        "`indexes` (query ids) must be >= 0": state.negative_indexes,
        "`preds` must not be NaN": state.nan_preds,
    }
    if binary:
        counts["`target` must be binary (0 or 1) for this metric"] = state.non_binary_targets
    validation.report(name, counts, "error")
