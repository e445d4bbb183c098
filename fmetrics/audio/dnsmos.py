"""`deep_noise_suppression_mean_opinion_score`: DNSMOS (Reddy et al. 2021/2022) with the user's networks.

torchmetrics downloads Microsoft's ONNX models; here the two networks are the metric's parameters (nothing is
downloaded). Per signal, as torchmetrics' ``deep_noise_suppression_mean_opinion_score``:

1. resample to 16 kHz when ``fs != 16000`` (``resample_poly``'s Kaiser filter; torchmetrics uses librosa's
   ``soxr_hq``: see docs/audio.md);
2. repeat the signal (doubling) until it has ``L = int(9.01 * 16000) = 144160`` samples;
3. for each 1 s hop ``i < int(floor(time / 16000) - 9.01) + 1``, the segment
   ``[16000 i, int((i + 9.01) 16000))``:
   ``p835(segment)`` -> raw ``(sig, bak, ovr)`` and ``p808(mel)`` -> raw P.808 MOS, where ``mel`` is the
   120-band power mel spectrogram (n_fft 321, hop 160, Hann, zero-padded centred frames) of the segment
   without its last 160 samples, in dB relative to its maximum (floor -80 dB), mapped by ``(dB + 40) / 40``,
   frames first;
4. the polynomial fits: ``sig = -0.08397278 s^2 + 1.22083953 s + 0.0052439``,
   ``bak = -0.13166888 b^2 + 1.60915514 b - 0.39604546``, ``ovr = -0.06766283 o^2 + 1.11546468 o + 0.04602535``
   (cubic fits with ``personalized=True``); P.808 is kept as it is;
5. the mean over hops: ``[p808_mos, mos_sig, mos_bak, mos_ovr]``.

The metric is the mean of that 4-vector over the signals seen (torchmetrics' class).
"""
from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.audio import _networks as nw
from fmetrics.audio._spectral import mel_spectrogram, power_to_db, resample_poly
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, merge_fields

__all__ = ["deep_noise_suppression_mean_opinion_score", "dnsmos_values"]

FS = 16000
INPUT_LENGTH = 9.01
LEN_SAMPLES = int(INPUT_LENGTH * FS)
POLY = {  # highest power first (np.poly1d), for sig, bak, ovr
    False: ((-0.08397278, 1.22083953, 0.0052439), (-0.13166888, 1.60915514, -0.39604546),
            (-0.06766283, 1.11546468, 0.04602535)),
    True: ((-0.01019296, 0.02751166, 1.19576786, -0.24348726), (-0.04976499, 0.44276479, -0.1644611, 0.96883132),
           (-0.00533021, 0.005101, 1.18058466, -0.11236046)),
}


class DNSMOSState(NamedTuple):
    total: torch.Tensor  # float64 (4,): sum of [p808_mos, mos_sig, mos_bak, mos_ovr] over the signals
    count: torch.Tensor  # int64 (): signals counted
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


def _horner(coeffs, x: torch.Tensor) -> torch.Tensor:
    out = torch.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        out = out * x + c
    return out


def p808_features(seg: torch.Tensor) -> torch.Tensor:
    """``(N, 900, 120)`` float32: the P.808 network's input for ``(N, L)`` segments."""
    mel = mel_spectrogram(seg[:, :-160], sr=FS, n_fft=321, hop=160, win_length=321, n_mels=120,
                          fmax=FS / 2, power=2.0, pad_mode="constant")
    return ((power_to_db(mel, amin=1e-10, top_db=80.0) + 40) / 40).transpose(1, 2).to(torch.float32)


def dnsmos_values(rows: torch.Tensor, fs: int, personalized: bool, p808, p835) -> torch.Tensor:
    """``(N, 4)`` float64 DNSMOS of ``(N, time)`` signals; ``p808`` / ``p835`` are callables (float32 in)."""
    audio = resample_poly(rows, FS, fs) if fs != FS else rows
    while audio.shape[-1] < LEN_SAMPLES:
        audio = torch.cat([audio, audio], -1)
    hops = int(math.floor(audio.shape[-1] / FS) - INPUT_LENGTH) + 1
    moss = []
    for i in range(hops):
        seg = audio[:, int(i * FS):int((i + INPUT_LENGTH) * FS)]
        if seg.shape[-1] < LEN_SAMPLES:
            continue
        raw808 = p808(p808_features(seg)).reshape(seg.shape[0], -1)
        raw835 = p835(seg.to(torch.float32)).reshape(seg.shape[0], -1)
        if raw808.shape[-1] != 1 or raw835.shape[-1] != 3:
            raise ValueError(f"deep_noise_suppression_mean_opinion_score: p808 must return one value and p835 "
                             f"three (sig, bak, ovr) per segment; got {raw808.shape[-1]} and {raw835.shape[-1]}")
        fits = [_horner(c, raw835[:, k]) for k, c in enumerate(POLY[personalized])]
        moss.append(torch.stack([raw808[:, 0], *fits], -1))
    return torch.stack(moss, -1).mean(-1)


@factory
def deep_noise_suppression_mean_opinion_score(
    *,
    fs: int,
    personalized: bool,
    p808: Any,
    p835: Any,
    nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error",
) -> Metric:
    """DNSMOS: the mean ``[p808_mos, mos_sig, mos_bak, mos_ovr]`` of the signals (module docstring: the steps).

    Args:
      fs: sampling rate of the input in Hz (resampled to 16 kHz when it differs).
      personalized: ``True``: the personalized DNSMOS fits (interfering speakers penalized; pass the pDNSMOS
        ``sig_bak_ovr`` network as ``p835``); ``False``: the plain fits.
      p808: the P.808 network (``model_v8.onnx``): ``(N, 900, 120)`` float32 log-mel features -> ``(N, 1)``
        raw MOS. A torch ``nn.Module`` (run in eval mode under no-grad; never modified) or an onnxruntime
        ``InferenceSession`` (host side: the update syncs, and cannot be compiled or vmapped).
      p835: the P.835 network (``sig_bak_ovr.onnx``): ``(N, 144160)`` float32 16 kHz audio -> ``(N, 3)`` raw
        ``(sig, bak, ovr)``. A module or a session, as ``p808``.
      nan_strategy: NaN / inf in ``preds``: ``"error"`` (default; at once on CPU, else in ``finalize``),
        ``"warn"`` / ``"ignore"`` leave such signals out, ``"disable"`` lets NaN propagate.

    Inputs:
      ``update(state, preds)``: float signals ``(..., time)``; every row is one signal.

    Returns:
      float64 ``(4,)``: ``[p808_mos, mos_sig, mos_bak, mos_ovr]`` averaged over the signals (NaN and a
      warning when none was seen).

    Example::

        >>> p808 = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.AdaptiveAvgPool1d(1))  # mean log-mel
        >>> p835 = torch.nn.Sequential(torch.nn.Unflatten(1, (1, -1)), torch.nn.AdaptiveMaxPool1d(3),
        ...                            torch.nn.Flatten())
        >>> m = fmetrics.deep_noise_suppression_mean_opinion_score(fs=16000, personalized=False,
        ...                                                        p808=p808, p835=p835)
        >>> g = torch.Generator().manual_seed(0)
        >>> s = m.update(m.init(), torch.rand(2, 16000, generator=g))
        >>> m.finalize(s)
        tensor([0.2297, 1.1420, 1.0813, 1.0937], dtype=torch.float64)
    """
    name = "deep_noise_suppression_mean_opinion_score"
    nw.check_fs(name, fs)
    if not isinstance(personalized, bool):
        raise validation.fail(name, "personalized", "a bool", repr(personalized))
    nw.check_strategy(name, nan_strategy)
    run808, run835 = nw.runner(name, "p808", p808), nw.runner(name, "p835", p835)

    def init():
        return DNSMOSState(torch.zeros(4, dtype=accum_dtype()), torch.zeros((), dtype=torch.int64),
                           torch.zeros((), dtype=torch.int64))

    def update(state, preds):
        rows = nw.signals(name, preds)
        if rows.shape[0] == 0:  # no signal (the FFT backends reject an empty batch)
            return state
        screened = nw.screen(nan_strategy, rows)
        if screened is not None:
            rows = torch.where(screened[0][:, None], rows, 0)
        return nw.add_scores(state, dnsmos_values(rows, fs, personalized, run808, run835), screened)

    def finalize(state):
        return nw.mean_scores(name, nan_strategy, state)

    tags = DNSMOSState("sum", "sum", "sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags,
                  higher_is_better=True, check=nw.eager_check(name, nan_strategy))

