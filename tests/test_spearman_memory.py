"""Spearman's rho from packed integer ranks (float32 CPU chunks): parity with SciPy and bounded memory.

`fmetrics.regression._pairs.rank_comoments` ranks straight from the state's
chunks (no joined copy) with exact integer sums; these tests compare it with
``scipy.stats.spearmanr`` on heavy ties, uneven and 1-row chunks, several
outputs and every ``nan_strategy``, and walk blocks with runs longer than a
block.
"""
import warnings

import numpy as np
import pytest
import scipy.stats as ss
import torch

import fmetrics as fm
from fmetrics import _keys
from fmetrics.regression import _pairs


def _stream(metric, p, t, cuts):
    s = metric.init()
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        s = metric.update(s, p[lo:hi], t[lo:hi])
    return metric.finalize(s)


def _cuts(n, g, pieces=6):
    """Uneven chunk bounds, with a 1-row chunk (and an empty one) when there are rows enough."""
    inner = torch.randint(0, n + 1, (pieces,), generator=g).tolist()
    return sorted({0, n, min(1, n), min(2, n), *inner}) + [n]


def _ref(p, t):
    p, t = np.asarray(p, dtype=np.float64), np.asarray(t, dtype=np.float64)
    if p.ndim == 1:
        return ss.spearmanr(p, t)[0]
    return np.array([ss.spearmanr(p[:, j], t[:, j])[0] for j in range(p.shape[1])])


def _close(actual, expected):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_heavy_ties_uneven_chunks_match_scipy(seed):
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(2, 4000, (1,), generator=g))
    levels = int(torch.randint(1, 30, (1,), generator=g)) + 1
    p = torch.randint(-levels, levels, (n,), generator=g).float() / 4
    t = p * (seed % 3 - 1) + torch.randint(0, levels, (n,), generator=g).float()
    p[: n // 5] = -p[: n // 5]  # -0.0 beside 0.0
    _close(_stream(fm.spearman_corrcoef(), p, t, _cuts(n, g)), _ref(p, t))


def test_runs_longer_than_a_block_match_scipy():
    """Runs that open in one block of the walk and close blocks later (and the last run)."""
    g = torch.Generator().manual_seed(1)
    n = 5 * _pairs._BLOCK + 123
    p = torch.randint(0, 3, (n,), generator=g).float()
    t = torch.where(torch.rand(n, generator=g) < 0.9, torch.zeros(n), torch.randn(n, generator=g))
    _close(_stream(fm.spearman_corrcoef(), p, t, [0, 7, 40_000, n]), _ref(p, t))
    _close(_stream(fm.spearman_corrcoef(), t, p, [0, n]), _ref(t, p))


def test_ranks_and_tie_sum_are_exact():
    g = torch.Generator().manual_seed(2)
    n = 3 * _pairs._BLOCK + 5
    x = torch.randint(0, 4, (n,), generator=g).float().numpy()
    keys = _pairs.sorted_keys([x[:10], x[10:11], x[11:]], n)
    c = np.empty(n, dtype=np.int64)

    def put(rows, ranks):
        c[rows] = ranks

    ties = _pairs.walk_ranks(keys, put)
    np.testing.assert_array_equal(c, 2 * ss.rankdata(x) - (n + 1))
    t = np.unique(x, return_counts=True)[1].astype(object)
    assert ties == sum(t ** 3 - t)


def _columns(g, n):
    """float32 columns that bucket badly and well: spread, heavy ties (a run over 1/8 of the rows: the
    in-place fallback), +-0.0, infinities, NaN, few distinct top bits, a constant."""
    spread = torch.randn(n, generator=g) * 1e3
    ties = torch.where(torch.rand(n, generator=g) < 0.6, torch.zeros(n), torch.randn(n, generator=g))
    ties[::3] = -0.0
    edge = torch.randn(n, generator=g)
    edge[::7], edge[1::11], edge[2::13] = float("inf"), -float("inf"), float("nan")
    narrow = 1.0 + torch.rand(n, generator=g) * 1e-3  # one exponent, few 16-bit prefixes
    return [spread, ties, edge, narrow, torch.full((n,), 2.5)]


@pytest.mark.parametrize("n", [1, 5, 33, 3 * _pairs._BLOCK + 7])
def test_bucketed_sort_gives_the_sorted_keys(monkeypatch, n):
    """The sample sort of large columns (`_keys.BUCKET_ROWS`, forced here) equals one plain sort of the keys."""
    g = torch.Generator().manual_seed(n)
    for x in _columns(g, n):
        parts = [x[:n // 3].numpy(), x[n // 3: n // 3 + 1].numpy(), x[n // 3 + 1:].numpy()]
        plain = _pairs.sorted_keys(parts, n)
        monkeypatch.setattr(_keys, "BUCKET_ROWS", 1)
        bucketed = _pairs.sorted_keys(parts, n)
        monkeypatch.setattr(_keys, "BUCKET_ROWS", 1 << 22)
        np.testing.assert_array_equal(bucketed, plain)


def test_bucketed_spearman_matches_scipy(monkeypatch):
    monkeypatch.setattr(_keys, "BUCKET_ROWS", 1)
    g = torch.Generator().manual_seed(4)
    n = 2 * _pairs._BLOCK + 99
    cols = _columns(g, n)
    for p, t in ((cols[0], cols[1]), (cols[3], cols[0]), (cols[1], cols[3])):
        _close(_stream(fm.spearman_corrcoef(), p, t, _cuts(n, g)), _ref(p, t))


def test_num_outputs_columns_match_scipy():
    g = torch.Generator().manual_seed(3)
    n = 2500
    t = torch.round(torch.randn(n, 3, generator=g) * 3)
    p = torch.round(t / 2 + torch.randn(n, 3, generator=g))
    p[:, 2] = 1.5  # constant column: NaN and a warning
    with pytest.warns(UserWarning, match="constant"):
        out = _stream(fm.spearman_corrcoef(num_outputs=3), p, t, _cuts(n, g))
    ref = _ref(p, t)
    assert np.isnan(ref[2]) and torch.isnan(out[2])
    _close(out[:2], ref[:2])


@pytest.mark.parametrize("which", ["preds", "target", "both"])
def test_all_equal_column_is_nan_with_warning(which):
    p, t = torch.randn(100), torch.randn(100)
    if which in ("preds", "both"):
        p = torch.full((100,), 3.0)
    if which in ("target", "both"):
        t = torch.full((100,), -0.0)
    with pytest.warns(UserWarning, match="constant"):
        assert torch.isnan(_stream(fm.spearman_corrcoef(), p, t, [0, 1, 60, 100]))


def test_one_row_is_nan_with_warning():
    with pytest.warns(UserWarning, match="fewer than 2 samples"):
        assert torch.isnan(_stream(fm.spearman_corrcoef(), torch.ones(1), torch.ones(1), [0, 1]))


def _with_nonfinite(seed):
    g = torch.Generator().manual_seed(seed)
    n = 3000
    t = torch.round(torch.randn(n, 2, generator=g) * 4)
    p = torch.round(t + torch.randn(n, 2, generator=g))
    p[17, 0], t[1500, 1], p[2999, 1], t[40, 0] = float("nan"), float("inf"), -float("inf"), float("nan")
    return p, t, _cuts(n, g)


@pytest.mark.parametrize("strategy", ["warn", "ignore"])
def test_nonfinite_rows_left_out_match_scipy(strategy):
    p, t, cuts = _with_nonfinite(4)
    keep = (torch.isfinite(p) & torch.isfinite(t)).all(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _stream(fm.spearman_corrcoef(num_outputs=2, nan_strategy=strategy), p, t, cuts)
    assert any("non-finite" in str(w.message) or "NaN" in str(w.message) for w in caught) == (strategy == "warn")
    _close(out, _ref(p[keep], t[keep]))


def test_nonfinite_disable_nan_columns_and_inf_ranked():
    p, t, cuts = _with_nonfinite(5)
    p[40, 0], t[40, 0], p[17, 0] = 1.0, 1.0, 2.0  # column 0 now finite; column 1 holds inf only
    p[5, 1] = float("nan")
    out = _stream(fm.spearman_corrcoef(num_outputs=2, nan_strategy="disable"), p, t, cuts)
    assert torch.isnan(out[1])
    _close(out[0], _ref(p[:, 0], t[:, 0]))
    p[5, 1] = 0.0  # +-inf are ranked like any value
    out = _stream(fm.spearman_corrcoef(num_outputs=2, nan_strategy="disable"), p, t, cuts)
    _close(out, _ref(p, t))


def test_nonfinite_error_names_the_update_call():
    p, t = torch.randn(50), torch.randn(50)
    t[33] = float("nan")
    m = fm.spearman_corrcoef(nan_strategy="error")
    with pytest.raises(ValueError, match="nan"):
        _stream(m, p, t, [0, 10, 30, 50])


def test_float64_and_mixed_dtypes_take_the_torch_path():
    g = torch.Generator().manual_seed(6)
    p, t = torch.round(torch.randn(700, generator=g) * 3), torch.round(torch.randn(700, generator=g) * 3)
    _close(_stream(fm.spearman_corrcoef(), p.double(), t, [0, 300, 700]), _ref(p, t))
    _close(_stream(fm.spearman_corrcoef(), p, t.double(), [0, 1, 700]), _ref(p, t))


def test_collection_with_kendall_shares_the_state():
    g = torch.Generator().manual_seed(7)
    p, t = torch.randint(0, 9, (900,), generator=g).float(), torch.randint(0, 9, (900,), generator=g).float()
    c = fm.collection({"s": fm.spearman_corrcoef(), "k": fm.kendall_rank_corrcoef()})
    out = _stream(c, p, t, [0, 1, 450, 900])
    _close(out["s"], _ref(p, t))
    _close(out["k"], ss.kendalltau(p.numpy(), t.numpy()).statistic)


def test_extra_memory_is_bounded():
    """Peak traced numpy memory of the finalize stays below twice the state's bytes (8 bytes a row)."""
    import tracemalloc

    n = 1_000_000
    g = torch.Generator().manual_seed(8)
    t = torch.randn(n, generator=g)
    p = 0.8 * t + 0.6 * torch.randn(n, generator=g)
    m = fm.spearman_corrcoef()
    s = m.init()
    for a, b in zip(p.split(50_000), t.split(50_000)):
        s = m.update(s, a, b)
    tracemalloc.start()
    try:
        value = m.finalize(s)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 8 * n
    _close(value, _ref(p, t))
