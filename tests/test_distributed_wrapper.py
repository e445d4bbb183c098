"""`adapters.TorchMetric` under a real 2-process gloo group: sync goes through the reducer."""
import warnings

import pytest
import torch
import torchmetrics
from torchmetrics import classification as tmc

import fmetrics as fm
from adapters import TorchMetric
from adapters.distributed import LayoutMismatchError, reduce
from fmetrics.testing import assert_values_close
from tests._dist import count_collectives, spawn

pytestmark = pytest.mark.distributed

N = 41  # rows in the stream; rank 0 sees 30, rank 1 sees 11


def _stream(seed=0):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(N, generator=g)
    return p, (torch.rand(N, generator=g) < p).long()


def _shard(rank, seed=0):
    p, t = _stream(seed)
    cut = 30
    return (p[:cut], t[:cut]) if rank == 0 else (p[cut:], t[cut:])


def _metrics():
    return {"auroc": fm.binary_auroc(), "acc": fm.binary_accuracy(), "mean": fm.mean()}


def _body(rank, world):
    out = {}
    p, t = _shard(rank)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # compute under DDP: every rank gets the value of all ranks' data, then keeps its local state
        auroc = TorchMetric(fm.binary_auroc())
        for lo in range(0, p.shape[0], 7):
            auroc.update(p[lo:lo + 7], t[lo:lo + 7])
        with count_collectives() as counts:
            out["auroc"] = auroc.compute()
        out["auroc_counts"] = dict(counts)
        out["local_after_sync"] = len(auroc.fm_scores)  # unsync restored this rank's chunks
        p2, t2 = _shard(rank, seed=1)
        auroc.update(p2, t2)
        out["auroc_more"] = auroc.compute()
        # sync_on_compute=False: the local value
        local = TorchMetric(fm.binary_auroc(), sync_on_compute=False)
        local.update(p, t)
        out["local"] = local.compute()
        # forward: local batch value, or the global batch value with dist_sync_on_step
        step = TorchMetric(fm.binary_accuracy(), dist_sync_on_step=True)
        plain = TorchMetric(fm.binary_accuracy())
        out["step"] = step(p, t)
        out["plain"] = plain(p, t)
        out["step_compute"] = step.compute()
        # a MetricCollection of wrappers
        col = torchmetrics.MetricCollection({k: TorchMetric(m) for k, m in _metrics().items()})
        col.update(p, t)
        out["collection"] = col.compute()
        # uneven shards with dist_sync_on_step: rank 0's third per-step sync meets rank 1's compute() sync
        uneven = TorchMetric(fm.mean(), dist_sync_on_step=True)
        try:
            for _ in range(3 if rank == 0 else 2):
                uneven(torch.full((4,), 10.0 * (rank + 1)))
            out["uneven"] = f"no error: {uneven.compute().item()}"
        except LayoutMismatchError as err:
            out["uneven"] = str(err)
        m = fm.sum()  # the group is still usable
        out["after"] = m.finalize(reduce(m, m.update(m.init(), torch.tensor([1.0]))))
    return out


@pytest.fixture(scope="module")
def results():
    return spawn(_body, 2, timeout=120)


def _oracle(cls, p, t):
    return cls()(p, t)


def test_compute_under_ddp_equals_one_process(results):
    p, t = _stream()
    p1, t1 = _stream(seed=1)
    for rank, out in enumerate(results):
        assert_values_close(out["auroc"], _oracle(tmc.BinaryAUROC, p, t), 1e-6, 1e-7, f"rank {rank}")
        assert out["local_after_sync"] == len(range(0, _shard(rank)[0].shape[0], 7))
        both_p = torch.cat([p, p1[:30], p1[30:]])
        both_t = torch.cat([t, t1[:30], t1[30:]])
        assert_values_close(out["auroc_more"], _oracle(tmc.BinaryAUROC, both_p, both_t), 1e-6, 1e-7,
                            f"rank {rank}: compute again after more updates")
        # one reduction: the header + one gather of the state (its chunks joined; the deferred-validation
        # field makes the state one merge unit, rebuilt from the header without an object exchange)
        assert out["auroc_counts"]["ops"] == {"all_gather": 2}, out["auroc_counts"]


def test_sync_on_compute_false_gives_the_local_value(results):
    for rank, out in enumerate(results):
        assert_values_close(out["local"], _oracle(tmc.BinaryAUROC, *_shard(rank)), 1e-6, 1e-7, f"rank {rank}")


def test_dist_sync_on_step_gives_the_global_batch_value(results):
    p, t = _stream()
    for rank, out in enumerate(results):
        assert_values_close(out["step"], _oracle(tmc.BinaryAccuracy, p, t), 1e-6, 1e-7, f"rank {rank}")
        assert_values_close(out["plain"], _oracle(tmc.BinaryAccuracy, *_shard(rank)), 1e-6, 1e-7, f"rank {rank}")
        assert_values_close(out["step_compute"], _oracle(tmc.BinaryAccuracy, p, t), 1e-6, 1e-7, f"rank {rank}")


def test_metric_collection_of_wrappers_under_ddp(results):
    p, t = _stream()
    want = {"auroc": _oracle(tmc.BinaryAUROC, p, t), "acc": _oracle(tmc.BinaryAccuracy, p, t), "mean": torchmetrics.MeanMetric()(p, t.float())}
    for rank, out in enumerate(results):
        assert_values_close(out["collection"], want, 1e-6, 1e-7, f"rank {rank}")


def test_dist_sync_on_step_with_uneven_shards_raises_on_every_rank(results):
    for rank, out in enumerate(results):
        msg = out["uneven"]
        assert msg.startswith("adapters.distributed.reduce: ranks disagree"), (rank, msg)
        assert "(step)" in msg and "(compute)" in msg, (rank, msg)
        assert out["after"].item() == 2.0
