"""The fast default of the moment metrics (`fmetrics.regression._shifted`): shifted float64 sums of a batch's
float32 arithmetic, against float64 oracles (scikit-learn, SciPy, the concordance formula in numpy) on data
offset by 1e4, with torchmetrics' error on the same data as context; merge re-basing, the first-batch shift,
states of the exact (centred) layout, and serialization.
"""
import io

import numpy as np
import pytest
import scipy.stats as ss
import sklearn.metrics as skm
import torch

import fmetrics as fm
from fmetrics.regression import _host, _shifted
from fmetrics.state import fold

D = 8  # outputs of the torch-path case: 4096 x 8 batches (above the numpy path's limit)


def _ccc(x, y):
    mx, my = x.mean(0), y.mean(0)
    n = x.shape[0]
    sxy = ((x - mx) * (y - my)).sum(0) / (n - 1)
    vx, vy = ((x - mx) ** 2).sum(0) / (n - 1), ((y - my) ** 2).sum(0) / (n - 1)
    return 2 * sxy / (vx + vy + (mx - my) ** 2)


def _offset(batches=6, rows=4096, d=D, offset=1e4, seed=3):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(batches, rows, d, generator=g, dtype=torch.float64)
    target = (offset + z).float()
    preds = (offset + 0.1 + 0.9 * z + 0.4 * torch.randn(batches, rows, d, generator=g, dtype=torch.float64)).float()
    return list(zip(preds, target))


def _oracles(batches):
    p, t = (torch.cat(x).double().numpy() for x in zip(*batches))
    return {
        "r2": skm.r2_score(t, p, multioutput="raw_values"),
        "ev": skm.explained_variance_score(t, p, multioutput="raw_values"),
        "rse": ((t - p) ** 2).sum(0) / ((t - t.mean(0)) ** 2).sum(0),
        "pearson": np.array([ss.pearsonr(p[:, j], t[:, j]).statistic for j in range(p.shape[1])]),
        "ccc": _ccc(p, t),
    }


def _metrics(d, **kw):
    raw = {"multioutput": "raw_values"}
    return {"r2": fm.r2_score(num_outputs=d, **raw, **kw), "ev": fm.explained_variance(num_outputs=d, **raw, **kw),
            "rse": fm.relative_squared_error(num_outputs=1, **kw) if d == 1 else None,
            "pearson": fm.pearson_corrcoef(num_outputs=d, **kw), "ccc": fm.concordance_corrcoef(num_outputs=d, **kw)}


def _stream(metric, batches):
    s = metric.init()
    for p, t in batches:
        s = metric.update(s, p, t)
    return metric.finalize(s)


def _torchmetrics_errors(batches, want):
    import torchmetrics.regression as tm

    make = {"r2": lambda: tm.R2Score(multioutput="raw_values"),
            "ev": lambda: tm.ExplainedVariance(multioutput="raw_values"),
            "pearson": lambda: tm.PearsonCorrCoef(num_outputs=D), "ccc": lambda: tm.ConcordanceCorrCoef(num_outputs=D)}
    out = {}
    for key, new in make.items():
        m = new()
        for p, t in batches:
            m.update(p, t)
        out[key] = float(np.max(np.abs(m.compute().double().numpy() - want[key]) / np.abs(want[key])))
    return out


@pytest.mark.parametrize("layout", ["4096x8 (torch path)", "4096x1 (numpy path)"])
def test_offset_data_default_within_1e6_exact_within_1e9(layout):
    """Values near 1e4 with unit noise, 6 batches: the default is within 1e-6 relative of the float64
    oracles, ``exact=True`` within 1e-9; torchmetrics (float32 raw power sums) is far off on the same data."""
    d = D if layout.startswith("4096x8") else 1
    batches = _offset(d=d)
    if d == 1:
        batches = [(p[:, 0], t[:, 0]) for p, t in batches]
        assert batches[0][0].numel() <= _host.LIMIT
    else:
        assert batches[0][0].numel() > _host.LIMIT
    want = _oracles([(p.reshape(-1, d), t.reshape(-1, d)) for p, t in batches])
    assert 0.5 < want["r2"].min() and want["r2"].max() < 0.99  # a non-trivial problem
    errors = {}
    for exact, bound in ((False, 1e-6), (True, 1e-9)):
        for key, metric in _metrics(d, exact=exact).items():
            if metric is None:
                continue
            got = np.atleast_1d(_stream(metric, batches).numpy())
            errors[key, exact] = float(np.max(np.abs(got - want[key]) / np.abs(want[key])))
            assert errors[key, exact] < bound, (key, exact, errors[key, exact])
    if d == D:  # context: torchmetrics on the same batches (R² ~0.2-1 off, docs/regression.md)
        tm_errors = _torchmetrics_errors(batches, want)
        assert tm_errors["r2"] > 1e-2 and tm_errors["ev"] > 1e-2, tm_errors  # measured: 1.0 and 1.0
        assert all(tm_errors[k] > errors[k, False] for k in tm_errors), (tm_errors, errors)


def test_offset_data_split_across_ranks_with_different_shifts():
    """Three ranks whose first batches differ (offsets 1e4, 1e4 + 40, 1e4 - 25): merge re-bases the sums onto
    one shift in float64; any rank order is within 1e-6 of the oracle and within 1e-12 of each other."""
    parts = [_offset(batches=3, rows=2048, d=4, offset=o, seed=s) for o, s in ((1e4, 1), (1e4 + 40, 2), (1e4 - 25, 3))]
    want = _oracles([b for part in parts for b in part])
    for key, metric in _metrics(4).items():
        if metric is None:
            continue
        states = []
        for part in parts:
            s = metric.init()
            for p, t in part:
                s = metric.update(s, p, t)
            states.append(s)
        assert len({tuple(s.shift[0].tolist()) for s in states}) == 3  # three different shifts
        values = [metric.finalize(fold(metric.merge, [states[i] for i in order]))
                  for order in ((0, 1, 2), (2, 0, 1), (1, 2, 0))]
        err = np.abs(values[0].numpy() - want[key]) / np.abs(want[key])
        assert err.max() < 1e-6, (key, err)
        for v in values[1:]:
            torch.testing.assert_close(v, values[0], rtol=1e-12, atol=0)


def test_merge_rebases_exactly_and_an_empty_side_adopts_the_shift():
    """The re-based sums are the float64 sums of the data about the kept shift (a hand computation), and
    ``merge(init(), s)`` / ``merge(s, init())`` are ``s`` bit for bit."""
    m = fm.pearson_corrcoef(num_outputs=2)
    g = torch.Generator().manual_seed(7)
    a_data = (torch.randn(50, 2, generator=g) + 100, torch.randn(50, 2, generator=g) - 3)
    b_data = (torch.randn(30, 2, generator=g) + 130, torch.randn(30, 2, generator=g) + 9)
    a, b = m.update(m.init(), *a_data), m.update(m.init(), *b_data)
    assert torch.equal(a.shift, torch.stack((a_data[0][0], a_data[1][0])).double())  # the first row
    merged = m.merge(a, b)
    assert torch.equal(merged.shift, a.shift)
    x = torch.cat((a_data[0], b_data[0])).double() - a.shift[0]
    y = torch.cat((a_data[1], b_data[1])).double() - a.shift[1]
    hand = torch.stack((x.sum(0), y.sum(0), (x * x).sum(0), (y * y).sum(0), (x * y).sum(0)))
    torch.testing.assert_close(merged.sums, hand, rtol=1e-6, atol=1e-4)  # float32 batch products, float64 sums
    assert int(merged.n) == 80
    for s in (m.merge(m.init(), b), m.merge(b, m.init())):
        assert all(torch.equal(u, v) for u, v in zip(s[:3], b[:3]))


def test_the_shift_is_taken_once_and_later_batches_keep_it():
    m = fm.r2_score()  # the target's shift (the residual's sums are plain: nothing cancels in sum (t - p)^2)
    s = m.update(m.init(), torch.tensor([2.0, 5.0]), torch.tensor([1.0, 4.0]))
    assert s.shift.flatten().tolist() == [1.0]
    s = m.update(s, torch.tensor([50.0]), torch.tensor([40.0]))
    assert s.shift.flatten().tolist() == [1.0]
    p = fm.pearson_corrcoef()
    s = p.update(p.init(), torch.tensor([2.0, 5.0]), torch.tensor([1.0, 4.0]))
    assert p.update(s, torch.tensor([50.0]), torch.tensor([40.0])).shift.flatten().tolist() == [2.0, 1.0]
    # float64 inputs: the shift is the first row rounded to float32 (exact in both work dtypes)
    p64, t64 = torch.tensor([0.1, 0.3, 0.8], dtype=torch.float64), torch.tensor([0.2, 0.7, 0.5], dtype=torch.float64)
    s64 = m.update(m.init(), p64, t64)
    assert s64.shift[0, 0].item() == torch.tensor(0.2).item() != 0.2
    assert float(m.finalize(s64)) == pytest.approx(skm.r2_score(t64.numpy(), p64.numpy()), rel=1e-12)


def test_ignore_takes_the_shift_from_finite_rows():
    """``nan_strategy="ignore"``: a first row with a NaN does not become the shift (the finite rows' mean does);
    values match scikit-learn on the finite rows, on the torch path (deferred mode) too."""
    g = torch.Generator().manual_seed(9)
    t = 1e4 + torch.randn(600, 3, generator=g)
    p = t + 0.5 * torch.randn(600, 3, generator=g)
    p[0, 1] = float("nan")
    t[7, 2] = float("inf")
    keep = torch.isfinite(p).all(1) & torch.isfinite(t).all(1)
    want = skm.r2_score(t[keep].double().numpy(), p[keep].double().numpy(), multioutput="raw_values")
    m = fm.r2_score(num_outputs=3, multioutput="raw_values", nan_strategy="ignore")
    with fm.validation.mode("deferred"):
        s = m.update(m.init(), p, t)
    assert torch.isfinite(s.shift).all()
    np.testing.assert_allclose(m.finalize(s).numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("name", ["r2_score", "pearson_corrcoef"])
def test_a_state_of_the_exact_layout_merges_into_the_default(name):
    """A centred state (``exact=True``'s layout, also the default's before the shifted sums) saved with
    ``torch.save`` loads with ``torch.load``'s defaults, and the default metric updates, merges and finalizes
    it: converted exactly (shift = its mean rounded to float32)."""
    g = torch.Generator().manual_seed(11)
    batches = [(torch.randn(n, generator=g) + 50, torch.randn(n, generator=g) + 50) for n in (40, 25, 60)]
    batches = [(t + 0.3 * p, t) for p, t in batches]
    old, new = getattr(fm, name)(exact=True), getattr(fm, name)()
    buf = io.BytesIO()
    torch.save(old.update(old.init(), *batches[0]), buf)
    buf.seek(0)
    saved = torch.load(buf)
    s = new.update(saved, *batches[1])
    s = new.merge(s, new.update(new.init(), *batches[2]))
    also = new.merge(new.update(new.update(new.init(), *batches[2]), *batches[1]), saved)  # old on the right
    want = _stream(old, batches)
    torch.testing.assert_close(new.finalize(s), want, rtol=1e-6, atol=0)
    torch.testing.assert_close(new.finalize(also), want, rtol=1e-6, atol=0)
    torch.testing.assert_close(new.finalize(saved), old.finalize(saved), rtol=1e-12, atol=0)


def test_the_shifted_state_round_trips_torch_load_defaults():
    m = fm.collection({"r2": fm.r2_score(num_outputs=2), "pearson": fm.pearson_corrcoef(num_outputs=2)})
    g = torch.Generator().manual_seed(12)
    s = m.update(m.init(), torch.randn(30, 2, generator=g), torch.randn(30, 2, generator=g))
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    for key, value in m.finalize(loaded).items():
        torch.testing.assert_close(value, m.finalize(s)[key], rtol=0, atol=0)


# ------------------------------------------------------------------ NRMSE: R²'s shifted sums plus min and max

NORMS = ("mean", "range", "std", "l2")


def _nrmse_oracle(p, t):
    """numpy float64 NRMSE per column of ``(N, D)`` float64 arrays, for the four normalizations."""
    rmse = np.sqrt(((p - t) ** 2).mean(0))
    return {"mean": rmse / t.mean(0), "range": rmse / (t.max(0) - t.min(0)), "std": rmse / t.std(0),
            "l2": rmse / np.sqrt((t ** 2).sum(0))}


def _nrmse_metrics(d, **kw):
    return {k: fm.normalized_root_mean_squared_error(normalization=k, num_outputs=d, **kw) for k in NORMS}


@pytest.mark.parametrize("offset", [1.0, 1e4])
@pytest.mark.parametrize("layout", ["4096x8 (torch path)", "4096x1 (numpy path)"])
def test_nrmse_default_within_1e6_exact_within_1e9(layout, offset):
    """Plain (mean 1: a target mean near 0 would make ``"mean"`` ill-conditioned in any float32 sum) and
    1e4-offset float32 data, 6 batches, all four normalizations: the default within 1e-6 relative of numpy's
    float64 formulas, ``exact=True`` within 1e-9."""
    d = D if layout.startswith("4096x8") else 1
    batches = _offset(d=d, offset=offset)
    if d == 1:
        batches = [(p[:, 0], t[:, 0]) for p, t in batches]
    p, t = (torch.cat(x).double().reshape(-1, d).numpy() for x in zip(*batches))
    want = _nrmse_oracle(p, t)
    for exact, bound in ((False, 1e-6), (True, 1e-9)):
        metrics = _nrmse_metrics(d, exact=exact)
        state = metrics["mean"].init()  # one state for the four
        for b in batches:
            state = metrics["mean"].update(state, *b)
        for key, metric in metrics.items():
            got = np.atleast_1d(metric.finalize(state).numpy())
            err = float(np.max(np.abs(got - want[key]) / np.abs(want[key])))
            assert err < bound, (key, exact, err)


def test_nrmse_split_invariance_merge_order_and_empty_batches():
    """Ranks with different shifts (and empty batches) in any merge order give one value (within 1e-12), and
    that and one batch of all the data are within 1e-6 of the oracle."""
    parts = [_offset(batches=3, rows=700, d=3, offset=o, seed=s) for o, s in ((1e4, 1), (1e4 + 40, 2), (-25.0, 3))]
    empty = (torch.zeros(0, 3), torch.zeros(0, 3))
    p, t = (torch.cat(x).double().numpy() for x in zip(*[b for part in parts for b in part]))
    want = _nrmse_oracle(p, t)
    whole = [(torch.from_numpy(p).float(), torch.from_numpy(t).float())]
    for key, metric in _nrmse_metrics(3).items():
        states = []
        for part in parts:
            s = metric.update(metric.init(), *empty)
            for b in part:
                s = metric.update(metric.update(s, *b), *empty)
            states.append(s)
        values = [metric.finalize(fold(metric.merge, [states[i] for i in order]))
                  for order in ((0, 1, 2), (2, 0, 1), (1, 2, 0))]
        values.append(metric.finalize(metric.merge(metric.init(), fold(metric.merge, states))))
        for v in (values[0], _stream(metric, whole)):  # another batching: other float32 rounding
            np.testing.assert_allclose(v.numpy(), want[key], rtol=1e-6)
        for v in values[1:]:
            torch.testing.assert_close(v, values[0], rtol=1e-12, atol=0)


@pytest.mark.parametrize("exact", [False, True])
def test_nrmse_ignore_leaves_rows_with_nan_out(exact):
    """``nan_strategy="ignore"``: a row with a NaN/inf in preds or target is left out of every statistic (the
    range too), on the eager and the deferred path; ``"error"`` raises naming the metric."""
    g = torch.Generator().manual_seed(9)
    t = 1e4 + torch.randn(600, 3, generator=g)
    p = t + 0.5 * torch.randn(600, 3, generator=g)
    p[0, 1], t[7, 2], t[9, 0] = float("nan"), float("inf"), -float("inf")
    t[11, 0] = 1e6  # the row's preds are NaN: not the maximum
    p[11, 2] = float("nan")
    keep = torch.isfinite(p).all(1) & torch.isfinite(t).all(1)
    want = _nrmse_oracle(p[keep].double().numpy(), t[keep].double().numpy())
    for key, metric in _nrmse_metrics(3, nan_strategy="ignore", exact=exact).items():
        np.testing.assert_allclose(metric(p, t).numpy(), want[key], rtol=1e-6)
        with fm.validation.mode("deferred"):
            s = metric.update(metric.update(metric.init(), p[:300], t[:300]), p[300:], t[300:])
        np.testing.assert_allclose(metric.finalize(s).numpy(), want[key], rtol=1e-6)
    with pytest.raises(ValueError, match="normalized_root_mean_squared_error"):
        fm.normalized_root_mean_squared_error(num_outputs=3, exact=exact)(p, t)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nrmse_constant_target_std_and_range_are_inf(exact, dtype):
    """A constant target (0.1: not a float32 value in float64) gives ``inf`` for ``"std"`` and ``"range"``
    however the data is split, and finite values for ``"mean"`` and ``"l2"``."""
    p, t = torch.arange(5.0, dtype=dtype), torch.full((5,), 0.1, dtype=dtype) + 1e4
    rmse = float(torch.sqrt(((p.double() - t.double()) ** 2).mean()))
    for key, metric in _nrmse_metrics(1, exact=exact).items():
        for cut in (0, 2, 5):
            v = metric.finalize(metric.merge(metric.update(metric.init(), p[:cut], t[:cut]),
                                             metric.update(metric.init(), p[cut:], t[cut:])))
            if key in ("std", "range"):
                assert torch.isinf(v), (key, cut, v)
            else:
                ref = rmse / (float(t[0]) if key == "mean" else float(t[0]) * 5 ** 0.5)
                assert float(v) == pytest.approx(ref, rel=1e-9 if exact else 1e-6), (key, cut)


def test_nrmse_large_batches_compile_with_dynamic_sizes_and_vmap():
    """The row-folded min/max of large batches (the law suite's batches are small): ``torch.compile(fullgraph)``
    over batch sizes that turn dynamic, and ``vmap``, match the eager update."""
    m = fm.normalized_root_mean_squared_error(normalization="range", num_outputs=4)
    step = torch.compile(m.update, backend="eager", fullgraph=True)
    g = torch.Generator().manual_seed(13)
    s, ref = m.init(), m.init()
    for n in (4096, 8192, 5000):
        p, t = torch.randn(n, 4, generator=g), torch.randn(n, 4, generator=g)
        s, ref = step(s, p, t), m.update(ref, p, t)
    torch.testing.assert_close(m.finalize(s), m.finalize(ref), rtol=1e-12, atol=0)
    ps, ts = torch.randn(3, 4096, 4, generator=g), torch.randn(3, 4096, 4, generator=g)
    stacked = torch.func.vmap(lambda p, t: m.update(m.init(), p, t))(ps, ts)
    assert torch.equal(stacked.min, ts.double().amin(1)) and torch.equal(stacked.max, ts.double().amax(1))


@pytest.mark.parametrize("name", ["r2", "ev", "pearson", "mse", "mae"])
def test_the_eager_cpu_update_matches_the_traceable_one(name):
    """Large CPU batches take the eager steady update (torch adds of the batch sums, a ``tolist`` check); in
    ``validation.mode("deferred")`` the traceable update runs instead: the same state up to the float32
    rounding of the batch sums (R²'s residual squares are fused on the eager path; the eager path re-bases
    explained variance's residual, near 0, to shift 0: compared on one shift), within 1e-6 of the float64
    oracle. A non-finite batch raises on the eager path, the state kept."""
    from fmetrics import validation

    batches = _offset(batches=3, rows=4096, d=4)  # 16384 entries an input: above the numpy path's limit
    assert batches[0][0].numel() > _host.LIMIT
    metric = {"mse": fm.mean_squared_error(num_outputs=4), "mae": fm.mean_absolute_error(num_outputs=4),
              **_metrics(4)}[name]
    states = []
    for mode in ("auto", "deferred"):
        with validation.mode(mode):
            s = metric.init()
            for p, t in batches:
                s = metric.update(s, p, t)
        states.append(s)
    if hasattr(states[0], "shift"):
        states[1] = states[1]._replace(shift=states[0].shift, sums=_shifted._rebased(states[1], states[0].shift))
    for a, b in zip(*(torch.utils._pytree.tree_leaves(s) for s in states)):
        if a.is_floating_point():
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
        else:
            assert torch.equal(a, b)
    p, t = (torch.cat(x).double() for x in zip(*batches))
    if name in ("mse", "mae"):
        want = ((p - t) ** 2 if name == "mse" else (p - t).abs()).mean(0).numpy()
    else:
        want = _oracles([(p, t)])[name]
    got = metric.finalize(states[0]).numpy()
    assert np.max(np.abs(got - want) / np.abs(want)) < 1e-6
    bad = batches[0][0].clone()
    bad[5, 1] = float("nan")
    with pytest.raises(ValueError, match="finite"):
        metric.update(states[0], bad, batches[0][1])


@pytest.mark.parametrize("rows", [4096, 4100, 4097])
@pytest.mark.parametrize("name", ["r2", "ev", "pearson"])
def test_two_streams_in_turn_and_odd_layouts_agree_with_the_oracle(name, rows):
    """The eager steady update subtracts the shifts over ``(rows / m, m D)`` views of contiguous batches (``m``
    the largest power of two up to 64 dividing ``rows``: 64, 4, 1 here) and reuses the tiled shifts while the
    same state's shift comes back: streams with other shifts updated in turn, non-contiguous (column-major)
    batches, and a residual shift that float32 cannot hold each stay within 1e-6 of the float64 oracle."""
    metric = _metrics(4)[name]
    streams = [_offset(batches=3, rows=rows, d=4, offset=off, seed=seed) for off, seed in ((1e4, 5), (-3e3, 6))]
    streams.append([(p.T.contiguous().T, t.T.contiguous().T) for p, t in streams[0]])  # column-major views
    streams.append([(p - 1e4 + 5.3, t / 1e4) for p, t in streams[0]])  # K_e = K_p - K_t not a float32 value
    assert not streams[2][0][0].is_contiguous() and streams[0][0][0].numel() > _host.LIMIT
    k_e = fm.explained_variance(num_outputs=4).update(fm.explained_variance(num_outputs=4).init(),
                                                      *streams[3][0]).shift[1]
    assert not torch.equal(k_e.float().double(), k_e)
    states = [metric.init() for _ in streams]
    for i in range(3):
        for j, batches in enumerate(streams):
            states[j] = metric.update(states[j], *batches[i])
    pairs = list(zip(states, streams)) + [(metric.merge(states[0], states[3]), streams[0] + streams[3])]
    for s, batches in pairs:  # the merge re-bases one stream's sums by ~1e4
        want = _oracles([tuple(torch.cat(x).double() for x in zip(*batches))])[name]
        got = metric.finalize(s).numpy()
        assert np.max(np.abs(got - want) / np.abs(want)) < 1e-6


@pytest.mark.parametrize("name", ["r2", "ev", "pearson"])
def test_a_stream_near_zero_is_rebased_to_shift_zero_on_the_eager_path(name):
    """Large CPU batches whose shifted variables lie within a standard deviation of 0 (``mean^2 <= var``)
    are re-based once, exactly, to shift 0 by the eager steady update (their batches then skip the shift
    passes and read the inputs as they are, unmodified); an offset stream keeps its first-row shift (but for
    explained variance's residual, near 0 there too), and the traceable update (deferred mode) keeps it. Every state, and merges of a re-based with an offset state
    either way round, stay within 1e-6 of the float64 oracle."""
    from fmetrics import validation

    metric = _metrics(4)[name]
    near = _offset(batches=3, rows=4096, d=4, offset=0.3, seed=8)  # means 0.3-0.4, residual mean 0.1: std ~1 / 0.4
    far = _offset(batches=3, rows=4096, d=4, offset=1e4, seed=9)
    kept = [tuple(x.clone() for x in batch) for batch in near]

    def stream(batches):
        s = metric.init()
        for p, t in batches:
            s = metric.update(s, p, t)
        return s

    s_near, s_far = stream(near), stream(far)
    with validation.mode("deferred"):
        s_traced = stream(near)
    assert not s_near.shift.any() and s_far.shift[0].all() and s_traced.shift.any()
    assert s_far.shift[-1].any() == (name != "ev")  # explained variance's residual is near 0 in both streams
    assert all(torch.equal(a, b) for batch, old in zip(near, kept) for a, b in zip(batch, old))
    cases = [(s_near, near), (s_far, far), (s_traced, near), (metric.merge(s_near, s_far), near + far),
             (metric.merge(s_far, s_near), far + near)]
    for s, batches in cases:
        want = _oracles([tuple(torch.cat(x).double() for x in zip(*batches))])[name]
        got = metric.finalize(s).numpy()
        assert np.max(np.abs(got - want) / np.abs(want)) < 1e-6
