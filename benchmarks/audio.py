"""Audio workloads (1 thread): SI-SDR / SNR on 64 signals x 4 s at 16 kHz (float32), BSS-eval SDR on 64 float64
signals x 4 s (512 taps), PIT (SI-SDR, 4 speakers, 16 mixtures x 4 s), STOI / extended STOI (8 signals x 4 s
at 16 kHz, float32 and float64, against pystoi and torchmetrics, which wraps it) and PESQ (8 signals x 4 s, wide band).

fmetrics' one-shot ``init / update / finalize`` against torchmetrics' functional mean, fast-bss-eval (NumPy)
for SDR and the pesq package for PESQ.
"""
from __future__ import annotations

import math

import numpy as np
import torch

import fmetrics
from benchmarks.registry import Skip, fmetrics_run, on_device, register

FS, SECONDS = 16000, 4
T = FS * SECONDS
# librosa (torchmetrics' DNSMOS and NISQA) compiles its numba kernels when librosa.core is first imported
LIBROSA_COLD = "torchmetrics' librosa compiles numba kernels on import (12 CPU-s without numba's cache)"


def _pair(n, dtype=torch.float32, speakers=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (n, T) if speakers is None else (n, speakers, T)
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    p = 0.9 * t + 0.3 * torch.randn(shape, generator=g, dtype=torch.float64)
    return p.to(dtype), t.to(dtype)


def _snr_workload(name, tm_name, doc):
    @register(f"audio/{name}", domain="audio", samples=64, bytes=2 * 64 * T * 4, peers=("torchmetrics",),
              description=doc)
    def build(quick: bool, device="cpu"):
        p, t = on_device(_pair(64), device)
        runs = {"fmetrics": fmetrics_run(getattr(fmetrics.audio, name)(), [(p, t)])}
        try:
            import torchmetrics.functional.audio as F

            fn = getattr(F, tm_name)
            runs["torchmetrics"] = lambda: fn(p, t).double().mean()
        except ImportError:
            pass
        return runs

    return build


_snr_workload("scale_invariant_signal_distortion_ratio", "scale_invariant_signal_distortion_ratio",
              "SI-SDR of 64 x 64,000 float32 samples vs torchmetrics' functional mean")
_snr_workload("signal_noise_ratio", "signal_noise_ratio", "SNR of 64 x 64,000 float32 samples")
_snr_workload("scale_invariant_signal_noise_ratio", "scale_invariant_signal_noise_ratio",
              "SI-SNR of 64 x 64,000 float32 samples")


@register("audio/signal_distortion_ratio", domain="audio", samples=lambda quick: 8 if quick else 64,
          peers=("torchmetrics", "fast_bss_eval"), tolerance=1e-6,
          description="BSS-eval SDR (512 taps) of 64 float64 signals x 64,000 samples (8 with --quick)")
def sdr(quick: bool, device="cpu"):
    n = 8 if quick else 64
    hp, ht = _pair(n, torch.float64)  # fast-bss-eval reads the host copy
    p, t = on_device((hp, ht), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.audio.signal_distortion_ratio(), [(p, t)])}
    try:
        import torchmetrics.functional.audio as F

        runs["torchmetrics"] = lambda: F.signal_distortion_ratio(p, t).mean()
    except ImportError:
        pass
    try:
        import fast_bss_eval

        tn, pn = ht[:, None].numpy(), hp[:, None].numpy()
        runs["fast_bss_eval"] = lambda: float(np.mean(fast_bss_eval.sdr(tn, pn, filter_length=512)))
    except ImportError:
        pass
    return runs


@register("audio/permutation_invariant_training", domain="audio", samples=16, peers=("torchmetrics",),
          description="PIT of SI-SDR, 16 mixtures x 4 speakers x 64,000 float32 samples")
def pit(quick: bool, device="cpu"):
    p, t = on_device(_pair(16, speakers=4), device)
    m = fmetrics.audio.permutation_invariant_training(fmetrics.audio.scale_invariant_signal_distortion_ratio())
    runs = {"fmetrics": fmetrics_run(m, [(p, t)])}
    try:
        import torchmetrics.functional.audio as F

        runs["torchmetrics"] = lambda: F.permutation_invariant_training(
            p, t, F.scale_invariant_signal_distortion_ratio)[0].double().mean()
    except ImportError:
        pass
    return runs


def _stoi_workload(extended: bool, dtype=torch.float32):
    suffix = ("_extended" if extended else "") + ("_float64" if dtype == torch.float64 else "")
    kind = "float64" if dtype == torch.float64 else "float32"

    @register(f"audio/short_time_objective_intelligibility{suffix}", domain="audio",
              samples=lambda quick: 4 if quick else 8, peers=("pystoi", "torchmetrics"), tolerance=1e-4,
              full_only="the float32 rows cover STOI in a quick run" if dtype == torch.float64 else "",
              description=f"{'extended ' if extended else ''}STOI of 8 noisy signals x 4 s at 16 kHz ({kind}; "
                          "4 with --quick)")
    def build(quick: bool, device="cpu"):
        hp, ht = _pair(4 if quick else 8, dtype=dtype, seed=1)
        p, t = on_device((hp, ht), device)
        m = fmetrics.audio.short_time_objective_intelligibility(fs=FS, extended=extended)
        runs = {"fmetrics": fmetrics_run(m, [(p, t)])}
        try:
            from pystoi import stoi

            tn, pn = ht.double().numpy(), hp.double().numpy()
            runs["pystoi"] = lambda: float(np.mean([stoi(a, b, FS, extended) for a, b in zip(tn, pn)]))
        except ImportError:
            pass
        try:
            import torchmetrics.functional.audio as F

            runs["torchmetrics"] = lambda: F.short_time_objective_intelligibility(p, t, FS, extended).double().mean()
        except ImportError:
            pass
        return runs

    return build


for _extended in (False, True):
    for _dtype in (torch.float32, torch.float64):
        _stoi_workload(_extended, _dtype)


@register("audio/perceptual_evaluation_speech_quality", domain="audio", samples=lambda quick: 2 if quick else 8,
          peers=("pesq",), description="PESQ wb of 8 modulated tones x 4 s at 16 kHz (2 with --quick)")
def pesq_workload(quick: bool, device="cpu"):
    import pesq

    n = 2 if quick else 8
    g = torch.Generator().manual_seed(0)
    time = torch.arange(T) / FS
    f0 = 150 + 300 * torch.rand(n, 1, generator=g)
    t = torch.sin(2 * math.pi * 3 * time).abs() * torch.sin(2 * math.pi * f0 * time)
    p = t + 0.05 * torch.randn(t.shape, generator=g)
    m = fmetrics.audio.perceptual_evaluation_speech_quality(fs=FS, mode="wb")
    tn, pn = t.double().numpy(), p.double().numpy()
    return {"fmetrics": fmetrics_run(m, on_device([(p, t)], device)),  # PESQ itself runs on the host
            "pesq": lambda: float(np.mean([pesq.pesq(FS, a, b, "wb") for a, b in zip(tn, pn)]))}


def _patched(module, attr, value, fn):
    """``fn`` run with ``module.attr`` set to ``value`` (torchmetrics' model loaders, for the same network)."""
    def run():
        old = getattr(module, attr)
        setattr(module, attr, value)
        try:
            return fn()
        finally:
            setattr(module, attr, old)
    return run


@register("audio/deep_noise_suppression_mean_opinion_score", domain="audio", samples=8, peers=("torchmetrics",),
          tolerance=1e-4, full_only=f"2 ONNX networks over 10 s signals: 4 CPU-s a call even for 2, and {LIBROSA_COLD}",
          description="DNSMOS of 8 noisy signals x 10 s at 16 kHz (2 hops each) with Microsoft's ONNX models from "
                      "the speechmos wheel, the same sessions in both")
def dnsmos_workload(quick: bool, device="cpu"):
    import os

    import onnxruntime as ort
    import speechmos.dnsmos
    import torchmetrics.functional.audio.dnsmos as tmd

    root = os.path.dirname(speechmos.dnsmos.__file__)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    p808, p835 = (ort.InferenceSession(os.path.join(root, "dnsmos_models", f), opts, providers=["CPUExecutionProvider"])
                  for f in ("model_v8.onnx", "sig_bak_ovr.onnx"))
    x, _ = _pair(8, seed=3)
    x = torch.cat([x, x[:, :FS * 10 - T]], -1).clamp(-1, 1)[:, :FS * 10]
    m = fmetrics.audio.deep_noise_suppression_mean_opinion_score(fs=FS, personalized=False, p808=p808, p835=p835)
    load = lambda path, *a, **k: p808 if "model_v8" in path else p835  # noqa: E731
    return {"fmetrics": fmetrics_run(m, on_device([(x,)], device)),
            "torchmetrics": _patched(tmd, "_cached_load_session", load,
                                     lambda: tmd.deep_noise_suppression_mean_opinion_score(x, FS, False).mean(0))}


@register("audio/non_intrusive_speech_quality_assessment", domain="audio", samples=lambda quick: 2 if quick else 8,
          peers=("torchmetrics",), tolerance=1e-4,
          description="NISQA of 8 noisy signals x 4 s at 16 kHz with torchmetrics' full-size NISQA network (random "
                      "weights: no checkpoint here), the same module in both (2 with --quick)")
def nisqa_workload(quick: bool, device="cpu"):
    import torchmetrics.functional.audio.nisqa as tmn

    args = dict(ms_n_fft=4096, ms_hop_length=0.01, ms_win_length=0.02, ms_n_mels=48, ms_fmax=20000,
                ms_seg_length=15, ms_seg_hop_length=4, ms_max_segments=1300, cnn_c_out_1=16, cnn_c_out_2=32,
                cnn_c_out_3=64, cnn_kernel_size=(3, 3), cnn_dropout=0.2, cnn_pool_1=(24, 7), cnn_pool_2=(12, 5),
                cnn_pool_3=(6, 3), td_sa_d_model=64, td_sa_nhead=1, td_sa_h=64, td_sa_num_layers=2,
                td_sa_dropout=0.1, pool_att_h=128, pool_att_dropout=0.1)
    torch.manual_seed(0)
    net = tmn._NISQADIM(args).eval()
    x, _ = _pair(2 if quick else 8, seed=4)
    m = fmetrics.audio.non_intrusive_speech_quality_assessment(fs=FS, net=net)
    tm = _patched(tmn, "_load_nisqa_model", lambda: (net, args),
                  lambda: tmn.non_intrusive_speech_quality_assessment(x, FS).double().mean(0))
    return {"fmetrics": fmetrics_run(m, on_device([(x,)], device)),
            "torchmetrics": Skip(f"full run only: {LIBROSA_COLD}") if quick else tm}


def _speech(n: int, seconds: float, fs: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    t = torch.arange(int(seconds * fs), dtype=torch.float64) / fs
    rate = 2 + 6 * torch.rand(n, 1, generator=g, dtype=torch.float64)
    noise = torch.randn(n, t.shape[0], generator=g, dtype=torch.float64)
    return (1.1 + torch.sin(2 * math.pi * rate * t)) * noise * 0.3


@register("audio/speech_reverberation_modulation_energy_ratio", domain="audio",
          samples=lambda quick: 2 if quick else 4, peers=("torchmetrics", "torchmetrics (SciPy lfilter)"),
          tolerance=1e-6,
          description="SRMR (23 gammatone channels, 8 modulation bands) of 4 float64 signals x 2 s at 16 kHz "
                      "(2 x 1 s with --quick)")
def srmr(quick: bool, device="cpu"):
    n, seconds = (2, 1.0) if quick else (4, 2.0)
    hx = _speech(n, seconds, 16000)
    (x,) = on_device((hx,), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.audio.speech_reverberation_modulation_energy_ratio(fs=16000), [(x,)])}
    try:  # torchmetrics' SRMR as shipped: needs torchaudio and gammatone
        import gammatone  # noqa: F401
        import torchaudio  # noqa: F401
        from torchmetrics.functional.audio import speech_reverberation_modulation_energy_ratio as tm_srmr

        runs["torchmetrics"] = lambda: tm_srmr(x, 16000).double().mean()
    except ImportError:
        pass
    try:  # without torchaudio: torchmetrics' code with SciPy's lfilter in torchaudio's place (tests/_srmr_oracle.py)
        import gammatone  # noqa: F401

        from tests._srmr_oracle import srmr as shimmed

        runs["torchmetrics (SciPy lfilter)"] = lambda: shimmed(hx, 16000).mean()
    except ImportError:
        pass
    return runs
