"""Workload registry: each domain's benchmark module registers its workloads here.

A workload builds data once and names, per contender, a callable that runs
the whole job (updates and the final compute) and returns its value::

    @register("classification/multiclass_accuracy", domain="classification",
              samples=200 * 4096)
    def multiclass_accuracy(quick: bool) -> dict[str, Callable[[], Any]]:
        data = ...
        return {"fmetrics": lambda: ..., "torchmetrics": lambda: ...}

A contender whose package is missing raises ``ImportError`` while building
its callable (or the workload returns it without that key) and is reported as
skipped. ``samples`` (for ``quick=False``) lets the harness report throughput;
``bytes`` the bytes a streaming pass must read, for the bandwidth fraction.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

__all__ = ["Workload", "register", "WORKLOADS"]


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    domain: str
    build: Callable[[bool], dict[str, Callable[[], Any]]]
    samples: Optional[Callable[[bool], int]] = None
    bytes: Optional[Callable[[bool], int]] = None
    description: str = ""


WORKLOADS: dict[str, Workload] = {}


def register(name: str, *, domain: str, samples=None, bytes=None, description: str = ""):  # noqa: A002
    """Decorator registering ``build(quick) -> {contender: run}`` as a workload."""

    def deco(build):
        if name in WORKLOADS:
            raise ValueError(f"benchmark workload {name!r} registered twice")
        WORKLOADS[name] = Workload(name, domain, build, samples, bytes, description or (build.__doc__ or "").strip())
        return build

    return deco
