"""Workload registry: each domain's benchmark module registers its workloads here.

A workload builds data once and names, per contender, a callable that runs
the whole job (updates and the final compute) and returns its value::

    @register("classification/multiclass_accuracy", domain="classification",
              samples=lambda quick: (20 if quick else 200) * 4096)
    def multiclass_accuracy(quick: bool) -> dict[str, Callable[[], Any]]:
        data = ...
        return {"fmetrics": lambda: ..., "torchmetrics": lambda: ...}

``"fmetrics"`` is the baseline; every other key is a peer, and each peer gets
a row (time, ratio peer/fmetrics, largest absolute difference of the values).

* A contender whose package is missing raises ``ImportError`` (while building
  the workload, or when its callable first runs), maps to ``None``, or is
  named in ``peers=`` but absent from the dict: its row is reported as skipped.
* ``samples`` / ``bytes``: an int, or ``f(quick) -> int``. They give the
  throughput (samples/s) and, for streaming workloads, the fraction of the
  machine's memory bandwidth (``bytes`` = what one pass must read). A plain
  int is taken to describe the full run (``quick=False``) only.
* ``tolerance``: a value element ``a`` agrees with the baseline's ``b`` when
  ``|a - b| <= tolerance * max(1, |b|)``; rows beyond it are flagged.
* A callable may return `Measured(value, extra={...}, seconds=...)` to add
  measured columns (collectives, bytes sent, ...) or to report a time it
  measured itself (e.g. inside worker processes) instead of the wall time.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Union

__all__ = ["Workload", "Measured", "register", "WORKLOADS", "BASELINE", "fmetrics_run", "torchmetrics_run"]

BASELINE = "fmetrics"

Size = Union[int, Callable[[bool], int], None]


@dataclasses.dataclass(frozen=True)
class Measured:
    """A contender's result with extra measured columns and/or its own timing."""

    value: Any
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seconds: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    domain: str
    build: Callable[[bool], dict[str, Callable[[], Any]]]
    samples: Size = None
    bytes: Size = None
    description: str = ""
    tolerance: float = 1e-4
    peers: tuple = ()

    def size(self, field: str, quick: bool) -> Optional[int]:
        """``samples`` or ``bytes`` for this run, or None when unknown."""
        v = getattr(self, field)
        if v is None or (quick and not callable(v)):
            return None
        return int(v(quick) if callable(v) else v)


WORKLOADS: dict[str, Workload] = {}


def register(name: str, *, domain: str, samples: Size = None, bytes: Size = None,  # noqa: A002
             description: str = "", tolerance: float = 1e-4, peers: tuple = ()):
    """Decorator registering ``build(quick) -> {contender: run}`` as a workload."""

    def deco(build):
        if name in WORKLOADS:
            raise ValueError(f"benchmark workload {name!r} registered twice")
        WORKLOADS[name] = Workload(name, domain, build, samples, bytes,
                                   description or (build.__doc__ or "").strip(), float(tolerance), tuple(peers))
        return build

    return deco


def fmetrics_run(metric, batches):
    """The fmetrics contender: ``init``, ``update(state, *batch)`` per input tuple, ``finalize``."""

    def run():
        s = metric.init()
        for batch in batches:
            s = metric.update(s, *batch)
        return metric.finalize(s)

    return run


def torchmetrics_run(make, batches):
    """A torchmetrics contender: ``make()`` a fresh metric, ``update(*batch)`` per input tuple, ``compute``."""

    def run():
        m = make()
        for batch in batches:
            m.update(*batch)
        return m.compute()

    return run
