"""FID across 2 gloo processes equals the one-process value (DESIGN §2 law 4), with a feature network built here.

Each rank builds the same small network (seeded), sees an uneven shard of the real and fake images (one
rank gets most real images, the other most fakes, both get some of each, in two updates), and reduces
its sum-mergeable state (count, feature sum, outer-product sum per side) with
`adapters.distributed.reduce`; the value on every rank equals the one-process value and a float64 SciPy
``sqrtm`` computation from the same features. The same holds through `adapters.TorchMetric` (DDP-style
``compute``). Bounded: one spawned group, 180 s timeout.
"""
import numpy as np
import pytest
import torch

from tests._dist import spawn

N_REAL, N_FAKE, SIDE = 37, 29, 12


def _net():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten()).double()
    net.num_features = 6
    return net


def _data():
    g = torch.Generator().manual_seed(0)
    real = torch.rand(N_REAL, 3, SIDE, SIDE, generator=g, dtype=torch.float64) * 255
    fake = torch.rand(N_FAKE, 3, SIDE, SIDE, generator=g, dtype=torch.float64) * 180 + 30
    return real, fake


# uneven shards: rank 0 most real images, rank 1 most fakes
SHARDS = {0: (slice(0, 30), slice(0, 4)), 1: (slice(30, N_REAL), slice(4, N_FAKE))}


def _rank_body(rank: int, world: int):
    import fmetrics
    from adapters import TorchMetric
    from adapters.distributed import reduce

    fid = fmetrics.frechet_inception_distance(feature=_net())
    real, fake = _data()
    rs, fs = SHARDS[rank]
    s = fid.init()
    s = fid.update(s, real[rs][:3], True)  # two updates of real images, one of fakes with per-image flags
    mixed = torch.cat([real[rs][3:], fake[fs]])
    flags = torch.tensor([True] * (mixed.shape[0] - fake[fs].shape[0]) + [False] * fake[fs].shape[0])
    s = fid.update(s, mixed, flags)
    local_n = (int(s.real_n), int(s.fake_n))
    value = float(fid.finalize(reduce(fid, s)))

    wrapped = TorchMetric(fmetrics.frechet_inception_distance(feature=_net()))
    wrapped.update(real[rs], True)
    wrapped.update(fake[fs], False)
    adapter_value = float(wrapped.compute())
    return local_n, value, adapter_value


def _scipy_fid(fr: np.ndarray, ff: np.ndarray) -> float:
    import scipy.linalg

    s1, s2 = np.cov(fr, rowvar=False), np.cov(ff, rowvar=False)
    covmean = scipy.linalg.sqrtm(s1 @ s2).real
    return float(((fr.mean(0) - ff.mean(0)) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


@pytest.mark.distributed
def test_fid_over_two_gloo_ranks_equals_one_process():
    import fmetrics

    results = spawn(_rank_body, 2, timeout=180)
    assert [r[0] for r in results] == [(30, 4), (N_REAL - 30, N_FAKE - 4)]  # each rank saw only its shard

    fid = fmetrics.frechet_inception_distance(feature=_net())
    real, fake = _data()
    one = float(fid.finalize(fid.update(fid.update(fid.init(), real, True), fake, False)))
    with torch.no_grad():
        net = _net()
        want = _scipy_fid(net(real).numpy(), net(fake).numpy())
    assert abs(one - want) <= 1e-8 * max(1.0, abs(want)), (one, want)
    for _, value, adapter_value in results:
        assert value == results[0][1]  # the same bits on every rank
        assert abs(value - one) <= 1e-10 * max(1.0, abs(one)), (value, one)
        assert abs(adapter_value - one) <= 1e-10 * max(1.0, abs(one)), (adapter_value, one)
