"""Dispatch budgets: how many aten operations one ``update`` launches, per metric family.

On a GPU a small update is bound by dispatch, not by the device: every aten
operation is a kernel launch (or a host-side view) of a few microseconds, so
the count of operations is the cost of a batch of a few thousand rows. It is
measured here on the CPU with a `TorchDispatchMode` (every operation that
reaches the dispatcher, views and dtype copies included), on the path an
accelerator takes (value checks deferred, `fmetrics.validation.mode`), for a
steady-state update (the second one: lazily sized states exist). A change
that adds operations to an update fails here with the operation counts, so
a regression shows without a GPU.

Budgets are the counts measured when they were set, plus ~20% (see
docs/benchmarks.md, "Dispatch budgets"); lower a budget when an update gets
leaner. Host-syncing operations (``.item()``, ``nonzero``, boolean-mask
indexing) are never allowed in an update.
"""
from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import fmetrics
from fmetrics import validation

# operations that copy device data to the host (a sync on a GPU)
SYNCING = frozenset({"aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.item",
                     "aten._unique2", "aten.unique_consecutive", "aten.unique_dim"})


class CountOps(TorchDispatchMode):
    """Counts the aten operations dispatched inside the block, by overload packet."""

    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.ops.values())


def _data():
    g = torch.Generator().manual_seed(0)
    n = 256
    return {
        "logits": torch.randn(n, 100, generator=g),
        "labels": torch.randint(0, 100, (n,), generator=g),
        "scores": torch.rand(n, generator=g),
        "binary": torch.randint(0, 2, (n,), generator=g),
        "x": torch.randn(n, generator=g),
        "y": torch.randn(n, generator=g),
        "query": torch.randint(0, 16, (n,), generator=g),
    }


D = _data()

# family: (metric, inputs, budget); budget = count when set (docs/benchmarks.md) rounded up by ~20%
FAMILIES = {
    "counts/multiclass_accuracy_logits": (
        lambda: fmetrics.multiclass_accuracy(num_classes=100), (D["logits"], D["labels"]), 56),
    "curves/binary_auroc_exact": (lambda: fmetrics.binary_auroc(), (D["scores"], D["binary"]), 66),
    "curves/binary_auroc_binned": (
        lambda: fmetrics.binary_auroc(thresholds=100), (D["scores"], D["binary"]), 87),
    "regression/mean_squared_error": (lambda: fmetrics.mean_squared_error(), (D["x"], D["y"]), 18),
    "aggregation/mean": (lambda: fmetrics.mean(), (D["x"],), 11),
    "retrieval/retrieval_map": (
        lambda: fmetrics.retrieval_map(), (D["scores"], D["binary"], D["query"]), 113),
    "wrappers/bootstrap_multiclass_accuracy": (
        lambda: fmetrics.wrappers.bootstrap(fmetrics.multiclass_accuracy(num_classes=10), num_samples=50),
        (D["logits"][:, :10], D["labels"] % 10), 290),
}


def count_update(metric, inputs) -> CountOps:
    """The operations of one steady-state ``update`` on the accelerator path (checks deferred)."""
    with validation.mode("deferred"):
        state = metric.update(metric.init(), *inputs)
        with CountOps() as counter:
            metric.update(state, *inputs)
    return counter


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_update_dispatch_budget(family):
    make, inputs, budget = FAMILIES[family]
    counter = count_update(make(), inputs)
    top = ", ".join(f"{k} x{v}" for k, v in counter.ops.most_common(12))
    assert counter.total <= budget, (
        f"{family}: one update dispatches {counter.total} aten operations, over its budget of {budget} "
        f"(tests/test_dispatch_budget.py; docs/benchmarks.md). Most frequent: {top}")
    syncing = sorted(set(counter.ops) & SYNCING)
    assert not syncing, f"{family}: update dispatches host-syncing operations {syncing}"


def test_counter_counts_every_operation():
    with CountOps() as c:
        x = torch.arange(4.0)
        (x * 2).sum().to(torch.float64)
    assert c.ops == {"aten.arange": 1, "aten.mul": 1, "aten.sum": 1, "aten._to_copy": 1}
    assert c.total == 4


if __name__ == "__main__":  # prints the current counts (to set budgets)
    for name in sorted(FAMILIES):
        make, inputs, budget = FAMILIES[name]
        c = count_update(make(), inputs)
        print(f"{name:45s} {c.total:5d} (budget {budget}); copies {c.ops['aten._to_copy']}")
