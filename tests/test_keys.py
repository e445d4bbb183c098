"""fmetrics._keys: float order keys and packed keys (order preservation, round trips, numpy == torch)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fmetrics import _keys

SPECIALS32 = [float("-inf"), -3.4e38, -1.0, -1e-45, -0.0, 0.0, 1e-45, 1e-38, 0.5, 1.0, 3.4e38, float("inf")]


def _floats32(seed: int, n: int = 4000) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(-(2**31), 2**31, (n,), generator=g, dtype=torch.int64).to(torch.int32)
    x = bits.view(torch.float32)  # every bit pattern: subnormals, NaN payloads of both signs, inf
    x = torch.cat([x, torch.tensor(SPECIALS32), -torch.tensor([float("nan")]), torch.tensor([float("nan")]),
                   torch.randint(-3, 4, (200,), generator=g).float() / 2])  # many ties
    return x[torch.randperm(x.shape[0], generator=g)]


def _expected_rank(x: torch.Tensor) -> torch.Tensor:
    """Dense rank of each value in ascending float order, every NaN tied above +inf, -0.0 == +0.0."""
    finite = torch.where(torch.isnan(x), torch.zeros_like(x), x).double()
    distinct = torch.unique(finite[~torch.isnan(x)])
    rank = torch.searchsorted(distinct, finite)
    return torch.where(torch.isnan(x), torch.full_like(rank, distinct.shape[0]), rank)


def _dense(key) -> torch.Tensor:
    key = torch.as_tensor(key)
    return torch.searchsorted(torch.unique(key), key)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ascending32_orders_like_the_floats(seed):
    x = _floats32(seed)
    expected = _expected_rank(x)
    for key in (_keys.ascending32(x), torch.from_numpy(_keys.ascending32(x.numpy()))):
        assert key.dtype == torch.int64
        assert int(key.min()) >= -(2**31) and int(key.max()) < 2**31
        assert torch.equal(_dense(key), expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_descending32_is_the_reverse_order_in_32_unsigned_bits(seed):
    x = _floats32(seed)
    key, key_np = _keys.descending32(x), torch.from_numpy(_keys.descending32(x.numpy()))
    assert torch.equal(key, key_np)
    assert int(key.min()) >= 0 and int(key.max()) < 2**32
    assert torch.equal(key, _keys.MAX32 - _keys.ascending32(x))
    assert torch.equal(_dense(-key), _expected_rank(x))
    # scores > 0 (and NaN, above +inf) have keys below DESCENDING_ZERO; both zeros have it
    positive = (x > 0) | torch.isnan(x)
    assert torch.equal(key < _keys.DESCENDING_ZERO, positive)
    assert torch.equal(_keys.descending32(torch.tensor([-0.0, 0.0])), torch.tensor([_keys.DESCENDING_ZERO] * 2))


def test_ties_nan_zero_and_infinities():
    x = torch.tensor([0.0, -0.0, float("nan"), -float("nan"), float("inf"), -float("inf"), 1.0])
    for fn in (_keys.ascending32, _keys.ascending64):
        k = fn(x)
        assert k[0] == k[1]  # -0.0 == +0.0
        assert k[2] == k[3]  # every NaN one key
        assert k[3] > k[4] > k[6] > k[0] > k[5]  # NaN above +inf, -inf lowest
    d = _keys.descending32(x)
    assert d[2] == d[3] and d[2] < d[4] < d[6] < d[0] < d[5]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_keys_are_exact(dtype):
    x = _floats32(3).to(dtype)
    assert _keys.float32_exact(x)
    assert torch.equal(_dense(_keys.ascending32(x)), _expected_rank(x.float()))


def test_float32_exact():
    assert _keys.float32_exact(torch.tensor([0.5, float("nan"), float("inf")], dtype=torch.float64))
    assert not _keys.float32_exact(torch.tensor([0.1], dtype=torch.float64))
    assert not _keys.float32_exact(torch.tensor([1, 2]))


@pytest.mark.parametrize("seed", [0, 1])
def test_ascending64_orders_like_the_floats(seed):
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(-(2**63), 2**63 - 1, (4000,), generator=g, dtype=torch.int64)
    x = torch.cat([bits.view(torch.float64), torch.tensor(SPECIALS32, dtype=torch.float64),
                   torch.tensor([1 + 2**-52, 1 - 2**-53, 5e-324, -5e-324], dtype=torch.float64),
                   torch.tensor([float("nan"), -float("nan")], dtype=torch.float64)])
    key, key_np = _keys.ascending64(x), torch.from_numpy(_keys.ascending64(x.numpy()))
    assert torch.equal(key, key_np)
    finite = x[~torch.isnan(x)]
    order = torch.argsort(key[~torch.isnan(x)])
    assert bool((finite[order][1:] >= finite[order][:-1]).all())
    assert bool((key[torch.isnan(x)] > key[~torch.isnan(x)].max()).all())
    # equal keys exactly for equal values
    assert torch.equal(_dense(key[~torch.isnan(x)]), torch.searchsorted(torch.unique(finite), finite))


@pytest.mark.parametrize("seed", [0, 1])
def test_float32_from_key_round_trips(seed):
    x = _floats32(seed)
    x = torch.where(torch.isnan(x), torch.full_like(x, float("nan")), x)
    for back in (_keys.float32_from_key(_keys.ascending32(x)),
                 torch.from_numpy(_keys.float32_from_key(_keys.ascending32(x.numpy())))):
        same = (back == x) | (torch.isnan(back) & torch.isnan(x))
        assert bool(same.all())
        assert not bool(torch.signbit(back[x == 0]).any())  # -0.0 comes back as +0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pack_round_trips_and_orders_lexicographically(seed):
    g = torch.Generator().manual_seed(seed)
    n = 3000
    group = torch.randint(-5, 40, (n,), generator=g)  # the first field may be negative
    score = _floats32(seed, n)[:n]
    label = torch.randint(0, 4, (n,), generator=g)
    fields = [(group, None), (_keys.descending32(score), 32), (label, 2)]
    assert _keys.fits(7, 32, 2)
    key = _keys.pack(fields)
    key_np = _keys.pack([(f.numpy(), w) for f, w in fields])
    assert isinstance(key_np, np.ndarray) and torch.equal(key, torch.from_numpy(key_np))
    assert torch.equal(_keys.field(key, 34), group)
    assert torch.equal(_keys.field(key, 2, 32), _keys.descending32(score))
    assert torch.equal(_keys.field(key, 0, 2), label)
    # the key order is (group asc, score desc, label asc)
    s = key.sort().values
    gs, ds, ls = _keys.field(s, 34), _keys.field(s, 2, 32), _keys.field(s, 0, 2)
    assert bool((gs[1:] >= gs[:-1]).all())
    same_g = gs[1:] == gs[:-1]
    assert bool((ds[1:] >= ds[:-1])[same_g].all())
    same_gd = same_g & (ds[1:] == ds[:-1])
    assert bool((ls[1:] >= ls[:-1])[same_gd].all())


def test_pack_into_writes_in_place_for_both_kinds():
    a = torch.tensor([3, 0, 1])
    b = torch.tensor([1, 0, 1])
    out = torch.full((3,), -1, dtype=torch.int64)
    assert _keys.pack_into(out, [(a, None), (b, 1)]) is out
    assert out.tolist() == [7, 0, 3]
    out_np = np.full(3, -1, dtype=np.int64)
    _keys.pack_into(out_np, [(a.numpy(), None), (b.numpy(), 1)])
    assert out_np.tolist() == [7, 0, 3]
    assert not _keys.fits(31, 32, 1)


def _floats64(seed: int, n: int = 3000) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(-(2**63), 2**63 - 1, (n,), generator=g, dtype=torch.int64)
    return torch.cat([bits.view(torch.float64), torch.tensor(SPECIALS32, dtype=torch.float64),
                      torch.tensor([1 + 2**-52, 1 - 2**-53, 5e-324, -5e-324, float("nan"), -float("nan")],
                                   dtype=torch.float64)])


def _same(a, b) -> bool:
    """Equal values, NaN equal to NaN."""
    a, b = torch.as_tensor(a), torch.as_tensor(b)
    return a.dtype == b.dtype and bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


@pytest.mark.parametrize("seed", [0, 1])
def test_float64_from_key_round_trips(seed):
    x = _floats64(seed)
    for back in (_keys.float64_from_key(_keys.ascending64(x)),
                 torch.from_numpy(_keys.float64_from_key(_keys.ascending64(x.numpy())))):
        assert _same(back, x)
        assert not bool(torch.signbit(back[x == 0]).any())  # -0.0 comes back as +0.0


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_float_key_is_exact_for_every_float_dtype(dtype):
    x = (_floats64(2) if dtype == torch.float64 else _floats32(2)).to(dtype)
    key = _keys.float_key(x)
    assert key.dtype == torch.int64
    assert torch.equal(_dense(key), _expected_rank(x.double()))
    wide = dtype == torch.float64
    assert _same(_keys.float_from_key(key, wide).to(dtype), x)
    if dtype in (torch.float32, torch.float64):  # numpy has these two
        assert torch.equal(torch.from_numpy(_keys.float_key(x.numpy())), key)
        assert _same(torch.from_numpy(_keys.float_from_key(_keys.float_key(x.numpy()), wide)), x)


def _lexsorted(key, flag):
    order = np.lexsort((np.asarray(flag), np.asarray(key)))
    return np.asarray(key)[order], np.asarray(flag)[order]


KEY_CASES = {  # name: (low, high) of random int64 keys
    "narrow, non-negative": (0, 2**30 - 1),  # int32, offset 0
    "narrow, shifted": (-(2**29), 2**29),  # int32 with an offset
    "narrow, far from zero": (2**62, 2**62 + 1000),
    "int64 span": (-(2**40), 2**41),
    "too wide for the bit": (-(2**62), 2**62),  # the lexicographic fallback
}


@pytest.mark.parametrize("case", list(KEY_CASES))
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_sort_flagged_is_a_lexicographic_sort_of_key_and_flag(case, kind):
    lo, hi = KEY_CASES[case]
    g = torch.Generator().manual_seed(len(case))
    key = torch.randint(lo, hi, (3000,), generator=g, dtype=torch.int64)
    key = torch.cat([key, key[:500], torch.tensor([lo, hi])])  # ties, and both bounds
    flag = torch.rand(key.shape[0], generator=g) < 0.4
    want_key, want_flag = _lexsorted(key.numpy(), flag.numpy())
    arg = (key.numpy(), flag.numpy()) if kind == "numpy" else (key, flag)
    keys, flags, offset = _keys.sort_flagged(*arg)
    assert isinstance(keys, np.ndarray) == (kind == "numpy")
    keys, flags = torch.as_tensor(keys), torch.as_tensor(flags)
    assert keys.dtype == (torch.int32 if hi - lo < 2**30 else torch.int64)
    assert offset == (0 if case == "narrow, non-negative" or hi - lo >= 2**62 else lo)
    assert torch.equal(keys.to(torch.int64) + offset, torch.from_numpy(want_key))
    assert torch.equal(flags.to(torch.int64), torch.from_numpy(want_flag).to(torch.int64))


def test_sort_flagged_of_nothing_and_of_one():
    for key, flag in ((torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.bool)),
                      (torch.tensor([-7]), torch.tensor([True]))):
        for arg in ((key, flag), (key.numpy(), flag.numpy())):
            keys, flags, offset = _keys.sort_flagged(*arg)
            assert torch.equal(torch.as_tensor(keys).to(torch.int64) + offset, key)
            assert torch.equal(torch.as_tensor(flags).to(torch.int64), flag.to(torch.int64))


def _float_data():
    g = torch.Generator().manual_seed(5)
    probs = torch.rand(2000, generator=g)
    return {
        "probabilities": probs,
        "probabilities with ties": (probs * 8).round() / 8,
        "signed, -0.0 and +0.0": torch.cat([torch.randn(2000, generator=g), torch.tensor([-0.0, 0.0, -0.0])]),
        "zeros only": torch.tensor([0.0, -0.0, 0.0]),
        "with NaN and infinities": torch.cat([probs[:500], torch.tensor([float("nan"), -float("nan"), float("inf"),
                                                                          -float("inf"), -1.0])]),
        "every bit pattern": _floats32(4),
        "float16": torch.randn(2000, generator=g).to(torch.float16),
        "bfloat16": torch.rand(2000, generator=g).to(torch.bfloat16),
        "float64 probabilities": torch.rand(2000, generator=g, dtype=torch.float64),
        "float64, every bit pattern": _floats64(6),
        "empty": torch.zeros(0),
    }


@pytest.mark.parametrize("case", list(_float_data()))
def test_sort_flagged_floats_sorts_the_float_keys(case):
    x = _float_data()[case]
    flag = torch.arange(x.shape[0]) % 3 == 0
    want_key, want_flag = _lexsorted(_keys.float_key(x).numpy(), flag.numpy())
    runs = [x]
    if x.dtype in (torch.float32, torch.float64):
        runs.append(x.numpy())
    for arg in runs:
        keys, flags, offset = _keys.sort_flagged_floats(arg, flag if isinstance(arg, torch.Tensor) else flag.numpy())
        keys, flags = torch.as_tensor(keys), torch.as_tensor(flags)
        assert torch.equal(keys.to(torch.int64) + offset, torch.from_numpy(want_key)), case
        assert torch.equal(flags.to(torch.int64), torch.from_numpy(want_flag).to(torch.int64)), case
    if case in ("probabilities", "probabilities with ties", "bfloat16"):
        assert keys.dtype == torch.int32  # the 32-bit sort
