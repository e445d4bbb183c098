"""Audio workloads (1 thread): SI-SDR / SNR on 64 signals x 4 s at 16 kHz (float32), BSS-eval SDR on 64 float64
signals x 4 s (512 taps), PIT (SI-SDR, 4 speakers, 16 mixtures x 4 s), STOI / extended STOI (8 signals x 4 s
at 16 kHz, against pystoi and torchmetrics, which wraps it) and PESQ (8 signals x 4 s, wide band).

fmetrics' one-shot ``init / update / finalize`` against torchmetrics' functional mean, fast-bss-eval (NumPy)
for SDR and the pesq package for PESQ.
"""
from __future__ import annotations

import math

import numpy as np
import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register

FS, SECONDS = 16000, 4
T = FS * SECONDS


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


def _stoi_workload(extended: bool):
    suffix = "_extended" if extended else ""

    @register(f"audio/short_time_objective_intelligibility{suffix}", domain="audio",
              samples=lambda quick: 4 if quick else 8, peers=("pystoi", "torchmetrics"), tolerance=1e-4,
              description=f"{'extended ' if extended else ''}STOI of 8 noisy signals x 4 s at 16 kHz (float32; "
                          "4 with --quick)")
    def build(quick: bool, device="cpu"):
        hp, ht = _pair(4 if quick else 8, seed=1)
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


_stoi_workload(False)
_stoi_workload(True)


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
