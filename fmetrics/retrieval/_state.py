"""The state every retrieval metric shares: the rows seen, as chunks, plus the value-rule records.

``update(state, preds, target, indexes)`` appends one chunk per argument (O(1),
no host sync; the chunks are copies, so a refilled input buffer never changes
the state); grouping by query happens once, in the family's shared step
(`fmetrics.retrieval._base`). All retrieval metrics with one ``ignore_index``
have one state key, so a `fmetrics.collection` of them runs one update per
batch and ranks once.

Value rules (docs/retrieval.md, "Invalid input"): every metric needs query ids
``>= 0``, scores that are not NaN and relevance targets that are finite and
``>= 0``; the binary-relevance metrics (all but NDCG) also need targets in
``{0, 1}``. Rows whose target equals ``ignore_index`` are exempt. On CPU in
eager mode ``check`` raises at once, quoting the offending values; otherwise
`update` records them (`fmetrics.validation.Invalid`: count, first value,
update call) and `finalize` raises naming the first one.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.validation import Invalid, invalid_flag, invalid_init, invalid_merge


class RetrievalState(NamedTuple):
    preds: tuple  # float chunks, flattened (copies of the inputs)
    target: tuple  # bool / integer / float chunks, flattened
    indexes: tuple  # int64 chunks, flattened
    bad_index: Invalid  # rows with a query id < 0
    bad_pred: Invalid  # rows whose score is NaN
    bad_target: Invalid  # rows whose target is negative, infinite or NaN (ignored rows exempt)
    non_binary: Invalid  # rows whose target is not 0 or 1 (ignored rows exempt); binary metrics only


RULE_INDEX = "`indexes` (query ids) must be >= 0"
RULE_PRED = "`preds` must not be NaN"
RULE_TARGET = "`target` (relevance) must be finite and >= 0"
RULE_BINARY = "`target` must be binary (0 or 1) for this metric"

TAGS = RetrievalState(preds="cat", target="cat", indexes="cat",
                      bad_index=None, bad_pred=None, bad_target=None, non_binary=None)


def init() -> RetrievalState:
    return RetrievalState((), (), (), invalid_init(), invalid_init(), invalid_init(), invalid_init())


def merge(a: RetrievalState, b: RetrievalState) -> RetrievalState:
    return RetrievalState(a.preds + b.preds, a.target + b.target, a.indexes + b.indexes,
                          *(invalid_merge(x, y) for x, y in zip(a[3:], b[3:])))


def check_inputs(name: str, preds, target, indexes) -> None:
    """Metadata checks (types, dtypes, shapes): free, so always eager."""
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


def _kept(t: torch.Tensor, ignore_index: Optional[int]):
    """Rows the rules apply to: all, or those whose target is not ``ignore_index``."""
    return None if ignore_index is None else t != ignore_index


def _bad_target(t: torch.Tensor, kept) -> torch.Tensor:
    """Targets that are negative, infinite or NaN."""
    if t.dtype == torch.bool:
        bad = torch.zeros_like(t)
    elif t.is_floating_point():
        bad = ~((t >= 0) & (t < float("inf")))  # NaN fails both comparisons
    else:
        bad = t < 0
    return bad if kept is None else bad & kept


def _non_binary(t: torch.Tensor, kept) -> torch.Tensor:
    """Targets that are not 0 or 1.

    Integer targets take one op, ``t >> 1`` (0 exactly for 0 and 1; negative
    values stay negative): ~2.5x faster than two comparisons on a 10^4-row batch.
    """
    if t.dtype == torch.bool:
        bad = torch.zeros_like(t)
    elif t.is_floating_point():
        bad = (t != 0) & (t != 1)
    else:
        bad = (t >> 1) != 0
    return bad if kept is None else bad & kept


def make_check(name: str, ignore_index: Optional[int], binary: bool):
    """The eager check (CPU tensors, eager mode): raises at once, quoting the offending values.

    A clean batch costs three reductions (query ids' min, the scores' sum for
    NaN, the targets' min and max); the per-row masks are built only when one of
    them fails (or for float / ignored targets, whose rules need them).
    """

    def check(preds, target, indexes=None) -> None:
        check_inputs(name, preds, target, indexes)
        p, t, q = preds.detach().reshape(-1), target.detach().reshape(-1), indexes.detach().reshape(-1)
        if not p.numel() or _clean(p, t, q, ignore_index, binary):
            return
        kept = _kept(t, ignore_index)
        rules = [(RULE_INDEX, q < 0, q), (RULE_PRED, torch.isnan(p), p), (RULE_TARGET, _bad_target(t, kept), t)]
        if binary:
            rules.append((RULE_BINARY, _non_binary(t, kept), t))
        for rule, bad, values in rules:
            if bool(bad.any()):
                raise ValueError(f"{name}: {rule}; found {validation.quote(values[bad])}"
                                 + ("" if ignore_index is None else f" (rows with target {ignore_index} are ignored)"))

    return check


def _clean(p: torch.Tensor, t: torch.Tensor, q: torch.Tensor, ignore_index, binary: bool) -> bool:
    """A batch that breaks no rule, by reductions only (``False``: look closer; integer targets, no ignore_index)."""
    if int(q.min()) < 0 or bool(torch.isnan(p.sum())):  # a NaN score makes the sum NaN (so may inf - inf)
        return False
    if t.dtype == torch.bool:
        return True
    if t.is_floating_point() or ignore_index is not None:
        return False
    low, high = torch.aminmax(t)
    return int(low) >= 0 and (not binary or int(high) <= 1)


def make_update(name: str, ignore_index: Optional[int], binary: bool):
    """``update(state, preds, target, indexes)``: checks metadata eagerly, records the value rules.

    Where the eager check ran (`fmetrics.validation.eager_check_applies`), the
    batch broke none of its rules: only the non-binary record of a graded
    metric's update is still kept (binary members sharing the state report it).
    """

    def update(state: RetrievalState, preds, target, indexes=None) -> RetrievalState:
        check_inputs(name, preds, target, indexes)
        # copies (never views of the caller's buffers) and no autograd graph
        p = preds.detach().reshape(-1).clone()
        t = target.detach().reshape(-1).clone()
        q = indexes.detach().reshape(-1).to(torch.int64, copy=True)
        kept = _kept(t, ignore_index)
        # (`Metric.update` has checked that every input is on the state's device: one input tells)
        if validation.eager_check_applies((preds,), {}):
            # `Metric.update` has just run the eager check on this batch: nothing to record but the call
            records = [_called(inv) for inv in state[3:]]
            if not binary:
                records[3] = _flag_on_host(state.non_binary, _non_binary(t, kept), t)
        else:
            records = (invalid_flag(state.bad_index, q < 0, q),
                       invalid_flag(state.bad_pred, torch.isnan(p), p),
                       invalid_flag(state.bad_target, _bad_target(t, kept), t),
                       invalid_flag(state.non_binary, _non_binary(t, kept), t))
        return RetrievalState(state.preds + (p,), state.target + (t,), state.indexes + (q,), *records)

    return update


def _flag_on_host(inv: Invalid, bad: torch.Tensor, values: torch.Tensor) -> Invalid:
    """`invalid_flag` for eager CPU updates, where reading a count is free: a batch with nothing to
    record, or a record that already has its first value, costs one count instead of ten small ops."""
    n = validation.count(bad)
    if not int(n):
        return _called(inv)
    if int(inv.count):
        return Invalid(inv.count + n, inv.first, inv.call, inv.calls + 1)
    return invalid_flag(inv, bad, values)


def _called(inv: Invalid) -> Invalid:
    """``inv`` after one more update call that broke no rule."""
    return Invalid(inv.count, inv.first, inv.call, inv.calls + 1)


def report(name: str, state: RetrievalState) -> None:
    """Raises in `finalize` for the rules every retrieval metric has (query ids, NaN scores, targets)."""
    for rule, inv in ((RULE_INDEX, state.bad_index), (RULE_PRED, state.bad_pred), (RULE_TARGET, state.bad_target)):
        validation.invalid_report(name, rule, inv)
