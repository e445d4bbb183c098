"""Shared construction of retrieval metrics: configuration checks, empty queries, aggregation.

A retrieval metric is one function ``Ranking -> per-query values``; this module
wraps it with the shared state (`_state`), the cached grouping (`_ranking`),
``empty_target_action`` and ``aggregation``.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.retrieval import _state
from fmetrics.retrieval._ranking import Ranking, ranking

EMPTY_ACTIONS = ("neg", "pos", "skip", "error")
AGGREGATIONS = ("mean", "median", "min", "max", "none")


def check_top_k(name: str, top_k, arg: str = "top_k") -> None:
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0):
        raise validation.fail(name, arg, "a positive int or None", repr(top_k))


def check_flag(name: str, arg: str, value) -> None:
    if not isinstance(value, bool):
        raise validation.fail(name, arg, "a bool", repr(value))


def check_common(name: str, empty_target_action, ignore_index, aggregation) -> None:
    validation.check_policy(name, "empty_target_action", empty_target_action, EMPTY_ACTIONS)
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
        raise validation.fail(name, "ignore_index", "an int or None", repr(ignore_index))
    if not (callable(aggregation) or aggregation in AGGREGATIONS):
        raise validation.fail(name, "aggregation", f"one of {AGGREGATIONS} or a callable", repr(aggregation))


def handle_empty(name: str, values: torch.Tensor, empty: torch.Tensor, action: str, what: str) -> torch.Tensor:
    """Applies ``empty_target_action`` to per-query ``values`` (rows of queries flagged ``empty``).

    ``skip`` marks them NaN (dropped by `aggregate`).
    """
    if action == "error":
        n = int(empty.sum())
        if n:
            raise ValueError(f"{name}: {n} of {empty.shape[0]} queries had no {what} "
                             f"(empty_target_action='error')")
        return values
    fill = {"neg": 0.0, "pos": 1.0, "skip": float("nan")}[action]
    mask = empty.reshape(empty.shape + (1,) * (values.dim() - 1))
    return torch.where(mask, torch.full_like(values, fill), values)


def aggregate(values: torch.Tensor, skipped: torch.Tensor, aggregation):
    """Reduces per-query values (dim 0) after dropping ``skipped`` queries; 0.0 when none remain.

    ``aggregation="none"`` returns the per-query values (NaN for skipped queries).
    """
    if aggregation == "none":
        return values
    values = values[~skipped]
    if values.shape[0] == 0:
        return torch.zeros(values.shape[1:], dtype=values.dtype, device=values.device)
    if callable(aggregation):
        return aggregation(values, dim=0)
    if aggregation == "mean":
        return values.mean(dim=0)
    return getattr(torch, aggregation)(values, dim=0).values


def build(
    name: str,
    per_query: Callable[[Ranking], torch.Tensor],
    *,
    empty_target_action: str,
    ignore_index: Optional[int],
    aggregation,
    binary: bool = True,
    empty_when: str = "relevant",
) -> Metric:
    """A retrieval `Metric` from ``per_query(ranking) -> values`` (float64, one per query).

    ``empty_when``: which queries ``empty_target_action`` applies to, those with no
    ``"relevant"`` row (most metrics) or no ``"non-relevant"`` row (fall-out).
    """
    check_common(name, empty_target_action, ignore_index, aggregation)

    def finalize(state):
        _state.report(name, state, binary)
        r = ranking(state, ignore_index)
        empty = empty_rows(r, empty_when)
        values = handle_empty(name, per_query(r), empty, empty_target_action, f"{empty_when} document")
        return aggregate(values, empty & (empty_target_action == "skip"), aggregation)

    return make(name, finalize, ignore_index)


def empty_rows(r: Ranking, empty_when: str) -> torch.Tensor:
    if empty_when == "relevant":
        return r.num_relevant == 0
    return r.num_relevant == r.sizes


def make(name: str, finalize, ignore_index: Optional[int]) -> Metric:
    return Metric(init=_state.init, update=_state.make_update(name, ignore_index), merge=_state.merge,
                  finalize=finalize, name=name, state_key=_state.state_key(ignore_index), reductions=_state.TAGS)


def cutoff(r: Ranking, top_k: Optional[int]):
    """Per row: inside the top ``top_k`` of its query (``True`` for all rows when ``top_k`` is None)."""
    return True if top_k is None else r.rank < top_k


def ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """float64 ``num / den``, 0 where ``den == 0``."""
    num, den = num.to(torch.float64), den.to(torch.float64)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(num))
