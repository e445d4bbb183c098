"""The law checker catches planted defects, and each names the broken law."""
from typing import NamedTuple

import pytest
import torch

import fmetrics as fm
from fmetrics.state import merge_fields
from fmetrics.testing import check_metric


class MeanState(NamedTuple):
    total: torch.Tensor
    count: torch.Tensor


def _batches():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(n, generator=g) + 5,) for n in (4, 9, 2, 7)]


def _good_parts():
    init = lambda: MeanState(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64))  # noqa: E731
    update = lambda s, x: MeanState(s.total + x.double().sum(), s.count + x.numel())  # noqa: E731
    finalize = lambda s: s.total / s.count  # noqa: E731
    return init, update, finalize


def test_a_correct_metric_passes():
    init, update, finalize = _good_parts()
    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="good_mean")
    check_metric(m, _batches(), reference=lambda x: x.double().mean())


def test_catches_in_place_update():
    init, _, finalize = _good_parts()

    def update(s, x):
        s.total.add_(x.double().sum())  # planted: mutates the caller's state
        return MeanState(s.total, s.count + x.numel())

    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="inplace_mean")
    with pytest.raises(AssertionError, match="inplace_mean: law 'purity' broken: update: the state was modified"):
        check_metric(m, _batches())


def test_catches_input_mutation():
    init, update, finalize = _good_parts()

    def mutating(s, x):
        x.mul_(1.0).add_(1)  # planted: mutates the inputs
        return update(s, x)

    m = fm.Metric(init=init, update=mutating, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="mut")
    with pytest.raises(AssertionError, match="law 'purity' broken: update: the inputs"):
        check_metric(m, _batches())


def test_catches_mean_of_batch_means():
    init, _, _ = _good_parts()

    def update(s, x):  # planted: averages the running mean with the batch mean
        first = (s.count == 0).double()
        mean = first * x.double().mean() + (1 - first) * (s.total + x.double().mean()) / 2
        return MeanState(mean, s.count + x.numel())

    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=lambda s: s.total,
                  name="mean_of_means")
    with pytest.raises(AssertionError, match="mean_of_means: law 'split invariance' broken"):
        check_metric(m, _batches())


def test_catches_non_associative_merge():
    def init():
        return MeanState(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64))

    def update(s, x):  # keeps a correct running mean
        n = s.count + x.numel()
        return MeanState(s.total + (x.double().sum() - s.total * x.numel()) / n.clamp(min=1), n)

    def merge(a, b):  # planted: commutative, init() is its identity, but averages the means unweighted
        avg = (a.total + b.total) / 2
        mean = torch.where(a.count == 0, b.total, torch.where(b.count == 0, a.total, avg))
        return MeanState(mean, a.count + b.count)

    m = fm.Metric(init=init, update=update, merge=merge, finalize=lambda s: s.total, name="avg_merge")
    with pytest.raises(AssertionError, match="avg_merge: law 'merge associativity' broken"):
        check_metric(m, _batches(), rtol=1e-9)


def test_catches_item_in_update():
    init, _, finalize = _good_parts()

    def update(s, x):  # planted: a host sync per batch
        return MeanState(s.total + x.double().sum().item(), s.count + x.numel())

    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="item_mean")
    with pytest.raises(AssertionError, match="item_mean: law 'vmap' broken"):
        check_metric(m, _batches())
    with pytest.raises(AssertionError, match="item_mean: law 'no host sync' broken: update calls `item`"):
        check_metric(m, _batches(), laws=("no host sync", "compile"))


def test_catches_data_dependent_branch():
    init, update, finalize = _good_parts()

    def branchy(s, x):
        if x.sum() > 0:  # planted: Python branch on data
            return update(s, x)
        return s

    m = fm.Metric(init=init, update=branchy, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="branchy")
    with pytest.raises(AssertionError, match="branchy: law 'no host sync' broken: update calls `__bool__`"):
        check_metric(m, _batches(), laws=("no host sync",))
    with pytest.raises(AssertionError, match="branchy: law 'compile' broken"):
        check_metric(m, _batches(), laws=("compile",))


def test_catches_boolean_mask_indexing():
    init, update, finalize = _good_parts()
    m = fm.Metric(init=init, update=lambda s, x: update(s, x[x > 5]), merge=merge_fields(MeanState("sum", "sum")),
                  finalize=finalize, name="masked")
    with pytest.raises(AssertionError, match="masked: law 'no host sync' broken: update indexes with a boolean"):
        check_metric(m, _batches(), laws=("no host sync",))


def test_catches_wrong_reference():
    with pytest.raises(AssertionError, match="mean: law 'reference' broken"):
        check_metric(fm.mean(), _batches(), reference=lambda x: x.double().median())


def test_catches_state_that_does_not_serialize():
    init, update, finalize = _good_parts()

    class Unpicklable(NamedTuple):
        total: torch.Tensor
        count: torch.Tensor

    # a state class defined in a local scope cannot be pickled by torch.save
    m = fm.Metric(init=lambda: Unpicklable(*init()), update=lambda s, x: Unpicklable(*update(s, x)),
                  merge=merge_fields(Unpicklable("sum", "sum")), finalize=finalize, name="local_state")
    with pytest.raises(AssertionError, match="local_state: law 'serialization' broken"):
        check_metric(m, _batches(), laws=("serialization",))


def test_unknown_law_is_a_clear_error():
    with pytest.raises(ValueError, match="check_metric: argument `laws`"):
        check_metric(fm.mean(), _batches(), laws=("purity", "speed"))
