"""Torch versions of the librosa / SciPy steps DNSMOS and NISQA use: mel spectrograms, dB scaling, resampling.

* `mel_spectrogram`: ``librosa.feature.melspectrogram`` (periodic Hann window
  of ``win_length`` centred in ``n_fft``, centred frames, ``|STFT|^power``,
  Slaney mel filters with Slaney area normalization), frames last.
* `mel_filters`: ``librosa.filters.mel(htk=False, norm="slaney")``, built by
  torch ops on the target device (no host table copied per update).
* `power_to_db`: ``librosa.power_to_db`` with ``ref=np.max`` or a number,
  per example (the ``top_db`` floor is relative to each example's maximum).
* `resample_poly`: ``scipy.signal.resample_poly(x, up, down)`` (its default
  Kaiser window, beta 5, ``10 * max(up, down)`` taps a side) as one strided
  ``conv1d`` of the zero-stuffed signal.

Everything runs batched over the leading axis, in float64, without a host sync.
"""
from __future__ import annotations

import math

import torch

_F_SP = 200.0 / 3  # Slaney mel scale: linear below 1 kHz ...
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOGSTEP = math.log(6.4) / 27.0  # ... logarithmic above


def _hz_to_mel(f: float) -> float:
    return f / _F_SP if f < _MIN_LOG_HZ else _MIN_LOG_MEL + math.log(f / _MIN_LOG_HZ) / _LOGSTEP


def _mel_to_hz(m: torch.Tensor) -> torch.Tensor:
    return torch.where(m >= _MIN_LOG_MEL, _MIN_LOG_HZ * torch.exp(_LOGSTEP * (m - _MIN_LOG_MEL)), _F_SP * m)


def mel_filters(sr: int, n_fft: int, n_mels: int, fmax: float, device=None) -> torch.Tensor:
    """``(n_mels, n_fft // 2 + 1)`` float64 triangular filters, ``fmin = 0`` (librosa's Slaney filters)."""
    fft_f = torch.arange(n_fft // 2 + 1, dtype=torch.float64, device=device) * (sr / n_fft)
    mel_f = _mel_to_hz(torch.linspace(0.0, _hz_to_mel(fmax), n_mels + 2, dtype=torch.float64, device=device))
    fdiff = mel_f.diff()
    ramps = mel_f[:, None] - fft_f[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = torch.clamp(torch.minimum(lower, upper), min=0.0)
    return weights * (2.0 / (mel_f[2:] - mel_f[:-2]))[:, None]


def mel_spectrogram(x: torch.Tensor, *, sr: int, n_fft: int, hop: int, win_length: int, n_mels: int,
                    fmax: float, power: float, pad_mode: str) -> torch.Tensor:
    """``(B, n_mels, frames)`` mel spectrogram of ``(B, time)`` signals (float64)."""
    x = x.to(torch.float64)
    window = torch.hann_window(win_length, periodic=True, dtype=torch.float64, device=x.device)
    spec = torch.stft(x, n_fft, hop_length=hop, win_length=win_length, window=window, center=True,
                      pad_mode=pad_mode, return_complex=True).abs()
    if power != 1.0:
        spec = spec ** power
    return mel_filters(sr, n_fft, n_mels, fmax, x.device) @ spec


def power_to_db(s: torch.Tensor, *, amin: float, top_db: float, ref=None) -> torch.Tensor:
    """``10 log10(max(amin, s) / max(amin, ref))`` floored at ``top_db`` below each example's maximum
    (``ref=None``: the example's maximum, librosa's ``ref=np.max``). ``s``: ``(B, ...)``."""
    db = 10.0 * torch.log10(torch.clamp(s, min=amin))
    flat = db.flatten(1)
    peak = flat.amax(1).reshape(-1, *([1] * (s.dim() - 1)))
    if ref is None:
        db, peak = db - peak, torch.zeros_like(peak)  # log10(max(amin, max s)) = the maximum of db
    elif ref != 1.0:
        db, peak = db - 10.0 * math.log10(max(amin, ref)), peak - 10.0 * math.log10(max(amin, ref))
    return torch.maximum(db, peak - top_db)


def resample_taps(up: int, down: int) -> int:
    """Half length of `resample_poly`'s filter (SciPy's ``10 * max(up, down)``)."""
    return 10 * max(up, down)


def resample_poly(x: torch.Tensor, up: int, down: int) -> torch.Tensor:
    """``scipy.signal.resample_poly(x, up, down, axis=-1)`` of ``(B, time)`` signals (float64).

    The filter is ``firwin(2 h + 1, 1 / max(up, down), window=("kaiser", 5.0)) * up`` (``h`` =
    `resample_taps`); output ``m`` is ``sum_k f[k] u[m down + k - h]`` over the zero-stuffed signal ``u``
    (``u[j up] = x[j]``), ``ceil(time up / down)`` outputs.
    """
    g = math.gcd(up, down)
    up, down = up // g, down // g
    if up == down:
        return x.to(torch.float64)
    x = x.to(torch.float64)
    b, n = x.shape
    half = resample_taps(up, down)
    t = torch.arange(-half, half + 1, dtype=torch.float64, device=x.device)
    cutoff = 1.0 / max(up, down)
    f = cutoff * torch.sinc(cutoff * t) * torch.kaiser_window(2 * half + 1, periodic=False, beta=5.0,
                                                               dtype=torch.float64, device=x.device)
    f = f / f.sum() * up
    n_out = -(-n * up // down)
    u = torch.nn.functional.pad(x.unsqueeze(-1), (0, up - 1)).reshape(b, n * up)
    right = max(0, (n_out - 1) * down + 2 * half + 1 - (n * up + half))
    u = torch.nn.functional.pad(u, (half, right)).unsqueeze(1)
    return torch.nn.functional.conv1d(u, f.flip(0).reshape(1, 1, -1), stride=down)[:, 0, :n_out]
