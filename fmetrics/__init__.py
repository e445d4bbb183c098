"""fmetrics: PyTorch metrics as pure functions over immutable states.

Every metric is ``init / update / merge / finalize``; see docs/design.md.

Domains (``fmetrics.classification``, ``fmetrics.text``, ...) are imported
on first use: ``import fmetrics`` loads only the core, and a domain whose
optional dependencies are missing names the ``pip install`` that brings them
when one of its metrics is built. Every factory is also reachable at the top
level (``fmetrics.multiclass_accuracy``).
"""
from __future__ import annotations

import importlib

from fmetrics import state, testing, validation
from fmetrics.collection import collection
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.recipe import Recipe, factory
from fmetrics.state import to_device

__version__ = "0.1.0"

#: domain subpackages, in lookup order for top-level names
DOMAINS = (
    "aggregation",
    "classification",
    "regression",
    "retrieval",
    "text",
    "image",
    "audio",
    "detection",
    "segmentation",
    "clustering",
    "nominal",
    "pairwise",
    "shape",
    "multimodal",
    "video",
)
_SUBMODULES = DOMAINS + ("wrappers", "plot")

_CORE = ["Metric", "Family", "Recipe", "factory", "collection", "to_device", "state", "testing", "validation"]


def _domain(name: str):
    try:
        return importlib.import_module(f"fmetrics.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"fmetrics.{name}":
            return None  # a domain not shipped yet
        raise


def __getattr__(name: str):
    if name == "__all__":  # `from fmetrics import *`: the core and every shipped domain
        return _all_names()
    if name in _SUBMODULES:
        module = _domain(name)
        if module is not None:
            return module
    elif not name.startswith("_"):
        for domain in DOMAINS:
            module = _domain(domain)
            if module is not None and name in getattr(module, "__all__", ()):
                value = getattr(module, name)
                globals()[name] = value  # later lookups skip this function
                return value
    raise AttributeError(f"module 'fmetrics' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_all_names()))


def _all_names() -> list:
    names = list(_CORE)
    for domain in DOMAINS:
        module = _domain(domain)
        if module is not None:
            names.extend(getattr(module, "__all__", ()))
    return names
