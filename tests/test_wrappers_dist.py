"""Wrappers across processes (gloo) and through `adapters.TorchMetric`."""
import pytest
import torch

import fmetrics as fm
from adapters import TorchMetric
from adapters.distributed import reduce
from fmetrics import wrappers as W
from fmetrics.testing import assert_values_close, concat_inputs
from tests._dist import spawn
from tests.cases.wrappers import CASES, diff_median

N = 301


def _data():
    g = torch.Generator().manual_seed(0)
    ids = torch.randperm(N, generator=g)
    return ids, torch.randn(N, generator=g), torch.randn(N, generator=g)


def _metrics():
    return {
        "mse": W.bootstrap(fm.mean_squared_error(), num_samples=50, sample_ids=True, seed=3),
        "median": W.bootstrap(diff_median(),
                              num_samples=20, sample_ids=True, seed=4, raw=True),
    }


def _bootstrap_body(rank, world):
    ids, p, t = _data()
    shard = slice(0, 120) if rank == 0 else slice(120, N)  # uneven shards
    out = {}
    for key, m in _metrics().items():
        s = m.init()
        for lo in range(shard.start, shard.stop, 50):
            hi = min(lo + 50, shard.stop)
            s = m.update(s, ids[lo:hi], p[lo:hi], t[lo:hi])
        out[key] = m.finalize(reduce(m, s))
    plain = W.bootstrap(fm.mean_squared_error(), num_samples=50, seed=3)  # no ids: offsets + rank stream
    local = plain.update(plain.init(), p[:100], t[:100])  # the same local data on both ranks
    out["plain_local"] = plain.finalize(local)["std"]
    # TorchMetric syncs through the reducer as well
    tm = TorchMetric(_metrics()["mse"])
    tm.update(ids[shard], p[shard], t[shard])
    out["torchmetric"] = tm.compute()
    return out


@pytest.mark.distributed
def test_bootstrap_on_two_ranks_equals_one_process_with_sample_ids():
    results = spawn(_bootstrap_body, 2, timeout=180)
    ids, p, t = _data()
    for key, m in _metrics().items():
        want = m(ids, p, t)
        for r in range(2):
            assert_values_close(results[r][key], want, 1e-9, 1e-12, f"rank {r} {key}")
    for r in range(2):
        assert_values_close(results[r]["torchmetric"], _metrics()["mse"](ids, p, t), 1e-9, 1e-12, "TorchMetric")
    # without ids, each rank is its own stream: same local data, independent draws
    assert not torch.equal(results[0]["plain_local"], results[1]["plain_local"])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_wrapper_case_works_as_a_torchmetric(case):
    m = case.make()
    tm = TorchMetric(m)
    batches = case.batches(0)
    for b in batches:
        tm.update(*b)
    if "split invariance" in case.check.get("laws", ("split invariance",)):
        want = m.finalize(m.update(m.init(), *concat_inputs(batches)))
    else:  # batching-dependent: the same sequence of updates
        s = m.init()
        for b in batches:
            s = m.update(s, *b)
        want = m.finalize(s)
    canonical = case.check.get("canonical", lambda v: v)
    assert_values_close(canonical(tm.compute()), canonical(want), 1e-9, 1e-12, case.id)
    tm.reset()
    tm.update(*batches[0])
    s = m.update(m.init(), *batches[0])
    assert_values_close(canonical(tm.compute()), canonical(m.finalize(s)), 1e-9, 1e-12, f"{case.id} after reset")


def test_bootstrap_through_torchmetric_forward_draws_each_batch_independently():
    """forward() updates every batch from init() and merges it (offsets restart at 0). Two nearly equal batches:
    with independent draws the bootstrap sd is the standard error of 2000 rows; had both batches drawn the same
    weights it would be that of 1000 rows, sqrt(2) larger."""
    g = torch.Generator().manual_seed(0)
    p, t = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    tm = TorchMetric(W.bootstrap(fm.mean_squared_error(), num_samples=400))
    tm(p, t)
    tm(p + 1e-3, t)
    se = ((p - t) ** 2).double().std() / 2000**0.5
    assert abs(tm.compute()["std"].item() / se.item() - 1) < 0.2  # sd of a 400-replicate sd: ~4%
