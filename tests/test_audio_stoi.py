"""STOI / extended STOI parity: pystoi (the reference implementation; torchmetrics wraps it) on random
signals, silence edges, short signals, 8/10/16/44.1 kHz, float32 and float64 inputs (<= 1e-4 absolute;
measured ~1e-15 for float64, ~1e-7 for float32)."""
import doctest
import warnings

import numpy as np
import pytest
import torch

import fmetrics
from fmetrics import audio as A
from fmetrics.audio import stoi as S
from tests._kernels import on_path

pystoi = pytest.importorskip("pystoi", reason="pystoi is the STOI oracle (in the dev extras)")


def _oracle(p, t, fs, extended):
    p = p.reshape(-1, p.shape[-1]).double().numpy()
    t = t.reshape(-1, t.shape[-1]).double().numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pystoi warns (and returns 1e-5) when < 30 frames are left
        return torch.tensor([pystoi.stoi(ti, pi, fs, extended) for pi, ti in zip(p, t)], dtype=torch.float64)


@pytest.fixture(params=["native", "torch"])
def windows(request, monkeypatch):
    """Both CPU paths of STOI's band levels and windows: `fmetrics._native`'s and torch's."""
    return on_path(request.param, monkeypatch, S)


def _noisy(shape, seed=0, noise=0.7):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    return t + noise * torch.randn(shape, generator=g, dtype=torch.float64), t


@pytest.mark.parametrize("extended", [False, True], ids=["stoi", "estoi"])
@pytest.mark.parametrize("fs,seconds", [(8000, 1.5), (16000, 1.0), (10000, 0.7), (44100, 0.5)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_stoi_vs_pystoi_random(fs, seconds, extended, dtype, windows):
    p, t = _noisy((3, int(fs * seconds)), seed=fs)
    got = A.short_time_objective_intelligibility(fs=fs, extended=extended, per_example=True)(p.to(dtype), t.to(dtype))
    want = _oracle(p.to(dtype), t.to(dtype), fs, extended)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=0, atol=tol)


def _edge_cases(fs):
    n = fs  # 1 s
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, generator=g, dtype=torch.float64)
    noise = torch.randn(n, generator=g, dtype=torch.float64)
    lead = x.clone()
    lead[: n // 2] = 0  # leading digital silence: half the frames removed
    gaps = x * (1 + 1e3 * (torch.arange(n) // 1000 % 2))  # every other 1000 samples 60 dB louder
    tail = x.clone()
    tail[n // 4:] *= 1e-4  # 80 dB quieter after 0.25 s: too few frames left -> 1e-5
    return [
        ("leading-silence", lead + 0.5 * noise, lead),
        ("gaps", gaps + noise, gaps),
        ("too-few-frames-left", tail + 0.1 * noise, tail),
        ("preds-silent", torch.zeros(n, dtype=torch.float64), x),
        ("preds-scaled-copy", 3.0 * x, x),
        ("identical", x, x),
        ("noise-only", noise, x),
    ]


@pytest.mark.parametrize("fs", [8000, 16000])
def test_stoi_silence_edges(fs, windows):
    cases = _edge_cases(fs)
    p = torch.stack([c[1] for c in cases])
    t = torch.stack([c[2] for c in cases])
    got = A.short_time_objective_intelligibility(fs=fs, per_example=True)(p, t)
    want = _oracle(p, t, fs, False)
    for (name, *_), g, w in zip(cases, got, want):
        assert abs(g.item() - w.item()) <= 1e-10, (name, g.item(), w.item())
    # ESTOI: the same except an all-zero estimate, whose constant bands pystoi fills with 2e-16 Gaussian
    # noise (np.random) before normalizing: a random value; ours normalizes a constant band to 0
    got = A.short_time_objective_intelligibility(fs=fs, extended=True, per_example=True)(p, t)
    want = _oracle(p, t, fs, True)
    for (name, *_), g, w in zip(cases, got, want):
        if name == "preds-silent":
            assert g.item() == 0.0 and abs(w.item()) < 0.05, (g.item(), w.item())
        else:
            assert abs(g.item() - w.item()) <= 1e-10, (name, g.item(), w.item())


@pytest.mark.parametrize("extended", [False, True], ids=["stoi", "estoi"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_stoi_band_level_swings(dtype, extended, windows):
    # a 300 Hz tone gated on and off over steady noise: the frames are all kept, but one band's envelope swings
    # by up to 60 dB between windows (a one-pass window variance loses all float32 precision here)
    fs, n = 10000, 30000
    g = torch.Generator().manual_seed(3)
    time = torch.arange(n, dtype=torch.float64) / fs
    gate = ((1.5 * time).floor() % 2 == 0).double()
    t = torch.stack([0.01 * torch.randn(n, generator=g, dtype=torch.float64) + 0.01 * amp * gate
                     * torch.sin(2 * torch.pi * 300 * time) + 0.03 * (1 - gate) * torch.sin(2 * torch.pi * 1000 * time)
                     for amp in (10.0, 100.0, 1000.0)])
    p = t + 0.005 * torch.randn(t.shape, generator=g, dtype=torch.float64)
    got = S.stoi_values(p.to(dtype), t.to(dtype), fs, extended)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, _oracle(p.to(dtype), t.to(dtype), fs, extended), rtol=0, atol=tol)


@pytest.mark.parametrize("extended", [False, True])
def test_stoi_short_signals(extended):
    # 4,224 samples at 10 kHz is the shortest with 30 frames; shorter ones score 1e-5 like pystoi
    for n in (4223, 4224, 4225, 4352, 4353, 5000):
        p, t = _noisy((2, n), seed=n)
        got = A.short_time_objective_intelligibility(fs=10000, extended=extended, per_example=True)(p, t)
        torch.testing.assert_close(got, _oracle(p, t, 10000, extended), rtol=0, atol=1e-12)
    for fs, n in ((16000, 100), (16000, 4000), (8000, 300)):  # pystoi fails on <= 256 samples at 10 kHz
        got = A.short_time_objective_intelligibility(fs=fs, per_example=True)(*_noisy((2, n)))
        assert torch.equal(got, torch.full((2,), 1e-5, dtype=torch.float64))


def test_stoi_vs_torchmetrics_multichannel():
    tm = pytest.importorskip("torchmetrics.functional.audio")
    p, t = _noisy((2, 3, 12000), seed=3)
    p, t = p.float(), t.float()
    got = A.short_time_objective_intelligibility(fs=8000, per_example=True)(p, t)
    want = tm.short_time_objective_intelligibility(p, t, 8000).double()
    assert got.shape == want.shape == (2, 3)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    mean = A.short_time_objective_intelligibility(fs=8000)(p, t)
    torch.testing.assert_close(mean, want.mean(), rtol=0, atol=1e-5)


def test_stoi_streaming_equals_one_shot():
    p, t = _noisy((5, 9000), seed=4)
    m = A.short_time_objective_intelligibility(fs=8000)
    s = m.init()
    for i in range(0, 5, 2):
        s = m.update(s, p[i:i + 2], t[i:i + 2])
    torch.testing.assert_close(m.finalize(s), _oracle(p, t, 8000, False).mean(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("extended", [False, True], ids=["stoi", "estoi"])
def test_cpu_passes_match_one_pass(monkeypatch, extended):
    # on the CPU the examples go in cache-sized passes: one example per pass gives one pass's values
    p, t = _noisy((5, 9000), seed=5)
    t[1, :5000] *= 1e-4  # examples with different silent frames
    t[3, 2000:6000] = 0.0
    whole = S.stoi_values(p, t, 8000, extended)
    monkeypatch.setattr(S, "CHUNK", 1)
    torch.testing.assert_close(S.stoi_values(p, t, 8000, extended), whole, rtol=0, atol=1e-14)
    torch.testing.assert_close(whole, _oracle(p, t, 8000, extended), rtol=0, atol=1e-12)


def test_resampling_matches_pystoi():
    from pystoi.utils import resample_oct

    g = torch.Generator().manual_seed(0)
    for fs in (8000, 16000, 22050, 44100, 48000, 11000):
        for n in (3, 1001, 20000):
            x = torch.randn(2, n, generator=g, dtype=torch.float64)
            want = np.stack([resample_oct(a, 10000, fs) for a in x.numpy()])
            got = S.resample(x, fs)
            np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-13)
            np.testing.assert_allclose(S.resample(x.float(), fs).numpy(), want, rtol=0, atol=1e-5)


def test_stoi_errors_and_metadata():
    with pytest.raises(ValueError, match="short_time_objective_intelligibility.*fs"):
        A.short_time_objective_intelligibility(fs=0)
    with pytest.raises(ValueError, match="extended"):
        A.short_time_objective_intelligibility(fs=8000, extended=1)
    with pytest.raises(ValueError, match="target"):
        A.short_time_objective_intelligibility(fs=8000)(torch.zeros(2, 5000), torch.zeros(2, 5001))
    m = A.short_time_objective_intelligibility(fs=16000, extended=True)
    assert m.higher_is_better and not m.is_differentiable
    assert "fs=16000" in repr(m) and fmetrics.short_time_objective_intelligibility is A.short_time_objective_intelligibility


def test_stoi_docstring_example():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(S.short_time_objective_intelligibility, globs={"torch": torch, "fmetrics": fmetrics}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


def test_tables_built_on_a_device_match_the_host_tables():
    # off the CPU the window and resampling filter are computed there by torch ops (no copies)
    for fs in (8000, 10000, 16000, 44100):
        hann, plan = S.build_constants(torch.device("cpu"), fs)
        torch.testing.assert_close(hann, S.HANN, rtol=0, atol=1e-15)
        host = S.resample_plan(fs)
        assert (plan is None) == (host is None)
        if plan is not None:
            assert plan[:3] == host[:3]
            torch.testing.assert_close(plan[3], host[3], rtol=0, atol=1e-15)


def test_band_edges_are_pystois_third_octave_matrix():
    # the envelopes sum each band's bins as one contiguous slice: the edges must rebuild pystoi's matrix exactly
    from pystoi.utils import thirdoct

    obm = thirdoct(10000, 512, 15, 150)[0]
    rebuilt = np.zeros_like(obm)
    for band, (lo, hi) in enumerate(S.BAND_EDGES):
        rebuilt[band, lo:hi] = 1
    np.testing.assert_array_equal(rebuilt, obm)


@pytest.mark.parametrize("n", [9000, 12345])  # row strides 9000 (gcd 8 with 128) and 12345 (gcd 1)
def test_cpu_envelopes_match_the_traced_path(n):
    # the eager CPU path gathers chunks from a strided view of the signals and writes the FFT frames
    # directly; the traced path overlap-adds a zero-padded chunk table: equal envelopes on every frame that
    # a valid window reads (past the kept frames the CPU path reads chunk 0 instead of zeros)
    p, t = _noisy((3, n), seed=6)
    t[0, 1000:4000] *= 1e-4
    t[2, :3000] = 0.0
    z = torch.stack([t, p], 1)
    hann = S.HANN
    first, second, kept = S._kept_frames(S._frame_energy(z[:, 0], hann, S.frame_count(n)))
    want = S._envelopes(S._overlap_add(z, hann, first, second), hann)
    for step in (1, 2, 3):
        got = torch.cat(list(S._cpu_envelopes(z, hann, first, second, step)))
        assert got.shape == want.shape
        for e, k in enumerate(kept.tolist()):
            torch.testing.assert_close(got[e, ..., :k - 1], want[e, ..., :k - 1], rtol=1e-12, atol=1e-12)
    assert kept.tolist()[0] < S.frame_count(n) and kept.tolist()[2] < S.frame_count(n)
