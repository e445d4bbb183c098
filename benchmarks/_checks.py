"""Checks for the pytest-benchmark suites: each timed result is compared with its peer or oracle by the
harness's rule (`harness.compare`) and within the tolerance the harness reports for that workload."""
from __future__ import annotations

from benchmarks import harness
from benchmarks.registry import WORKLOADS, Workload

DEFAULT = Workload.tolerance  # what a workload registered without a tolerance gets
ROUNDS = 50  # rounds of a timed update on a fresh metric (`benchmark.pedantic` does not calibrate)


def workload_tolerance(name: str) -> float:
    """The tolerance the harness workload ``name`` registers (its module is imported when not yet loaded)."""
    if name not in WORKLOADS:
        harness.discover()
    return WORKLOADS[name].tolerance


def assert_agrees(value, reference, tolerance: float = DEFAULT, what: str = "") -> None:
    """Raises AssertionError (prefixed by ``what``) unless `harness.compare` finds ``value`` within ``tolerance``
    of ``reference``: ``|a - b| <= tolerance * max(1, |b|)`` for each element pair of the matching leaves."""
    worst, ok, note = harness.compare(value, reference, tolerance)
    if not ok:
        raise AssertionError(f"{what + ': ' if what else ''}{note} (largest |diff| {worst:.3g})")


def updated(metric, *args, **kwargs):
    """``metric.update(*args, **kwargs)``, then ``metric`` (a torchmetrics update returns None)."""
    metric.update(*args, **kwargs)
    return metric


def fresh(make, *args, **kwargs):
    """A ``benchmark.pedantic`` setup for `updated`: each round gets a new ``make()`` (built outside the timing)."""
    return lambda: ((make(), *args), kwargs)
