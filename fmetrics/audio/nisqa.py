"""`non_intrusive_speech_quality_assessment`: NISQA v2.0 (Mittag et al. 2021) with the user's network.

torchmetrics downloads the NISQA checkpoint; here the network is the metric's parameter (nothing is
downloaded). Per signal, as torchmetrics' ``non_intrusive_speech_quality_assessment`` (with the v2.0
checkpoint's settings; no resampling):

1. the 48-band magnitude mel spectrogram at the input rate ``fs``: n_fft 4096, hop ``int(0.01 fs)``,
   Hann window of ``int(0.02 fs)`` samples, reflect-padded centred frames, Slaney mel filters up to 20 kHz;
2. in dB: ``20 log10(max(1e-4, mel))``, floored 80 dB below the signal's maximum;
3. segments of 15 frames every 4 frames: ``n_wins = ceil((frames - 14) / 4)`` windows, zero-padded to
   1300, giving ``x`` of shape ``(N, 1300, 48, 15)``;
4. ``net(x, n_wins)`` -> ``(N, 5)``: overall MOS, noisiness, discontinuity, coloration, loudness.

The metric is the mean of that 5-vector over the signals seen (torchmetrics' class).
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.audio import _networks as nw
from fmetrics.audio._spectral import mel_spectrogram, power_to_db
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, merge_fields

__all__ = ["nisqa_features", "non_intrusive_speech_quality_assessment"]

N_FFT = 4096
N_MELS = 48
FMAX = 20000.0
SEG_LENGTH = 15
SEG_HOP = 4
MAX_SEGMENTS = 1300


class NISQAState(NamedTuple):
    total: torch.Tensor  # float64 (5,): sum of [mos, noisiness, discontinuity, coloration, loudness]
    count: torch.Tensor  # int64 (): signals counted
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


def _frames(name: str, fs: int, time: int) -> int:
    """The number of segments of a ``time``-sample signal; a ValueError when there are none or too many."""
    hop = int(fs * 0.01)
    wins = -(-(1 + time // hop - (SEG_LENGTH - 1)) // SEG_HOP)
    if wins < 1 or time <= N_FFT // 2:
        need = max((SEG_LENGTH - 1) * hop, N_FFT // 2 + 1)
        raise validation.fail(name, "preds", f"signals of at least {need} samples at fs={fs} (one 15-frame "
                              "mel segment, reflect padding of 2048)", f"{time} samples")
    if wins > MAX_SEGMENTS:
        raise validation.fail(name, "preds", f"signals of at most {MAX_SEGMENTS} mel segments (about "
                              f"{(MAX_SEGMENTS * SEG_HOP + SEG_LENGTH - 2) * hop} samples at fs={fs})",
                              f"{time} samples ({wins} segments)")
    return wins


def nisqa_features(rows: torch.Tensor, fs: int):
    """``(x, n_wins)`` for ``(N, time)`` signals: the float32 ``(N, 1300, 48, 15)`` segments and the int64
    ``(N,)`` number of valid ones (steps 1-3)."""
    wins = _frames("non_intrusive_speech_quality_assessment", fs, rows.shape[-1])
    mel = mel_spectrogram(rows, sr=fs, n_fft=N_FFT, hop=int(fs * 0.01), win_length=int(fs * 0.02),
                          n_mels=N_MELS, fmax=FMAX, power=1.0, pad_mode="reflect")
    db = power_to_db(mel * mel, amin=1e-8, top_db=80.0, ref=1.0)
    x = db.unfold(-1, SEG_LENGTH, SEG_HOP)[:, :, :wins].permute(0, 2, 1, 3)  # (N, wins, 48, 15)
    x = torch.nn.functional.pad(x.to(torch.float32), (0, 0, 0, 0, 0, MAX_SEGMENTS - wins))
    return x, torch.full((rows.shape[0],), wins, dtype=torch.int64, device=rows.device)


@factory
def non_intrusive_speech_quality_assessment(
    *,
    fs: int,
    net: torch.nn.Module,
    nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error",
) -> Metric:
    """NISQA: the mean ``[mos, noisiness, discontinuity, coloration, loudness]`` of the signals (module
    docstring: the steps).

    Args:
      fs: sampling rate of the input in Hz (positive int; the features are computed at this rate).
      net: the NISQA network, ``net(x, n_wins) -> (N, 5)`` with ``x`` the float32 ``(N, 1300, 48, 15)`` mel
        segments and ``n_wins`` the int64 ``(N,)`` count of valid segments (the rest are zeros): the
        original NISQA ``NISQA_DIM`` (or torchmetrics' ``_NISQADIM``) with the ``nisqa.tar`` weights loaded.
        Run in eval mode under no-grad; never modified.
      nan_strategy: NaN / inf in ``preds``: ``"error"`` (default; at once on CPU, else in ``finalize``),
        ``"warn"`` / ``"ignore"`` leave such signals out, ``"disable"`` lets NaN propagate.

    Inputs:
      ``update(state, preds)``: float signals ``(..., time)``, every row one signal, with at least one
      mel segment (``time >= max(14 int(0.01 fs), 2049)``) and at most 1300.

    Returns:
      float64 ``(5,)``: overall MOS, noisiness, discontinuity, coloration and loudness (torchmetrics' order)
      averaged over the signals (NaN and a warning when none was seen).

    Example::

        >>> class MeanLevel(torch.nn.Module):  # any network with NISQA's inputs
        ...     def forward(self, x, n_wins):
        ...         return (x.sum((1, 2, 3)) / (n_wins * 48 * 15)).unsqueeze(1).repeat(1, 5)
        >>> m = fmetrics.non_intrusive_speech_quality_assessment(fs=16000, net=MeanLevel())
        >>> g = torch.Generator().manual_seed(0)
        >>> s = m.update(m.init(), torch.rand(2, 16000, generator=g) - 0.5)
        >>> m.finalize(s)
        tensor([-18.4066, -18.4066, -18.4066, -18.4066, -18.4066], dtype=torch.float64)
    """
    name = "non_intrusive_speech_quality_assessment"
    nw.check_fs(name, fs)
    nw.check_strategy(name, nan_strategy)
    if not isinstance(net, torch.nn.Module):
        raise validation.fail(name, "net", "a torch nn.Module net(x, n_wins) -> (N, 5)", type(net).__name__)
    run = nw.runner(name, "net", net)

    def init():
        return NISQAState(torch.zeros(5, dtype=accum_dtype()), torch.zeros((), dtype=torch.int64),
                          torch.zeros((), dtype=torch.int64))

    def update(state, preds):
        rows = nw.signals(name, preds)
        _frames(name, fs, rows.shape[-1])
        if rows.shape[0] == 0:  # no signal (the FFT backends reject an empty batch)
            return state
        screened = nw.screen(nan_strategy, rows)
        if screened is not None:
            rows = torch.where(screened[0][:, None], rows, 0)
        out = run(*nisqa_features(rows, fs)).reshape(rows.shape[0], -1)
        if out.shape[-1] != 5:
            raise validation.fail(name, "net", "a network returning (N, 5)", f"shape {tuple(out.shape)}")
        return nw.add_scores(state, out, screened)

    def finalize(state):
        return nw.mean_scores(name, nan_strategy, state)

    tags = NISQAState("sum", "sum", "sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, higher_is_better=True, check=nw.eager_check(name, nan_strategy))
