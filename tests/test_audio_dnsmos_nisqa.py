"""DNSMOS and NISQA against torchmetrics' own pre- and post-processing with the same small random networks
(its model loaders monkeypatched to return them), against SciPy / librosa for the feature steps, and,
when ``speechmos`` is installed, against speechmos' DNSMOS with Microsoft's real ONNX weights."""
import importlib.util
import os
import warnings

import numpy as np
import pytest
import torch

import fmetrics
from fmetrics.audio._spectral import resample_poly
from fmetrics.audio.dnsmos import p808_features
from fmetrics.audio.nisqa import nisqa_features
from tests._audio_nets import P808, P835

pytest.importorskip("librosa")
tmd = pytest.importorskip("torchmetrics.functional.audio.dnsmos")
tmn = pytest.importorskip("torchmetrics.functional.audio.nisqa")

DNSMOS = fmetrics.deep_noise_suppression_mean_opinion_score
NISQA = fmetrics.non_intrusive_speech_quality_assessment
TOL = dict(rtol=0, atol=1e-6)


def _run(metric, *batches):
    s = metric.init()
    for b in batches:
        s = metric.update(s, b)
    return metric.finalize(s)


def _signals(seed, n, time, fs=16000):
    """Noise of random level, a tone with a silent stretch, and digital silence."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g) * torch.randn(n, time, generator=g)
    t = torch.arange(time) / fs
    x[0] = 0.3 * torch.sin(2 * np.pi * 440 * t) * (t % 1 < 0.6)
    x[-1] = 0.0
    return x


# ---------------------------------------------------------------- DNSMOS

class _Session:
    """torchmetrics' ONNX session stand-in: ``run(None, {"input_1": array})`` through a torch network."""

    def __init__(self, net):
        self.net = net

    def run(self, _, feed):
        with torch.no_grad():
            return [self.net(torch.from_numpy(np.asarray(feed["input_1"]))).numpy()]


@pytest.fixture
def tm_dnsmos(monkeypatch):
    nets = {"p808": P808(), "p835": P835()}

    def load(path, device, num_threads=None):
        return _Session(nets["p808"] if "model_v8" in path else nets["p835"])
    monkeypatch.setattr(tmd, "_cached_load_session", load)
    monkeypatch.setattr(tmd, "_load_session", load)
    return nets


@pytest.mark.parametrize("time,personalized", [(16000, False), (170000, True), (200001, False), (144160, True)])
def test_dnsmos_matches_torchmetrics(tm_dnsmos, time, personalized):
    x = _signals(time, 4, time)
    ref = tmd.deep_noise_suppression_mean_opinion_score(x, 16000, personalized).mean(0)
    m = DNSMOS(fs=16000, personalized=personalized, **tm_dnsmos)
    got = _run(m, x[:3], x[3:])
    assert got.dtype == torch.float64 and got.shape == (4,)
    torch.testing.assert_close(got, ref, **TOL)


def test_dnsmos_leading_axes_and_module_untouched(tm_dnsmos):
    x = _signals(3, 6, 20000).reshape(2, 3, 20000)
    tm_dnsmos["p808"].train()
    ref = tmd.deep_noise_suppression_mean_opinion_score(x, 16000, False).reshape(-1, 4).mean(0)
    got = _run(DNSMOS(fs=16000, personalized=False, **tm_dnsmos), x)
    torch.testing.assert_close(got, ref, **TOL)
    assert tm_dnsmos["p808"].training  # run through an eval view; the user's flag is kept


def test_dnsmos_p808_features_match_librosa():
    seg = _signals(5, 3, 144160).numpy()
    ref = tmd._audio_melspec(seg[:, :-160])
    got = p808_features(torch.from_numpy(seg)).numpy()
    assert got.shape == ref.shape == (3, 900, 120)
    np.testing.assert_allclose(got, ref, rtol=0, atol=2e-6)


@pytest.mark.parametrize("up,down", [(2, 1), (16000, 44100), (16000, 22050), (160, 147)])
def test_resample_poly_matches_scipy(up, down):
    from scipy.signal import resample_poly as scipy_resample

    x = _signals(up + down, 3, 5003).double()
    ref = scipy_resample(x.numpy(), up, down, axis=-1)
    np.testing.assert_allclose(resample_poly(x, up, down).numpy(), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fs", [8000, pytest.param(44100, marks=pytest.mark.slow)])
def test_dnsmos_resampled_is_torchmetrics_on_the_resample_poly_signal(tm_dnsmos, fs):
    """fs != 16 kHz: our value is torchmetrics' 16 kHz value of SciPy's ``resample_poly`` output."""
    from scipy.signal import resample_poly as scipy_resample

    x = _signals(fs, 3, fs)
    r = torch.from_numpy(scipy_resample(x.double().numpy(), 16000, fs, axis=-1)).float()
    ref = tmd.deep_noise_suppression_mean_opinion_score(r, 16000, True).mean(0)
    torch.testing.assert_close(_run(DNSMOS(fs=fs, personalized=True, **tm_dnsmos), x), ref, **TOL)


def test_dnsmos_resampled_near_torchmetrics_soxr(tm_dnsmos):
    """torchmetrics resamples with librosa's soxr_hq: on band-limited (speech-band) signals the two resamplers
    give DNSMOS values within 5e-3 (measured 1e-3 here; 0.04 on white noise, whose energy reaches Nyquist)."""
    fs, time = 8000, 12000
    t = torch.arange(time) / fs
    g = torch.Generator().manual_seed(0)
    f0 = 100 + 300 * torch.rand(3, 1, generator=g)
    x = sum(torch.sin(2 * np.pi * k * f0 * t) / k for k in range(1, 8)) * torch.sin(2 * np.pi * 3 * t).abs() * 0.2
    ref = tmd.deep_noise_suppression_mean_opinion_score(x, fs, False).mean(0)
    got = _run(DNSMOS(fs=fs, personalized=False, **tm_dnsmos), x)
    assert (got - ref).abs().max() < 5e-3


def _export(net, shape, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(*shape),), path, input_names=["input_1"],
                          dynamic_axes={"input_1": {0: "n"}}, dynamo=False)


@pytest.mark.slow
def test_dnsmos_onnx_sessions(tmp_path, monkeypatch):
    """The networks as onnxruntime sessions (exported tiny models), in both libraries."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    _export(P808(), (2, 900, 120), str(tmp_path / "p808.onnx"))
    _export(P835(), (2, 144160), str(tmp_path / "p835.onnx"))
    sess = {k: ort.InferenceSession(str(tmp_path / f"{k}.onnx")) for k in ("p808", "p835")}
    monkeypatch.setattr(tmd, "_cached_load_session", lambda path, *a, **k: sess["p808" if "model_v8" in path else "p835"])
    x = _signals(7, 3, 30000)
    ref = tmd.deep_noise_suppression_mean_opinion_score(x, 16000, False).mean(0)
    torch.testing.assert_close(_run(DNSMOS(fs=16000, personalized=False, **sess), x), ref, **TOL)


@pytest.mark.slow
def test_dnsmos_real_weights_match_speechmos_and_torchmetrics(monkeypatch):
    """Optional: Microsoft's DNSMOS ONNX models shipped in the ``speechmos`` wheel (pip install speechmos)."""
    ort = pytest.importorskip("onnxruntime")
    speechmos = pytest.importorskip("speechmos.dnsmos")
    root = os.path.dirname(speechmos.__file__)
    files = {"p808": "dnsmos_models/model_v8.onnx", "p835": "dnsmos_models/sig_bak_ovr.onnx",
             "pp835": "pdnsmos_models/sig_bak_ovr.onnx"}
    sess = {k: ort.InferenceSession(os.path.join(root, f), providers=["CPUExecutionProvider"])
            for k, f in files.items()}
    x = _signals(11, 3, 40000).clamp(-1, 1)
    for personalized in (False, True):
        p835 = sess["pp835" if personalized else "p835"]
        monkeypatch.setattr(tmd, "_cached_load_session",
                            lambda path, *a, **k: sess["p808"] if "model_v8" in path else p835)
        got = _run(DNSMOS(fs=16000, personalized=personalized, p808=sess["p808"], p835=p835), x)
        ref_tm = tmd.deep_noise_suppression_mean_opinion_score(x, 16000, personalized).mean(0)
        sm = [speechmos.run(row.numpy(), sr=16000, verbose=False) if "verbose" in speechmos.run.__code__.co_varnames
              else speechmos.run(row.numpy(), sr=16000) for row in x]
        ref_sm = torch.tensor([[r["p808_mos"], r["sig_mos"], r["bak_mos"], r["ovrl_mos"]] for r in sm],
                              dtype=torch.float64).mean(0) if not personalized else None
        torch.testing.assert_close(got, ref_tm, rtol=0, atol=1e-5)
        if ref_sm is not None:
            torch.testing.assert_close(got, ref_sm, rtol=0, atol=1e-5)
        assert ((got > 1) & (got < 5)).all()


# ---------------------------------------------------------------- NISQA

NISQA_ARGS = dict(ms_n_fft=4096, ms_hop_length=0.01, ms_win_length=0.02, ms_n_mels=48, ms_fmax=20000,
                  ms_seg_length=15, ms_seg_hop_length=4, ms_max_segments=1300,
                  cnn_c_out_1=4, cnn_c_out_2=4, cnn_c_out_3=8, cnn_kernel_size=(3, 3), cnn_dropout=0.2,
                  cnn_pool_1=(24, 7), cnn_pool_2=(12, 5), cnn_pool_3=(6, 3), td_sa_d_model=16, td_sa_nhead=2,
                  td_sa_h=16, td_sa_num_layers=1, td_sa_dropout=0.1, pool_att_h=16, pool_att_dropout=0.1)


@pytest.fixture
def nisqa_net(monkeypatch):
    """torchmetrics' NISQA architecture (smaller widths), random weights, batch-norm statistics of real
    features (else the activations die and the output is constant), returned by its patched loader."""
    torch.manual_seed(0)
    net = tmn._NISQADIM(NISQA_ARGS)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.5)
        for mod in net.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.momentum = None
                mod.reset_running_stats()
        net.train()
        net(*nisqa_features(_signals(1, 4, 16000), 16000))
    net.eval()
    monkeypatch.setattr(tmn, "_load_nisqa_model", lambda: (net, NISQA_ARGS))
    return net


@pytest.mark.parametrize("fs,time", [(16000, 16000), (8000, 30000), (48000, 30000), (22050, 9000), (16000, 2240)])
def test_nisqa_matches_torchmetrics(nisqa_net, fs, time):
    x = _signals(fs + time, 4, time, fs)
    ref = tmn.non_intrusive_speech_quality_assessment(x, fs).mean(0).double()
    assert ref.std() > 0.1  # the network is not constant
    got = _run(NISQA(fs=fs, net=nisqa_net), x[:1], x[1:])
    assert got.dtype == torch.float64 and got.shape == (5,)
    torch.testing.assert_close(got, ref, **TOL)
    assert not nisqa_net.training  # eval as the fixture left it (the metric's view never switches it)


def test_nisqa_features_match_librosa():
    for fs, time in ((16000, 20000), (44100, 50000)):
        x = _signals(fs, 3, time, fs)
        mel = tmn._get_librosa_melspec(x.numpy(), fs, NISQA_ARGS)
        ref, n_wins = tmn._segment_specs(torch.from_numpy(mel), NISQA_ARGS)
        got, wins = nisqa_features(x, fs)
        assert got.shape == ref.shape and (wins == n_wins).all()
        torch.testing.assert_close(got, ref, rtol=0, atol=2e-4)  # dB of float32 librosa spectra


# ---------------------------------------------------------------- bad input

def test_bad_input_errors_name_metric_and_argument():
    net = P808()
    with pytest.raises(ValueError, match="deep_noise_suppression_mean_opinion_score.*fs"):
        DNSMOS(fs=0, personalized=False, p808=net, p835=P835())
    with pytest.raises(ValueError, match="deep_noise_suppression_mean_opinion_score.*p835.*nn.Module"):
        DNSMOS(fs=16000, personalized=False, p808=net, p835="model.onnx")
    with pytest.raises(ValueError, match="personalized.*a bool"):
        DNSMOS(fs=16000, personalized=1, p808=net, p835=P835())
    class FourOutputs(torch.nn.Module):
        def forward(self, x, n_wins):
            return x[:, 0, 0, :4]

    m = NISQA(fs=16000, net=FourOutputs())
    s = m.init()
    with pytest.raises(ValueError, match="non_intrusive_speech_quality_assessment.*preds.*at least 2240 samples"):
        m.update(s, torch.randn(2, 2000))
    with pytest.raises(ValueError, match="non_intrusive_speech_quality_assessment.*preds.*at most 1300"):
        m.update(s, torch.randn(1, 16000 * 53))
    with pytest.raises(ValueError, match="non_intrusive_speech_quality_assessment.*net.*\\(N, 5\\)"):
        m.update(s, torch.randn(1, 4000))
    with pytest.raises(ValueError, match="preds.*real floating"):
        m.update(s, torch.ones(1, 4000, dtype=torch.int64))


def test_nan_policy_keeps_state_and_leaves_signals_out(tm_dnsmos):
    m = DNSMOS(fs=16000, personalized=False, **tm_dnsmos)
    x = _signals(2, 3, 18020)
    s = m.update(m.init(), x[:2])
    bad = x[2:].clone()
    bad[0, 5] = float("nan")
    with pytest.raises(ValueError, match="deep_noise_suppression_mean_opinion_score: preds must be finite"):
        m.update(s, bad)
    torch.testing.assert_close(m.finalize(s), _run(m, x[:2]))  # the state is intact
    ignore = DNSMOS(fs=16000, personalized=False, nan_strategy="ignore", **tm_dnsmos)
    torch.testing.assert_close(_run(ignore, torch.cat([x[:2], bad])), _run(m, x[:2]), **TOL)
    with pytest.warns(UserWarning, match="no samples were seen"):
        assert torch.isnan(m.finalize(m.init())).all()
