"""Law-suite cases for the audio metrics; oracles are float64 numpy formulas written here
(torchmetrics, fast-bss-eval, mir_eval, pystoi and pesq parity live in tests/test_audio_parity.py)."""
import numpy as np
import torch

from fmetrics import audio as fm
from tests.cases import Case

SIZES = (5, 1, 7, 0, 3)
T = 64


def _signals(seed, shape=(), time=T, sizes=SIZES, dtype=torch.float32, noise=0.5):
    """Batches of (preds, target) of shape (n, *shape, time)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        t = torch.randn((n, *shape, time), generator=g, dtype=torch.float64)
        p = 0.8 * t + noise * torch.randn((n, *shape, time), generator=g, dtype=torch.float64) + 0.1
        out.append((p.to(dtype), t.to(dtype)))
    return out


def _np(x):
    return x.double().numpy()


def _eps(x):
    return float(torch.finfo(x.dtype).eps)


def _center(x, zero_mean, axis=-1):
    return x - x.mean(axis, keepdims=True) if zero_mean else x


def _snr_ref(zero_mean=False):
    def ref(p, t):
        eps = _eps(p)
        p, t = _center(_np(p), zero_mean), _center(_np(t), zero_mean)
        return np.mean(10 * np.log10(((t ** 2).sum(-1) + eps) / (((t - p) ** 2).sum(-1) + eps)))
    return ref


def _si_sdr(p, t, eps, axes=(-1,)):
    alpha = ((p * t).sum(axes, keepdims=True) + eps) / ((t ** 2).sum(axes, keepdims=True) + eps)
    s = alpha * t
    return 10 * np.log10(((s ** 2).sum(axes) + eps) / (((s - p) ** 2).sum(axes) + eps))


def _si_sdr_ref(zero_mean=False):
    def ref(p, t):
        eps = _eps(p)
        return np.mean(_si_sdr(_center(_np(p), zero_mean), _center(_np(t), zero_mean), eps))
    return ref


def _c_si_snr_ref(zero_mean=False):
    def ref(p, t):
        eps = _eps(p)
        p, t = _np(p).reshape(*p.shape[:-3], -1), _np(t).reshape(*t.shape[:-3], -1)
        return np.mean(_si_sdr(_center(p, zero_mean), _center(t, zero_mean), eps))
    return ref


def _sa_sdr_ref(scale_invariant=True, zero_mean=False):
    def ref(p, t):
        eps = _eps(p)
        p, t = _center(_np(p), zero_mean), _center(_np(t), zero_mean)
        if scale_invariant:
            return np.mean(_si_sdr(p, t, eps, axes=(-2, -1)))
        return np.mean(10 * np.log10(((t ** 2).sum((-2, -1)) + eps) / (((t - p) ** 2).sum((-2, -1)) + eps)))
    return ref


def _sorted(v):
    return torch.sort(torch.as_tensor(v)).values


SORTED = dict(canonical=_sorted)  # per-example values: batches are re-ordered by the split law


TOL = dict(reference_rtol=1e-5, reference_atol=1e-4)  # float32 kernels vs a float64 oracle

CASES = [
    Case("signal_noise_ratio", fm.signal_noise_ratio, {}, _signals, _snr_ref(), check=TOL),
    Case("signal_noise_ratio-zero_mean-f64", fm.signal_noise_ratio, {"zero_mean": True},
         lambda s: _signals(s, dtype=torch.float64), _snr_ref(True)),
    Case("scale_invariant_signal_distortion_ratio", fm.scale_invariant_signal_distortion_ratio, {}, _signals,
         _si_sdr_ref(), check=TOL),
    Case("scale_invariant_signal_distortion_ratio-zero_mean-3d", fm.scale_invariant_signal_distortion_ratio,
         {"zero_mean": True}, lambda s: _signals(s, shape=(2,)), _si_sdr_ref(True), check=TOL),
    Case("scale_invariant_signal_noise_ratio", fm.scale_invariant_signal_noise_ratio, {}, _signals,
         _si_sdr_ref(True), check=TOL),
    Case("scale_invariant_signal_noise_ratio-per_example", fm.scale_invariant_signal_noise_ratio,
         {"per_example": True}, lambda s: _signals(s, dtype=torch.float64),
         lambda p, t: _si_sdr(_center(_np(p), True), _center(_np(t), True), _eps(p)), check=SORTED),
    Case("complex_scale_invariant_signal_noise_ratio", fm.complex_scale_invariant_signal_noise_ratio, {},
         lambda s: _signals(s, shape=(3, 5), time=2), _c_si_snr_ref(), check=TOL),
    Case("complex_scale_invariant_signal_noise_ratio-zero_mean", fm.complex_scale_invariant_signal_noise_ratio,
         {"zero_mean": True}, lambda s: _signals(s, shape=(3, 5), time=2, dtype=torch.float64),
         _c_si_snr_ref(True)),
    Case("source_aggregated_signal_distortion_ratio", fm.source_aggregated_signal_distortion_ratio, {},
         lambda s: _signals(s, shape=(3,)), _sa_sdr_ref(), check=TOL),
    Case("source_aggregated_signal_distortion_ratio-snr-zero_mean", fm.source_aggregated_signal_distortion_ratio,
         {"scale_invariant": False, "zero_mean": True}, lambda s: _signals(s, shape=(2,), dtype=torch.float64),
         _sa_sdr_ref(False, True)),
]
