"""The `Metric` record: four pure functions over an immutable state.

A metric is ``init / update / merge / finalize``::

    s = m.init()                 # state: a NamedTuple of tensors (a pytree)
    s = m.update(s, *inputs)     # new state; never mutates s or the inputs
    s = m.merge(s, other)        # state of the union of both data streams
    v = m.finalize(s)            # the value
    v = m(*inputs)               # one shot: finalize(update(init(), *inputs))

Config lives in the factory's closure (as in optax); the record only carries
the functions and a little metadata.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, Optional

import torch

from fmetrics import state as state_lib

__all__ = ["Metric"]


class Metric:
    """A metric as a frozen record of four pure functions.

    Args:
      init: ``() -> state``.
      update: ``(state, *inputs) -> state``; pure and traceable (no host syncs).
      merge: ``(state, state) -> state``; associative, ``init()`` is its identity.
      finalize: ``state -> value`` (a tensor, or a dict/tuple of tensors).
      name: shown in errors and used by collections.
      state_key: hashable description of the state definition and config;
        metrics with equal keys can share one state (see `fmetrics.collection`).
        ``None`` means "never shared".
      reductions: optional tags mirroring the state (``"sum"``, ``"min"``,
        ``"max"``, ``"cat"`` or ``None``) that let the distributed reducer
        all-reduce instead of gathering. See `fmetrics.state.merge_fields`.

    Example::

        >>> class S(NamedTuple):
        ...     total: torch.Tensor
        >>> m = Metric(init=lambda: S(torch.zeros((), dtype=torch.float64)),
        ...            update=lambda s, x: S(s.total + x.sum()),
        ...            merge=merge_fields(S(total="sum")),
        ...            finalize=lambda s: s.total, name="total")
        >>> m(torch.tensor([1., 2.]))
        tensor(3., dtype=torch.float64)
    """

    __slots__ = ("_init", "update", "merge", "finalize", "name", "state_key", "reductions")

    def __init__(
        self,
        *,
        init: Callable[[], Any],
        update: Callable[..., Any],
        merge: Callable[[Any, Any], Any],
        finalize: Callable[[Any], Any],
        name: str = "metric",
        state_key: Optional[Hashable] = None,
        reductions: Any = None,
    ):
        for arg, fn in (("init", init), ("update", update), ("merge", merge), ("finalize", finalize)):
            if not callable(fn):
                raise TypeError(f"Metric {name!r}: argument `{arg}` must be callable, got {type(fn).__name__}")
        if state_key is not None:
            hash(state_key)  # fail early on unhashable keys
        setattr_ = object.__setattr__
        setattr_(self, "_init", init)
        setattr_(self, "update", update)
        setattr_(self, "merge", merge)
        setattr_(self, "finalize", finalize)
        setattr_(self, "name", name)
        setattr_(self, "state_key", state_key)
        setattr_(self, "reductions", reductions)

    def init(self, device: Optional[torch.device | str] = None):
        """The empty state, optionally placed on ``device``."""
        s = self._init()
        return s if device is None else state_lib.to_device(s, device)

    def __call__(self, *inputs, **kwargs):
        """One shot: ``finalize(update(init(), *inputs))`` on the inputs' device."""
        s = self.init(state_lib.device_of((inputs, kwargs)))
        return self.finalize(self.update(s, *inputs, **kwargs))

    def replace(self, **changes) -> "Metric":
        """A copy with some fields replaced (``name=...``, ``finalize=...``, ...)."""
        fields = {k: getattr(self, k) for k in ("update", "merge", "finalize", "name", "state_key", "reductions")}
        fields["init"] = self._init
        fields.update(changes)
        return Metric(**fields)

    def __setattr__(self, key, value):
        raise AttributeError(f"Metric {self.name!r} is immutable; use .replace({key}=...)")

    def __repr__(self) -> str:
        return f"Metric(name={self.name!r}, state_key={self.state_key!r})"
