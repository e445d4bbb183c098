"""Families: one state definition, many finalizers.

Accuracy, precision, recall and F1 finalize one stat-scores state; ROC,
AUROC and AP one curve state; MAP, NDCG and MRR one ranked-query state;
MSE, R² and Pearson one moments state. A `Family` declares the state once
(``init``, ``update``, how it merges, its configuration ``key``) and an
optional **shared step** (a sort, a ranking) that its finalizers start from;
`Family.metric` makes one member `Metric` per finalizer. Members of one
family with one configuration have equal state keys, so a
`fmetrics.collection` keeps one state, runs one update per batch and
computes the shared step once for all of them.

Example::

    >>> class Counts(NamedTuple):
    ...     hits: torch.Tensor
    ...     total: torch.Tensor
    >>> fam = Family(name="hits", key=("hits",),
    ...              init=lambda: Counts(torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64)),
    ...              update=lambda s, hit: Counts(s.hits + hit.sum(), s.total + hit.numel()),
    ...              reductions=Counts(hits="sum", total="sum"))
    >>> rate = fam.metric("hit_rate", lambda s: s.hits / s.total)
    >>> misses = fam.metric("misses", lambda s: s.total - s.hits)
    >>> fmetrics.collection({"rate": rate, "misses": misses})(torch.tensor([1, 0, 1, 1]))
    {'rate': tensor(0.7500), 'misses': tensor(1)}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

from fmetrics.metric import Metric
from fmetrics.state import merge_fields

__all__ = ["Family"]


@dataclass(frozen=True)
class Family:
    """One state definition shared by many finalizers.

    Args:
      name: the family's name (in errors and state keys).
      key: hashable configuration of the state: members with equal ``(name,
        key)`` share one state. Include every argument that changes ``init``
        or ``update``, and none that only changes a finalizer.
      init, update: the state definition (see `fmetrics.Metric`).
      reductions: per-field merge tags (``"sum"``, ``"min"``, ``"max"``,
        ``"cat"``, ``None``); the merge is derived from them unless ``merge``
        is given (needed when a field is tagged ``None``).
      merge: the merge, when the tags do not define it.
      shared: optional ``state -> prepared`` step common to the finalizers
        (one sort of a curve state, one ranking of queries); computed once
        per state in a collection.
      check: optional eager value check ``check(*inputs)`` (see `Metric`).
      host_input: ``True`` for a state fed Python data (text).
      weigh_rows: optional closed-form row weighting of the state for the
        wrappers (see `Metric`); a state whose fields all merge by tag does
        not need one.
      host_rows: optional one-row states of a host-input batch in one call (see `Metric`).
    """

    name: str
    key: Hashable
    init: Callable[[], Any]
    update: Callable[..., Any]
    reductions: Any = None
    merge: Optional[Callable[[Any, Any], Any]] = None
    shared: Optional[Callable[[Any], Any]] = None
    check: Optional[Callable[..., None]] = None
    host_input: bool = False
    weigh_rows: Optional[Callable[[Any, Any], Any]] = None
    host_rows: Optional[Callable[..., Any]] = None
    _merge: Callable = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.merge is None and self.reductions is None:
            raise TypeError(f"Family {self.name!r}: give `reductions` or `merge`")
        hash(self.key)
        object.__setattr__(self, "_merge", self.merge or merge_fields(self.reductions))

    @property
    def state_key(self) -> tuple:
        return ("family", self.name, self.key)

    def metric(self, name: str, finish: Callable[[Any], Any], **metadata) -> Metric:
        """The member `Metric` whose value is ``finish(shared(state))`` (``finish(state)`` without a shared step).

        ``metadata``: ``higher_is_better``, ``is_differentiable``, ``bounds``.
        """
        return Metric(init=self.init, update=self.update, merge=self._merge, shared=self.shared, finish=finish,
                      name=name, state_key=self.state_key, reductions=self.reductions, check=self.check,
                      host_input=self.host_input, weigh_rows=self.weigh_rows, host_rows=self.host_rows,
                      **metadata)
