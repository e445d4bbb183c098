"""The numpy path of small CPU batches (`fmetrics.regression._host`) against the torch path and scikit-learn.

Each case runs a metric twice over the same small batches: once as users do
(batches of at most `_host.LIMIT` entries take the numpy path; a spy checks
that they did) and once with the numpy path switched off. The two agree to
float64 rounding (``exact=True``) or float32 rounding (the default), and the
values match scikit-learn / SciPy in float64 to 1e-9 (``exact=True``) or
1e-6 (the default: a batch's arithmetic in float32; the numpy path sums it in
float64, the torch path in float32).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics as skm
import torch

import fmetrics as fm
from fmetrics.regression import _host, _shifted

ORACLES = {
    "mean_squared_error": skm.mean_squared_error,
    "mean_absolute_error": skm.mean_absolute_error,
    "r2_score": skm.r2_score,
    "explained_variance": skm.explained_variance_score,
    "pearson_corrcoef": lambda t, p: scipy.stats.pearsonr(p, t)[0],
}


def _batches(dtype, offset, seed=0, sizes=(1, 7, 16, 300)):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        t = offset + 3 * torch.randn(n, generator=g, dtype=torch.float64)
        p = t + 0.2 + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
        out.append((p.to(dtype), t.to(dtype)))
    return out


def _run(metric, batches):
    s = metric.init()
    for p, t in batches:
        s = metric.update(s, p, t)
    return metric.finalize(s)


def _spied(monkeypatch):
    calls = []
    for module, fn in ((_host, "values"), (_host, "shifted"), (_shifted, "_host_update")):
        real = getattr(module, fn)  # the error metrics, exact=True's moments, the default's moments
        monkeypatch.setattr(module, fn, lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k))
    return calls


# exact: (paths agree to, oracle agrees to); the default's float32 batch arithmetic agrees to 1e-6
MODES = {True: (1e-12, 1e-9), False: (1e-6, 1e-6)}


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("name", sorted(ORACLES))
@pytest.mark.parametrize("dtype,offset", [(torch.float32, 0.0), (torch.float32, 1e4), (torch.float64, 1e6),
                                          (torch.int32, 50.0), (torch.float16, 2.0)])
def test_numpy_path_matches_torch_path_and_oracle(monkeypatch, name, dtype, offset, exact):
    batches = _batches(dtype, offset)
    if dtype == torch.int32:
        batches = [(p.round().to(dtype), t.round().to(dtype)) for p, t in batches]
    make = lambda: getattr(fm, name)(exact=exact)
    paths, oracle = MODES[exact]
    calls = _spied(monkeypatch)
    host = float(_run(make(), batches))
    assert len(calls) == len(batches)  # every batch took the numpy path
    monkeypatch.setattr(_host, "LIMIT", -1)
    plain = float(_run(make(), batches))
    assert len(calls) == len(batches)  # ... and none did with it switched off
    assert host == pytest.approx(plain, rel=paths, abs=1e-12)
    p = torch.cat([b[0] for b in batches]).double().numpy()
    t = torch.cat([b[1] for b in batches]).double().numpy()
    assert host == pytest.approx(ORACLES[name](t, p), rel=oracle)


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_the_fast_default_keeps_its_float32_arithmetic_on_the_numpy_path(monkeypatch, name):
    """The default on small float32 batches near 1e4: both paths within 1e-6 of ``exact=True``, and the
    float32 arithmetic shows (the values are not the exact ones) where a residual is rounded."""
    batches = _batches(torch.float32, 1e4, seed=1, sizes=(16,) * 20)
    host = float(_run(getattr(fm, name)(), batches))
    exact = float(_run(getattr(fm, name)(exact=True), batches))
    monkeypatch.setattr(_host, "LIMIT", -1)
    plain = float(_run(getattr(fm, name)(), batches))
    assert host == pytest.approx(plain, rel=1e-6)
    assert host == pytest.approx(exact, rel=1e-6)
    if name not in ("mean_squared_error", "mean_absolute_error"):  # exact differences of 16 values near 1e4
        assert plain != exact  # the torch path sums the shifted squares and products in float32


@pytest.mark.parametrize("exact", [True, False])
@pytest.mark.parametrize("name", sorted(ORACLES))
def test_numpy_path_with_several_outputs(monkeypatch, name, exact):
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(n, 3, generator=g) + 5, torch.randn(n, 3, generator=g) + 5) for n in (2, 9, 40)]
    batches = [(t + 0.3 * p, t) for p, t in batches]
    make = lambda: getattr(fm, name)(num_outputs=3, exact=exact, **({"multioutput": "raw_values"}
                                                                     if name in ("r2_score", "explained_variance")
                                                                     else {}))
    host = _run(make(), batches)
    monkeypatch.setattr(_host, "LIMIT", -1)
    plain = _run(make(), batches)
    torch.testing.assert_close(host, plain, rtol=MODES[exact][0], atol=1e-12)


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_nonfinite_input_raises_and_the_state_is_kept(name):
    metric = getattr(fm, name)()
    good = _batches(torch.float32, 0.0, sizes=(8,))[0]
    s = metric.update(metric.init(), *good)
    bad_p = good[0].clone()
    bad_p[3] = float("inf")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's RuntimeWarning on inf - inf must not leak
        with pytest.raises(ValueError, match=rf"{name}: preds must be finite.*inf"):
            metric.update(s, bad_p, good[1])
    assert float(metric.finalize(s)) == pytest.approx(float(metric(*good)), rel=1e-12)


@pytest.mark.parametrize("name", sorted(ORACLES))
def test_disable_propagates_nan_without_numpy_warnings(name):
    metric = getattr(fm, name)(nan_strategy="disable")
    p, t = _batches(torch.float32, 0.0, sizes=(8,))[0]
    p[2] = float("nan")
    t[5] = float("inf")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's, on inf - inf or NaN
        s = metric.update(metric.init(), p, t)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # R², EV: "the target is constant" (NaN is not finite)
        value = metric.finalize(s)
    assert torch.isnan(value)


def test_large_batches_and_autograd_keep_the_torch_path(monkeypatch):
    calls = _spied(monkeypatch)
    p, t = _batches(torch.float32, 0.0, sizes=(_host.LIMIT + 1,))[0]
    fm.r2_score()(p, t)
    assert not calls
    p = p[:10].clone().requires_grad_(True)
    value = fm.mean_squared_error()(p, t[:10])
    value.backward()
    assert not calls
    torch.testing.assert_close(p.grad, (2 * (p - t[:10]) / 10).detach().double().float(), rtol=1e-6, atol=1e-7)
