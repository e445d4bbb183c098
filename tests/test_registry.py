"""Every public factory the package ships is in the law-suite registry."""
import inspect

import importlib

import fmetrics
from fmetrics import wrappers
from tests.cases import all_cases

# every domain the package ships (fmetrics.DOMAINS lists them in lookup order), then the wrappers
DOMAINS = (*(importlib.import_module(f"fmetrics.{d}") for d in fmetrics.DOMAINS), wrappers)


def _factories():
    out = {}
    for module in DOMAINS:
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) and getattr(obj, "__fmetrics_factory__", False):  # not helpers (pit_permutate)
                out[f"{obj.__module__}.{obj.__qualname__}"] = name
    return out


def test_every_factory_has_a_case():
    covered = {f"{c.factory.__module__}.{c.factory.__qualname__}" for c in all_cases()}
    missing = sorted(name for path, name in _factories().items() if path not in covered)
    assert not missing, f"factories without a law-suite case: {missing}"


def test_domain_factories_are_exported_at_top_level():
    for module in DOMAINS[:-1]:
        for name in module.__all__:
            assert getattr(fmetrics, name) is getattr(module, name), name
