"""Offset-data stability (issue 6, item 2): values near 1e6 with unit noise, float32 inputs,
1000 batches split across 3 simulated ranks, merged with `merge` in rank order.

Pearson, R², explained variance and concordance must match SciPy / scikit-learn
(float64 on the same float32 values) to 1e-9 relative. ``python -m
tests.test_regression_stability`` also prints torchmetrics' error on the same
data (its three ranks' states combined as its DDP sync does).
"""
import numpy as np
import scipy.stats as ss
import sklearn.metrics as skm
import torch

import fmetrics as fm
from fmetrics.state import fold

OFFSET, BATCHES, ROWS, RANKS = 1e6, 1000, 64, 3


def offset_batches(seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(BATCHES, ROWS, generator=g, dtype=torch.float64)
    noise = torch.randn(BATCHES, ROWS, generator=g, dtype=torch.float64)
    target = (OFFSET + z).float()
    preds = (OFFSET + 0.1 + 0.9 * z + 0.4 * noise).float()
    return list(zip(preds, target))


def _ccc(x, y):
    mx, my = x.mean(), y.mean()
    sxy = ((x - mx) * (y - my)).sum() / (len(x) - 1)
    vx, vy = ((x - mx) ** 2).sum() / (len(x) - 1), ((y - my) ** 2).sum() / (len(y) - 1)
    return 2 * sxy / (vx + vy + (mx - my) ** 2)


def oracles(batches):
    p = torch.cat([b[0] for b in batches]).double().numpy()
    t = torch.cat([b[1] for b in batches]).double().numpy()
    return {
        "pearson": ss.pearsonr(p, t).statistic,
        "r2": skm.r2_score(t, p),
        "explained_variance": skm.explained_variance_score(t, p),
        "concordance": _ccc(p, t),
    }


def _shards(batches):
    edges = np.linspace(0, len(batches), RANKS + 1).astype(int)
    return [batches[a:b] for a, b in zip(edges[:-1], edges[1:])]


def fmetrics_values(batches):
    metric = fm.collection({"pearson": fm.pearson_corrcoef(), "r2": fm.r2_score(),
                            "explained_variance": fm.explained_variance(), "concordance": fm.concordance_corrcoef()})
    states = []
    for shard in _shards(batches):
        s = metric.init()
        for p, t in shard:
            s = metric.update(s, p, t)
        states.append(s)
    return {k: float(v) for k, v in metric.finalize(fold(metric.merge, states)).items()}


def torchmetrics_values(batches):
    """torchmetrics on the same shards; states combined as its DDP sync does (stack for Pearson-like, sum else)."""
    import torchmetrics.regression as tm

    out = {}
    for key, cls in (("pearson", tm.PearsonCorrCoef), ("r2", tm.R2Score),
                     ("explained_variance", tm.ExplainedVariance), ("concordance", tm.ConcordanceCorrCoef)):
        ranks = []
        for shard in _shards(batches):
            m = cls()
            for p, t in shard:
                m.update(p, t)
            ranks.append(m)
        synced = cls()
        for name, default in synced._defaults.items():
            values = [getattr(r, name) for r in ranks]
            if synced._reductions[name] is None:  # gathered, stacked, aggregated in compute
                setattr(synced, name, torch.stack(values))
            else:
                setattr(synced, name, sum(values[1:], values[0]))
        out[key] = float(synced.compute())
    return out


def relative_errors(values, want):
    return {k: abs(values[k] - want[k]) / abs(want[k]) for k in want}


def test_offset_data_matches_float64_oracles_to_1e9():
    batches = offset_batches()
    want = oracles(batches)
    assert 0.5 < want["pearson"] < 0.99 and 0.3 < want["r2"] < 0.99  # a non-trivial problem
    errors = relative_errors(fmetrics_values(batches), want)
    assert max(errors.values()) < 1e-9, errors


def test_offset_data_rank_order_does_not_matter():
    batches = offset_batches(seed=1)
    forward = fmetrics_values(batches)
    backward = fmetrics_values(batches[::-1])
    assert max(relative_errors(backward, forward).values()) < 1e-9


def test_offset_data_after_a_one_row_first_batch():
    """The update's shift is the state's mean: here the first batch's single row, then 4096-row batches."""
    g = torch.Generator().manual_seed(2)
    z = torch.randn(3, 4096, generator=g, dtype=torch.float64)
    target = (OFFSET + z).float()
    preds = (OFFSET + 0.1 + 0.9 * z + 0.4 * torch.randn(3, 4096, generator=g, dtype=torch.float64)).float()
    batches = [(preds[0, :1], target[0, :1]), (preds[1], target[1]), (preds[2], target[2])]
    want = oracles(batches)
    metric = fm.collection({"pearson": fm.pearson_corrcoef(), "r2": fm.r2_score(),
                            "explained_variance": fm.explained_variance(), "concordance": fm.concordance_corrcoef()})
    s = metric.init()
    for p, t in batches:
        s = metric.update(s, p, t)
    errors = relative_errors({k: float(v) for k, v in metric.finalize(s).items()}, want)
    assert max(errors.values()) < 1e-9, errors


def _near_1e4(seed=3, batches=20, rows=4096):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(batches, rows, generator=g, dtype=torch.float64)
    target = (1e4 + z).float()
    preds = (1e4 + 0.1 + 0.9 * z + 0.4 * torch.randn(batches, rows, generator=g, dtype=torch.float64)).float()
    return list(zip(preds, target))


def test_the_exact_option_and_the_fast_default_on_data_near_1e4():
    """Issues 17 and 33: float32 inputs near 1e4. ``exact=True`` MSE, MAE, R² and explained variance are
    within 1e-9 of scikit-learn in float64; the default (a batch's arithmetic in float32, running sums in
    float64; shifted sums for R² and explained variance) within 1e-6 (tests/test_regression_shifted.py
    covers the large-batch path)."""
    batches = _near_1e4()
    p = torch.cat([b[0] for b in batches]).double().numpy()
    t = torch.cat([b[1] for b in batches]).double().numpy()
    want = {"mse": skm.mean_squared_error(t, p), "mae": skm.mean_absolute_error(t, p), "r2": skm.r2_score(t, p),
            "ev": skm.explained_variance_score(t, p)}
    factories = {"mse": fm.mean_squared_error, "mae": fm.mean_absolute_error, "r2": fm.r2_score,
                 "ev": fm.explained_variance}
    for exact, bound in ((True, 1e-9), (False, 1e-6)):
        for key, make in factories.items():
            m = make(exact=exact)
            s = m.init()
            for a, b in batches:
                s = m.update(s, a, b)
            err = abs(float(m.finalize(s)) - want[key]) / abs(want[key])
            assert err < bound, (key, exact, err)


def test_large_batches_already_in_the_work_dtype_shift_without_copies(monkeypatch):
    """``exact=True``: batches over the host path's limit whose inputs need no cast (float64 inputs) are
    shifted straight into fresh buffers (`_moments.shifted`); float32 inputs are cast (the other branch).
    After a small first batch (the numpy path), the values are scikit-learn's / SciPy's on data near 1e4,
    for ``exact=True`` (1e-9) and the default (shifted sums, `_shifted`: 1e-6 for float32)."""
    from fmetrics.regression import _moments

    calls = []
    real = _moments.shifted
    monkeypatch.setattr(_moments, "shifted", lambda *a: calls.append(a[3]) or real(*a))
    g = torch.Generator().manual_seed(5)
    z = torch.randn(3, 4096, 4, generator=g, dtype=torch.float64)
    target = 1e4 + z
    preds = 1e4 + 0.1 + 0.9 * z + 0.4 * torch.randn(3, 4096, 4, generator=g, dtype=torch.float64)
    for dtype, exact, bound in ((torch.float64, True, 1e-9), (torch.float32, True, 1e-9), (torch.float64, False, 1e-9),
                                (torch.float32, False, 1e-6)):
        batches = [(preds[0, :8], target[0, :8])] + list(zip(preds, target))  # first batch: the host path
        batches = [(a.to(dtype), b.to(dtype)) for a, b in batches]
        p, t = (torch.cat(x).double().numpy() for x in zip(*batches))
        want = {"r2": skm.r2_score(t, p, multioutput="raw_values"),
                "ev": skm.explained_variance_score(t, p, multioutput="raw_values"),
                "pearson": np.array([ss.pearsonr(p[:, j], t[:, j]).statistic for j in range(4)])}
        metrics = {"r2": fm.r2_score(num_outputs=4, multioutput="raw_values", exact=exact),
                   "ev": fm.explained_variance(num_outputs=4, multioutput="raw_values", exact=exact),
                   "pearson": fm.pearson_corrcoef(num_outputs=4, exact=exact)}
        for key, m in metrics.items():
            calls.clear()
            s = m.init()
            for a, b in batches:
                s = m.update(s, a, b)
            uncast = exact and dtype == torch.float64
            assert len(calls) == (3 if uncast else 0) and all(r == (key != "pearson") for r in calls), (key, calls)
            err = np.abs(m.finalize(s).numpy() - want[key]) / np.abs(want[key])
            assert err.max() < bound, (key, dtype, err)


if __name__ == "__main__":
    data = offset_batches()
    ref = oracles(data)
    for who, fn in (("fmetrics", fmetrics_values), ("torchmetrics", torchmetrics_values)):
        vals = fn(data)
        for k, e in relative_errors(vals, ref).items():
            print(f"{who:13s} {k:19s} value={vals[k]:.12g} oracle={ref[k]:.12g} relative error={e:.3g}")
