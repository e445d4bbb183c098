"""The bootstrap's draws against their written definition (tests/_draws_np.py, NumPy), bit for bit.

The bootstrap law cases draw their resamples from the NumPy definition, so a
change of key, hash or table derivation in `fmetrics.wrappers._draws` fails
here (named) and in the cases (as a value mismatch).
"""
import numpy as np
import pytest
import torch

import fmetrics as fm
from fmetrics.wrappers import _draws
from tests import _draws_np as D


def _ids(n=2000, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(-2**62, 2**62, (n,), generator=g)
    ids[:5] = torch.tensor([0, 1, -1, 2**63 - 1, -2**63])
    return ids


def test_mix_is_splitmix64s_finalizer():
    x = _ids()
    assert np.array_equal(_draws.mix(x).numpy().view(np.uint64), D.mix(x))
    for v in (0, 1, -1, 12345, 2**63 - 1, -2**63):
        assert _draws.mix_int(v) & (2**64 - 1) == int(D.mix(v))
    # a known value of splitmix64's finalizer (the output for state 0 + golden after one step)
    assert int(D.mix(D.G)) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("seed", [0, 7, -3, 2**40])
def test_id_keys(seed):
    ids = _ids(seed=abs(seed) % 97)
    assert np.array_equal(_draws.sample_keys(seed, ids).numpy().view(np.uint64), D.id_keys(seed, ids))


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_offset_keys_hash_position_rank_and_content(rank):
    g = torch.Generator().manual_seed(rank)
    n = 37
    inputs = (torch.randn(n, 3, generator=g), torch.randint(0, 5, (n,), generator=g), torch.tensor(2.0),
              torch.rand(n, generator=g).double())
    start = 11
    lib = _draws.sample_keys(5, start + torch.arange(n), rank) ^ _draws.content_hash(inputs, n)
    assert np.array_equal(lib.numpy().view(np.uint64), D.offset_keys(5, inputs, start, rank))
    other = (inputs[0] + 1e-6, *inputs[1:])  # the content matters
    assert not np.array_equal(D.offset_keys(5, other, start, rank), D.offset_keys(5, inputs, start, rank))


@pytest.mark.parametrize("num_samples,first", [(1, 0), (4, 0), (7, 0), (13, 8)])
def test_poisson_counts(num_samples, first):
    keys = _draws.sample_keys(3, _ids())
    lib = _draws.poisson1_counts(keys, num_samples, torch.float64, first).to(torch.int64).numpy()
    assert np.array_equal(lib, D.poisson_counts(keys, num_samples, first))


def test_poisson_table_is_the_poisson1_inverse_cdf():
    assert D.BOUNDS.tolist() == [24110, 48219, 60274, 64292, 65297, 65498, 65531]  # ceil(2^16 P(X <= k))
    counts = D.poisson_counts(_draws.sample_keys(0, torch.arange(40000)), 8)
    freq = np.bincount(counts.reshape(-1), minlength=8) / counts.size
    want = np.exp(-1) / np.array([1, 1, 2, 6, 24, 120, 720, 5040])
    np.testing.assert_allclose(freq[:4], want[:4], atol=4e-3)


def test_multinomial_picks():
    keys = _draws.sample_keys(2, torch.arange(50))
    picks = D.multinomial_picks(keys, 9)
    counts = np.stack([np.bincount(p, minlength=50) for p in picks])
    lib = _draws.multinomial(_draws.replicate_hashes(keys, 9), torch.float64).to(torch.int64).numpy()
    assert np.array_equal(lib, counts)


def test_bootstrap_counts_follow_the_definition():
    """End to end: the replicate values of a bootstrapped sum are the sums of the defined resamples."""
    g = torch.Generator().manual_seed(4)
    ids, x = torch.randperm(500, generator=g)[:60] + 10, torch.randn(60, generator=g)
    m = fm.wrappers.bootstrap(fm.sum(), num_samples=10, seed=9, sample_ids=True, raw=True)
    s = m.update(m.update(m.init(), ids[:25], x[:25]), ids[25:], x[25:])
    want = D.poisson_counts(D.id_keys(9, ids), 10) @ x.double().numpy()
    np.testing.assert_allclose(m.finalize(s)["raw"].numpy(), want, rtol=1e-12)
    m = fm.wrappers.bootstrap(fm.sum(), num_samples=6, seed=9, raw=True)  # keys from offsets and content
    s = m.update(m.update(m.init(), x[:25]), x[25:])
    keys = np.concatenate([D.offset_keys(9, (x[:25],), 0), D.offset_keys(9, (x[25:],), 25)])
    np.testing.assert_allclose(m.finalize(s)["raw"].numpy(), D.poisson_counts(keys, 6) @ x.double().numpy(),
                               rtol=1e-12)


def _poisson_counts_by_view(sample_hash, num_replicates, dtype, first=0):
    """`poisson1_counts` as it read the draws before: a ``uint16`` view of the hashes (no vmap rule in torch 2.11)."""
    groups = -(-num_replicates // 4)
    salt = _draws.mix((torch.arange(groups, dtype=torch.int64) + 1 + first // 4) * _draws._GOLDEN)
    h = _draws.mix(sample_hash.unsqueeze(-1) ^ salt)
    draws = h.view(torch.uint16)[..., :num_replicates]
    counts = torch.index_select(_draws.counts16(h.device), 0, draws.reshape(-1).to(torch.int32))
    return counts.reshape(draws.shape).to(dtype).transpose(-1, -2)


@pytest.mark.parametrize("num_samples,first", [(1, 0), (3, 4), (8, 0), (200, 0), (13, 8)])
def test_poisson_draws_by_shift_and_mask_equal_the_uint16_view(num_samples, first):
    g = torch.Generator().manual_seed(num_samples)
    hashes = torch.randint(-2**63, 2**63 - 1, (3, 257), generator=g)  # a leading batch axis too
    hashes[0, :4] = torch.tensor([0, -1, 2**63 - 1, -2**63])
    lib = _draws.poisson1_counts(hashes, num_samples, torch.float32, first)
    assert torch.equal(lib, _poisson_counts_by_view(hashes, num_samples, torch.float32, first))
    # and under vmap (the view had no batching rule there in torch 2.11)
    mapped = torch.func.vmap(lambda h: _draws.poisson1_counts(h, num_samples, torch.float32, first))(hashes)
    assert torch.equal(mapped, lib)
