"""Workload registry: each domain's benchmark module registers its workloads here.

A workload builds data once and names, per contender, a callable that runs
the whole job (updates and the final compute) and returns its value::

    @register("classification/multiclass_accuracy", domain="classification",
              samples=lambda quick: (20 if quick else 200) * 4096)
    def multiclass_accuracy(quick: bool, device="cpu") -> dict[str, Callable[[], Any]]:
        data = on_device(..., device)
        return {"fmetrics": lambda: ..., "torchmetrics": lambda: ...}

``device`` (``python -m benchmarks --device cuda``) is where the data live:
a builder moves its inputs there with `on_device` and runs every peer that can
on the same device (`fmetrics_run` and `torchmetrics_run` follow the data);
peers that only run on the host (scikit-learn, ranx, pycocotools, ...) keep
the host copy. A builder that cannot run on a device raises `Unsupported`
(its row is reported as skipped, with the reason); a builder without a
``device`` parameter runs on the CPU only.

``"fmetrics"`` is the baseline; every other key is a peer, and each peer gets
a row (time, ratio peer/fmetrics, largest absolute difference of the values).

* A contender whose package is missing raises ``ImportError`` (while building
  the workload, or when its callable first runs), maps to ``None``, or is
  named in ``peers=`` but absent from the dict: its row is reported as skipped.
  A peer the builder leaves out of this run on purpose maps to `Skip("why")`
  (e.g. ``Skip("full run only: ...")`` when ``quick``): skipped, with that reason.
* ``samples`` / ``bytes``: an int, or ``f(quick) -> int``. They give the
  throughput (samples/s) and, for streaming workloads, the fraction of the
  machine's memory bandwidth (``bytes`` = what one pass must read). A plain
  int is taken to describe the full run (``quick=False``) only.
* ``tolerance``: a value element ``a`` agrees with the baseline's ``b`` when
  ``|a - b| <= tolerance * max(1, |b|)``; rows beyond it are flagged.
* A callable may return `Measured(value, extra={...}, seconds=...)` to add
  measured columns (collectives, bytes sent, ...) or to report a time it
  measured itself (e.g. inside worker processes) instead of the wall time;
  ``once=True`` says that time comes from one run made while the workload was
  built, so the harness keeps it as a single timing (``1 round``), not copies.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Mapping, Optional, Union

import torch

__all__ = ["Workload", "Measured", "Skip", "Unsupported", "register", "WORKLOADS", "BASELINE", "fmetrics_run",
           "torchmetrics_run", "on_device"]

BASELINE = "fmetrics"

Size = Union[int, Callable[[bool], int], None]


class Unsupported(Exception):
    """Raised by a builder that cannot run on the requested device; the message says why."""


@dataclasses.dataclass(frozen=True)
class Skip:
    """A peer the builder leaves out of this run; ``reason`` is shown in its (skipped) row."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Measured:
    """A contender's result with extra measured columns and/or its own timing."""

    value: Any
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seconds: Optional[float] = None
    once: bool = False  # ``seconds`` come from one run made while the workload was built: a single timing


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
    full_only: str = ""  # why --quick skips it (seconds of fixed cost: processes to spawn, a model to load)

    def size(self, field: str, quick: bool) -> Optional[int]:
        """``samples`` or ``bytes`` for this run, or None when unknown."""
        v = getattr(self, field)
        if v is None or (quick and not callable(v)):
            return None
        return int(v(quick) if callable(v) else v)

    def make(self, quick: bool, device: Union[str, torch.device] = "cpu") -> dict:
        """``build(quick, device=device)``; a builder without a ``device`` parameter runs on the CPU only."""
        device = torch.device(device)
        if takes_device(self.build):
            return self.build(quick, device=device)
        if device.type != "cpu":
            raise Unsupported("the workload builds its data on the CPU only (no device parameter)")
        return self.build(quick)


def takes_device(build: Callable) -> bool:
    """Whether ``build`` accepts a ``device`` keyword."""
    try:
        params = inspect.signature(build).parameters
    except (TypeError, ValueError):
        return False
    return "device" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


WORKLOADS: dict[str, Workload] = {}


def register(name: str, *, domain: str, samples: Size = None, bytes: Size = None,  # noqa: A002
             description: str = "", tolerance: float = 1e-4, peers: tuple = (), full_only: str = ""):
    """Decorator registering ``build(quick) -> {contender: run}`` as a workload."""

    def deco(build):
        if name in WORKLOADS:
            raise ValueError(f"benchmark workload {name!r} registered twice")
        WORKLOADS[name] = Workload(name, domain, build, samples, bytes,
                                   description or (build.__doc__ or "").strip(), float(tolerance), tuple(peers),
                                   full_only)
        return build

    return deco


def on_device(tree, device):
    """``tree`` (tensors in nested lists / tuples / dicts; other leaves kept) with its tensors on ``device``.

    On the CPU it is returned as it is (no copies).
    """
    device = torch.device(device)
    if device.type == "cpu":
        return tree
    if isinstance(tree, torch.Tensor):
        return tree.to(device)
    if isinstance(tree, dict):
        return type(tree)((k, on_device(v, device)) for k, v in tree.items())
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(on_device(v, device) for v in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(on_device(v, device) for v in tree)
    return tree


def _device_of(batches) -> Optional[torch.device]:
    """Device of the first tensor in ``batches`` when it is not the CPU, else ``None``."""
    stack = [batches]
    while stack:
        x = stack.pop(0)
        if isinstance(x, torch.Tensor):
            return None if x.device.type == "cpu" else x.device
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return None


def fmetrics_run(metric, batches):
    """The fmetrics contender: ``init``, ``update(state, *batch)`` per input tuple, ``finalize``.

    The state and the metric's parameters live on the device of the batches.
    """
    device = _device_of(batches)
    if device is not None:
        metric = metric.to(device)

    def run():
        s = metric.init(device)
        for batch in batches:
            s = metric.update(s, *batch)
        return metric.finalize(s)

    return run


def torchmetrics_run(make, batches):
    """A torchmetrics contender: ``make()`` a fresh metric, ``update(*batch)`` per input tuple, ``compute``.

    The metric is moved to the device of the batches.
    """
    device = _device_of(batches)

    def run():
        m = make() if device is None else make().to(device)
        for batch in batches:
            m.update(*batch)
        return m.compute()

    return run
