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


# ---------------------------------------------------------------- NaN / inf left out (nan_strategy="warn" / "ignore")

def _nonfinite(batches):
    """``batches`` with a NaN in preds (batch 0, example 1) and an inf in target (batch 2, example 4)."""
    def spoiled(seed):
        out = [(p.clone(), t.clone()) for p, t in batches(seed)]
        out[0][0][1].view(-1)[3] = float("nan")
        out[2][1][4].view(-1)[7] = float("inf")
        return out
    return spoiled


def _finite_examples(ref, dims=1):
    """``ref`` over the examples (leading axes but the last ``dims``) with no NaN / inf entry."""
    def finite_ref(p, t):
        keep = (torch.isfinite(p) & torch.isfinite(t)).flatten(p.dim() - dims).all(-1)
        return ref(p[keep], t[keep])
    return finite_ref


CASES += [
    Case("scale_invariant_signal_distortion_ratio-nan-warn", fm.scale_invariant_signal_distortion_ratio,
         {"nan_strategy": "warn"}, _nonfinite(_signals), _finite_examples(_si_sdr_ref()), check=TOL),
    Case("source_aggregated_signal_distortion_ratio-nan-ignore", fm.source_aggregated_signal_distortion_ratio,
         {"nan_strategy": "ignore"}, _nonfinite(lambda s: _signals(s, shape=(2,), dtype=torch.float64)),
         _finite_examples(_sa_sdr_ref(), dims=2)),
]


# ---------------------------------------------------------------- SDR (oracle: a dense float64 solve of the
# Toeplitz normal equations written here; fast-bss-eval / mir_eval parity in tests/test_audio_parity.py)

def _sdr_ref(filter_length, zero_mean=False, load_diag=None):
    def ref(p, t):
        p, t = _center(_np(p), zero_mean), _center(_np(t), zero_mean)
        p = p / np.maximum(np.linalg.norm(p, axis=-1, keepdims=True), 1e-6)
        t = t / np.maximum(np.linalg.norm(t, axis=-1, keepdims=True), 1e-6)
        n = t.shape[-1]
        out = []
        for pi, ti in zip(p.reshape(-1, n), t.reshape(-1, n)):
            r = np.array([ti[:n - k] @ ti[k:] if k < n else 0.0 for k in range(filter_length)])
            b = np.array([ti[:n - k] @ pi[k:] if k < n else 0.0 for k in range(filter_length)])
            if load_diag is not None:
                r[0] += load_diag
            idx = np.abs(np.arange(filter_length)[:, None] - np.arange(filter_length)[None, :])
            coh = b @ np.linalg.solve(r[idx], b)
            out.append(10 * np.log10(coh / (1 - coh)))
        return np.mean(out)
    return ref


CASES += [
    Case("signal_distortion_ratio", fm.signal_distortion_ratio, {"filter_length": 8}, _signals, _sdr_ref(8),
         check=dict(reference_rtol=1e-6, reference_atol=1e-6)),
    Case("signal_distortion_ratio-cg-zero_mean-f64", fm.signal_distortion_ratio,
         {"filter_length": 6, "use_cg_iter": 8, "zero_mean": True, "load_diag": 1e-6},
         lambda s: _signals(s, shape=(2,), dtype=torch.float64), _sdr_ref(6, True, 1e-6),
         check=dict(reference_rtol=1e-5, reference_atol=1e-5)),
]


# ---------------------------------------------------------------- PIT (oracle: brute force over permutations)

def _pit_ref(inner_ref, eval_func="max", mode="speaker-wise"):
    import itertools

    def ref(p, t):
        best = []
        for pi, ti in zip(p, t):
            s = pi.shape[0]
            scores = []
            for perm in itertools.permutations(range(s)):
                if mode == "speaker-wise":
                    scores.append(np.mean([inner_ref(pi[j:j + 1], ti[i:i + 1]) for i, j in enumerate(perm)]))
                else:
                    scores.append(inner_ref(pi[list(perm)].unsqueeze(0), ti.unsqueeze(0)))
            best.append(max(scores) if eval_func == "max" else min(scores))
        return np.mean(best)
    return ref


def _speakers(s, dtype=torch.float32):
    def batches(seed):
        g = torch.Generator().manual_seed(seed)
        out = []
        for n in SIZES:
            t = torch.randn(n, s, 32, generator=g, dtype=torch.float64)
            perm = torch.argsort(torch.rand(n, s, generator=g), -1)
            p = t[torch.arange(n)[:, None], perm] + 0.7 * torch.randn(n, s, 32, generator=g, dtype=torch.float64)
            out.append((p.to(dtype), t.to(dtype)))
        return out
    return batches


CASES += [
    Case("permutation_invariant_training-si_snr-2spk", fm.permutation_invariant_training,
         {"metric": fm.scale_invariant_signal_noise_ratio()}, _speakers(2), _pit_ref(_si_sdr_ref(True)), check=TOL),
    Case("permutation_invariant_training-snr-min-2spk", fm.permutation_invariant_training,
         {"metric": fm.signal_noise_ratio(), "eval_func": "min"}, _speakers(2, torch.float64),
         _pit_ref(_snr_ref(), "min")),
    Case("permutation_invariant_training-snr-nan-ignore", fm.permutation_invariant_training,
         {"metric": fm.signal_noise_ratio(), "nan_strategy": "ignore"}, _nonfinite(_speakers(2, torch.float64)),
         _finite_examples(_pit_ref(_snr_ref()), dims=2)),
    Case("permutation_invariant_training-sa_sdr-permutation-wise", fm.permutation_invariant_training,
         {"metric": fm.source_aggregated_signal_distortion_ratio(), "mode": "permutation-wise"}, _speakers(3),
         _pit_ref(_sa_sdr_ref(), mode="permutation-wise"), check=TOL),
]


# ---------------------------------------------------------------- PESQ (host input; oracle: the pesq package)

def _speech(seed, fs=8000, sizes=(2, 1, 0, 2)):
    """Amplitude-modulated tones with noise: pesq finds utterances in them."""
    g = torch.Generator().manual_seed(seed)
    time = torch.arange(fs) / fs
    out = []
    for n in sizes:
        f0 = 150 + 300 * torch.rand(n, 1, generator=g, dtype=torch.float64)
        env = torch.sin(2 * np.pi * (2 + 3 * torch.rand(n, 1, generator=g, dtype=torch.float64)) * time).abs()
        t = env * torch.sin(2 * np.pi * f0 * time)
        p = t + 0.05 * torch.randn(n, fs, generator=g, dtype=torch.float64)
        out.append((p.float(), t.float()))
    return out


def _pesq_ref(fs, mode):
    def ref(p, t):
        import pesq

        return np.mean([pesq.pesq(fs, ti, pi, mode) for pi, ti in zip(_np(p), _np(t))])
    return ref


try:
    import pesq as _pesq  # noqa: F401

    CASES += [
        Case("perceptual_evaluation_speech_quality-nb", fm.perceptual_evaluation_speech_quality,
             {"fs": 8000, "mode": "nb"}, _speech, _pesq_ref(8000, "nb"),
             check=dict(rtol=1e-9, atol=1e-9, num_splits=1)),
    ]
except ModuleNotFoundError:  # the optional extra is missing: the parity test skips with the reason
    pass


# ---------------------------------------------------------------- STOI (oracle: pystoi, per example)

def _stoi_signals(fs, time, sizes=(3, 1, 0, 2)):
    """Noisy copies of a target with a silent stretch (frames below -40 dB are removed)."""
    def batches(seed):
        g = torch.Generator().manual_seed(seed)
        out = []
        for n in sizes:
            t = torch.randn(n, time, generator=g, dtype=torch.float64)
            t[:, time // 3:time // 2] *= 1e-3
            p = t + 0.8 * torch.randn(n, time, generator=g, dtype=torch.float64)
            out.append((p, t))
        return out
    return batches


def _stoi_ref(fs, extended=False):
    def ref(p, t):
        import warnings

        from pystoi import stoi

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "not enough STFT frames" for short examples: pystoi returns 1e-5
            return np.mean([stoi(ti, pi, fs, extended) for pi, ti in zip(_np(p), _np(t))])
    return ref


try:
    import pystoi as _pystoi  # noqa: F401

    CASES += [
        Case("short_time_objective_intelligibility-8k", fm.short_time_objective_intelligibility, {"fs": 8000},
             _stoi_signals(8000, 4800), _stoi_ref(8000), check=dict(rtol=1e-9, atol=1e-9)),
        Case("short_time_objective_intelligibility-extended-10k", fm.short_time_objective_intelligibility,
             {"fs": 10000, "extended": True}, _stoi_signals(10000, 6000), _stoi_ref(10000, True),
             check=dict(rtol=1e-9, atol=1e-9)),
    ]
except ModuleNotFoundError:  # pystoi is in the dev extras; without it the parity tests skip
    pass


# ---------------------------------------------------------------- DNSMOS / NISQA (tiny random networks; the
# torchmetrics parity with the same networks lives in tests/test_audio_dnsmos_nisqa.py)

from tests._audio_nets import P808, P835, NISQANet  # noqa: E402


def _noise(time, sizes=(2, 1, 0, 2)):
    def batches(seed):
        g = torch.Generator().manual_seed(seed)
        return [(torch.rand(n, 1, generator=g) * torch.randn(n, time, generator=g),) for n in sizes]
    return batches


_MODEL_TOL = dict(rtol=1e-6, atol=1e-6)  # float32 networks: batch composition moves their output in the last bits
CASES += [
    Case("deep_noise_suppression_mean_opinion_score-16k", fm.deep_noise_suppression_mean_opinion_score,
         {"fs": 16000, "personalized": False, "p808": P808(), "p835": P835()}, _noise(18020), check=_MODEL_TOL),
    Case("deep_noise_suppression_mean_opinion_score-8k-personalized", fm.deep_noise_suppression_mean_opinion_score,
         {"fs": 8000, "personalized": True, "p808": P808(), "p835": P835()}, _noise(9010), check=_MODEL_TOL),
    Case("non_intrusive_speech_quality_assessment-16k", fm.non_intrusive_speech_quality_assessment,
         {"fs": 16000, "net": NISQANet()}, _noise(6000), check=_MODEL_TOL),
    Case("non_intrusive_speech_quality_assessment-48k", fm.non_intrusive_speech_quality_assessment,
         {"fs": 48000, "net": NISQANet()}, _noise(9000, sizes=(1, 2, 0)), check=_MODEL_TOL),
]


# ---------------------------------------------------------------- SRMR (oracle: torchmetrics' own code, tests/_srmr_oracle.py)

def _speechlike(fs, time, sizes=(2, 1, 0, 2)):
    """Noise under a slow amplitude modulation (a few Hz, as syllables), plus a decaying echo on some rows."""
    def batches(seed):
        g = torch.Generator().manual_seed(seed)
        out = []
        for n in sizes:
            t = torch.arange(time, dtype=torch.float64) / fs
            rate = 2 + 6 * torch.rand(n, 1, generator=g, dtype=torch.float64)
            x = (1.2 + torch.sin(2 * np.pi * rate * t)) * torch.randn(n, time, generator=g, dtype=torch.float64)
            echo = torch.rand(n, 1, generator=g, dtype=torch.float64) * 0.8
            x = x + echo * torch.nn.functional.pad(x, (200, 0))[:, :time]
            out.append((x * 0.4,))
        return out
    return batches


def _srmr_ref(fs, **options):
    def ref(x):
        from tests._srmr_oracle import srmr
        return srmr(x, fs, **options).mean().item()
    return ref


_SRMR_TOL = dict(rtol=1e-9, atol=1e-12, reference_rtol=1e-6)
CASES += [
    Case("speech_reverberation_modulation_energy_ratio-4k", fm.speech_reverberation_modulation_energy_ratio,
         {"fs": 4000}, _speechlike(4000, 1200), _srmr_ref(4000), check=_SRMR_TOL),
    Case("speech_reverberation_modulation_energy_ratio-8k-norm-fast", fm.speech_reverberation_modulation_energy_ratio,
         {"fs": 8000, "norm": True, "fast": True, "n_cochlear_filters": 12}, _speechlike(8000, 2600),
         _srmr_ref(8000, norm=True, fast=True, n_cochlear_filters=12), check=_SRMR_TOL),
]
