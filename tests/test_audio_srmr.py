"""SRMR against torchmetrics' own code (tests/_srmr_oracle.py), its building blocks against SciPy and the
``gammatone`` package, its published behaviour (reverberation lowers it) and its bad-input rules."""
import numpy as np
import pytest
import scipy.signal
import torch

import fmetrics as fm
from fmetrics.audio import srmr as S

pytest.importorskip("gammatone")
pytest.importorskip("torchmetrics")
from tests._srmr_oracle import srmr as oracle  # noqa: E402

NAME = "speech_reverberation_modulation_energy_ratio"


def _speech(n, time, fs, seed):
    """Amplitude-modulated noise (syllable rates 2-8 Hz) with silences, a sine row and a loud row (|x| > 1)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(time, dtype=torch.float64) / fs
    rate = 2 + 6 * torch.rand(n, 1, generator=g, dtype=torch.float64)
    x = (1.1 + torch.sin(2 * np.pi * rate * t)) * torch.randn(n, time, generator=g, dtype=torch.float64) * 0.3
    x[0, time // 3: time // 2] = 0  # a silence
    if n > 1:
        x[1] = torch.sin(2 * np.pi * 440 * t) * (1 + torch.sin(2 * np.pi * 4 * t))
    if n > 2:
        x[2] = x[2] * 8  # scaled down by max |x| first
    return x


CONFIGS = [
    (8000, 4000, {}),
    (8000, 4000, {"norm": True}),
    (8000, 4000, {"fast": True}),
    (16000, 6000, {"fast": True, "norm": True}),
    (16000, 6000, {}),
    (22050, 6000, {"n_cochlear_filters": 10, "low_freq": 300.0, "min_cf": 2.0, "max_cf": 64.0}),
    (11025, 3000, {"norm": True, "max_cf": 100.0}),
]


@pytest.mark.parametrize("fs,time,options", CONFIGS, ids=[f"{fs}-{sorted(o.items())}" for fs, _, o in CONFIGS])
def test_matches_torchmetrics(fs, time, options):
    x = _speech(3, time, fs, seed=fs + len(options))
    want = oracle(x, fs, **options)
    m = fm.speech_reverberation_modulation_energy_ratio(fs=fs, per_example=True, **options)
    got = m(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    mean = fm.speech_reverberation_modulation_energy_ratio(fs=fs, **options)(x)
    np.testing.assert_allclose(float(mean), float(want.mean()), rtol=1e-6)


def test_leading_dims_and_float32():
    x = _speech(4, 2600, 8000, seed=3).reshape(2, 2, -1)
    m = fm.speech_reverberation_modulation_energy_ratio(fs=8000, per_example=True)
    got = m(x)
    assert got.shape == (2, 2) and got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), oracle(x, 8000).numpy(), rtol=1e-6)
    np.testing.assert_allclose(m(x.float()).numpy(), oracle(x.float(), 8000).numpy(), rtol=1e-5)


@pytest.mark.parametrize("t", [1, 2, 63, 64, 65, 1000])
def test_biquad_matches_scipy(t):
    g = torch.Generator().manual_seed(t)
    x = torch.randn(3, 4, t, generator=g, dtype=torch.float64)
    b = torch.randn(4, 3, generator=g, dtype=torch.float64)
    # poles near the unit circle (r = 0.9995, as the 4 Hz modulation filter at 16 kHz), real poles, a0 != 1
    a = torch.tensor([[1.0, -2 * 0.9995 * np.cos(0.01), 0.9995 ** 2], [1.0, -1.1, 0.28], [2.0, -0.5, 0.3],
                      [1.0, 0.0, 0.0]], dtype=torch.float64)
    got = S.biquad(x, b, a)
    want = np.stack([scipy.signal.lfilter(b[c].numpy(), a[c].numpy(), x[:, c].numpy(), axis=-1) for c in range(4)],
                    1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-10 * np.abs(want).max())


def test_filterbank_constants_match_gammatone():
    from gammatone.fftweight import fft_weights
    from gammatone.filters import centre_freqs, make_erb_filters
    for fs, n, low in ((16000, 23, 125.0), (8000, 10, 300.0), (44100, 40, 50.0)):
        c = S.constants(fs, n, low, 4.0, 128.0, True)
        cf = centre_freqs(fs, n, low)
        np.testing.assert_allclose(c.erb_coefs.numpy(), make_erb_filters(fs, cf), rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(c.erbs.numpy(), (cf / 9.26449 + 24.7)[::-1], rtol=1e-13)
        nfft = S._nfft(fs)
        w, _ = fft_weights(nfft, fs, n, 1, low, fs / 2, nfft / 2 + 1)
        np.testing.assert_allclose(c.fft_weights.numpy(), w, rtol=1e-10, atol=1e-14 * np.abs(w).max())


def test_hilbert_envelope_is_scipy_hilbert_on_the_padded_length():
    x = torch.randn(2, 3, 1000, dtype=torch.float64)  # 1000 -> FFT length 1008
    want = np.abs(scipy.signal.hilbert(x.numpy(), N=1008, axis=-1))[..., :1000]
    np.testing.assert_allclose(S._hilbert_envelope(x).numpy(), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fast", [False, True])
def test_reverberation_lowers_srmr(fast):
    """The toolbox's published behaviour: a longer reverberation tail gives a lower ratio."""
    fs, time = 8000, 8000
    x = _speech(4, time, fs, seed=11)[3:4]  # plain modulated noise
    g = torch.Generator().manual_seed(5)
    values = []
    for t60 in (0.0, 0.3, 0.8):
        if t60 == 0:
            y = x
        else:
            n = int(t60 * fs)
            rir = torch.randn(n, generator=g, dtype=torch.float64) * torch.exp(-6.9 * torch.arange(n) / n)
            rir[0] = 1.0
            y = torch.from_numpy(scipy.signal.fftconvolve(x.numpy(), rir[None].numpy())[:, :time])
        values.append(float(fm.speech_reverberation_modulation_energy_ratio(fs=fs, fast=fast)(y)))
    assert values[0] > values[1] > values[2], values


def test_bad_config_and_input():
    for kwargs, arg in (({"fs": 0}, "fs"), ({"fs": 8000.0}, "fs"), ({"fs": 8000, "n_cochlear_filters": 0},
                                                                     "n_cochlear_filters"),
                        ({"fs": 8000, "low_freq": -1}, "low_freq"), ({"fs": 8000, "max_cf": float("inf")}, "max_cf"),
                        ({"fs": 8000, "norm": 1}, "norm"), ({"fs": 8000, "fast": "yes"}, "fast")):
        with pytest.raises(ValueError, match=f"{NAME}: argument `{arg}`"):
            fm.speech_reverberation_modulation_energy_ratio(**kwargs)
    m = fm.speech_reverberation_modulation_energy_ratio(fs=8000)
    s = m.update(m.init(), _speech(2, 2100, 8000, 0))
    with pytest.raises(ValueError, match=rf"{NAME}: argument `preds` expected signals \(..., time\) of at least 2048"):
        m.update(s, torch.randn(2, 2000))
    with pytest.raises(ValueError, match=f"{NAME}: argument `preds` expected a real floating-point tensor"):
        m.update(s, torch.zeros(2, 3000, dtype=torch.int16))
    bad = _speech(2, 2100, 8000, 1)
    bad[1, 7] = float("nan")
    with pytest.raises(ValueError, match=f"{NAME}: preds must be finite"):
        m.update(s, bad)
    kept = fm.speech_reverberation_modulation_energy_ratio(fs=8000, nan_strategy="ignore")
    np.testing.assert_allclose(float(kept(bad)), float(oracle(bad[:1], 8000)[0]), rtol=1e-6)
    np.testing.assert_allclose(float(m.finalize(s)), float(oracle(_speech(2, 2100, 8000, 0), 8000).mean()),
                               rtol=1e-6)  # the state survived the rejected updates
    with pytest.warns(UserWarning, match="no samples were seen"):
        assert torch.isnan(m.finalize(m.update(m.init(), torch.zeros(0, 3000))))
