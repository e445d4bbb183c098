"""The retrieval family: one state, one shared ranking, one finalizer per metric.

Every retrieval metric is a member of one `fmetrics.Family` per
``ignore_index``: the state (`_state`), its update and merge, and a shared step
that validates the state and ranks its rows once (`Ranked`). A member's value
is ``finish(Ranked)``: its per-query values (``per_query(ranking)``), then
``empty_target_action`` and ``aggregation``. In a `fmetrics.collection`, MAP,
NDCG, MRR, ... over one ``ignore_index`` share one state, one update per batch
and one ranking.
"""
from __future__ import annotations

from typing import Callable, Literal, NamedTuple, Optional, Union

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.retrieval import _state
from fmetrics.retrieval._ranking import Ranking, rank
from fmetrics.validation import Invalid

EmptyAction = Literal["neg", "pos", "skip", "error"]
Aggregation = Union[Literal["mean", "median", "min", "max", "none"], Callable[..., torch.Tensor]]
EMPTY_ACTIONS = ("neg", "pos", "skip", "error")
AGGREGATIONS = ("mean", "median", "min", "max", "none")

# shared docstring pieces (every factory documents its inputs and common options the same way)
INPUTS = """Inputs:
      ``update(state, preds, target, indexes)`` (``indexes`` may be passed by keyword), one row per
      (query, document) pair, any shape (flattened), all three of one shape:

      * ``preds``: float scores (any floating dtype; higher ranks first; NaN is invalid).
      * ``target``: relevance of each row: bool, integer or float, finite and ``>= 0``;
        {binary}
      * ``indexes``: integer query id of each row (``>= 0``): rows with equal ids form one
        query, ranked by ``preds`` within it. A query's rows may arrive over many batches."""
BINARY = "binary (0 or 1) for this metric (graded relevance: `retrieval_normalized_dcg`)."
GRADED = "graded relevance allowed (the target is the gain)."
COMMON_ARGS = """empty_target_action: what a query with no {what} row counts as: ``"neg"`` (0),
        ``"pos"`` (1), ``"skip"`` (left out of the aggregation) or ``"error"`` (raise).
        Default ``"{default}"``.
      ignore_index: rows whose target equals it are dropped before ranking (``None``: keep all).
      aggregation: how per-query values become one: ``"mean"`` (default), ``"median"``,
        ``"min"``, ``"max"``, ``"none"`` (the per-query values, queries in ascending id order,
        NaN for skipped ones) or a callable ``fn(values, dim=0)``."""
RETURNS = """Returns:
      A float64 tensor: 0-d for a scalar aggregation, one value per query for ``"none"``.
      No rows at all: NaN with a warning (docs/retrieval.md)."""


class Ranked(NamedTuple):
    """The shared step's result: the ranking and the record of non-binary targets (binary members check it)."""

    ranking: Ranking
    non_binary: Invalid


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


def family(name: str, ignore_index: Optional[int], binary: bool) -> Family:
    """The retrieval `Family` for ``ignore_index`` (errors name ``name``; ``binary`` adds the eager {0, 1} rule).

    The key is ``(ignore_index,)`` alone: every retrieval metric with one
    ``ignore_index`` shares the state, binary or graded. The binary rule is
    member-specific, so it is part of the eager check of binary members and
    reported by their finalizers, never by the shared step.
    """

    def shared(state) -> Ranked:
        _state.report(name, state)
        return Ranked(rank(state, ignore_index), state.non_binary)

    return Family(name="retrieval", key=(ignore_index,), init=_state.init,
                  update=_state.make_update(name, ignore_index, binary), merge=_state.merge, reductions=_state.TAGS,
                  shared=shared, check=_state.make_check(name, ignore_index, binary))


def member(
    name: str,
    per_query: Callable[[Ranking], torch.Tensor],
    *,
    empty_target_action: str,
    ignore_index: Optional[int],
    aggregation,
    binary: bool = True,
    empty_when: str = "relevant",
    higher_is_better: bool = True,
) -> Metric:
    """A retrieval member `Metric` from ``per_query(ranking) -> values`` (float64, one per query).

    ``empty_when``: which queries ``empty_target_action`` applies to, those with no
    ``"relevant"`` row (most metrics) or no ``"non-relevant"`` row (fall-out).
    """
    check_common(name, empty_target_action, ignore_index, aggregation)

    def finish(ranked: Ranked):
        r = start(name, ranked, binary)
        empty = empty_rows(r, empty_when)
        values = handle_empty(name, per_query(r), empty, empty_target_action, f"{empty_when} document")
        return aggregate(name, values, empty & (empty_target_action == "skip"), aggregation)

    return custom(name, finish, ignore_index, binary, higher_is_better=higher_is_better, bounds=(0.0, 1.0))


def custom(name: str, finish: Callable[[Ranked], object], ignore_index: Optional[int], binary: bool,
           **metadata) -> Metric:
    """A member with its own ``finish(Ranked)`` (curves); ``metadata``: see `fmetrics.Family.metric`."""
    return family(name, ignore_index, binary).metric(name, finish, is_differentiable=False, **metadata)


def start(name: str, ranked: Ranked, binary: bool) -> Ranking:
    """A finalizer's first step: the binary rule (binary members), a warning for empty input; the ranking."""
    if binary:
        validation.invalid_report(name, _state.RULE_BINARY, ranked.non_binary)
    if ranked.ranking.n == 0:
        validation.warn_empty(name, stacklevel=4)
    return ranked.ranking


def empty_rows(r: Ranking, empty_when: str) -> torch.Tensor:
    if empty_when == "relevant":
        return r.num_relevant == 0
    return r.num_relevant == r.sizes


def handle_empty(name: str, values: torch.Tensor, empty: torch.Tensor, action: str, what: str) -> torch.Tensor:
    """Applies ``empty_target_action`` to per-query ``values`` (rows of queries flagged ``empty``).

    ``skip`` marks them NaN (left out by `aggregate`).
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


def aggregate(name: str, values: torch.Tensor, skipped: torch.Tensor, aggregation):
    """Reduces per-query values (dim 0) after leaving out ``skipped`` queries.

    No queries at all (empty input): NaN. Every query skipped: 0.0
    (torchmetrics' value). ``aggregation="none"`` returns the per-query values
    (NaN for skipped queries).
    """
    if aggregation == "none":
        return values
    if values.shape[0] == 0:
        return torch.full(values.shape[1:], float("nan"), dtype=values.dtype, device=values.device)
    values = values[~skipped]
    if values.shape[0] == 0:
        return torch.zeros(values.shape[1:], dtype=values.dtype, device=values.device)
    if callable(aggregation):
        return aggregation(values, dim=0)
    if aggregation == "mean":
        return values.mean(dim=0)
    return getattr(torch, aggregation)(values, dim=0).values


def cutoff(r: Ranking, top_k: Optional[int]):
    """Per row: inside the top ``top_k`` of its query (``True`` for all rows when ``top_k`` is None)."""
    return True if top_k is None else r.rank < top_k


def ratio(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """float64 ``num / den``, 0 where ``den == 0``."""
    num, den = num.to(torch.float64), den.to(torch.float64)
    return torch.where(den > 0, num / den.clamp_min(1e-300), torch.zeros_like(num))


def document(fn):
    """Fills a factory docstring's shared pieces: ``<INPUTS>`` / ``<INPUTS-GRADED>``, ``<COMMON>`` (its
    ``empty_target_action`` / ``ignore_index`` / ``aggregation`` entries; ``<COMMON-FALLOUT>`` for
    fall-out's non-relevant rule) and ``<RETURNS>``. Apply below `fmetrics.factory`."""
    doc = fn.__doc__
    for token, text in (
        ("<INPUTS>", INPUTS.replace("{binary}", BINARY)),
        ("<INPUTS-GRADED>", INPUTS.replace("{binary}", GRADED)),
        ("<COMMON>", COMMON_ARGS.replace("{what}", "relevant").replace("{default}", "neg")),
        ("<COMMON-FALLOUT>", COMMON_ARGS.replace("{what}", "non-relevant").replace("{default}", "pos")),
        ("<RETURNS>", RETURNS),
    ):
        doc = doc.replace(token, text)
    fn.__doc__ = doc
    return fn
