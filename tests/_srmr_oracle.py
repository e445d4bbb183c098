"""The SRMR oracle: torchmetrics' own ``speech_reverberation_modulation_energy_ratio`` run without torchaudio.

torchmetrics' SRMR needs ``gammatone`` (installed: the dev extra) for its filterbank constants and
torchaudio's ``lfilter`` for its IIR filters; torchaudio is not installed here. During the call only, a
stand-in ``torchaudio.functional.filtering.lfilter`` is put in ``sys.modules``: SciPy's
``scipy.signal.lfilter`` (direct form II transposed, run sequentially over time), per channel, with
torchaudio's semantics (``batching=True``: channel ``c`` of ``(..., C, T)`` by coefficients row ``c``;
coefficients normalized by ``a[0]``; ``clamp=True`` clips the output to [-1, 1]). Every other step is
torchmetrics' code.
"""
import contextlib
import sys
import types

import numpy as np
import scipy.signal
import torch


def _lfilter(waveform, a_coeffs, b_coeffs, clamp=True, batching=True):
    x = waveform.detach().cpu().numpy()
    a, b = a_coeffs.detach().cpu().numpy(), b_coeffs.detach().cpu().numpy()
    out = np.empty_like(x)
    for c in range(a.shape[0]):
        out[..., c, :] = scipy.signal.lfilter(b[c], a[c], x[..., c, :], axis=-1)
    y = torch.from_numpy(out)
    return y.clamp(-1, 1) if clamp else y


@contextlib.contextmanager
def _torchaudio_standin():
    import torchmetrics.functional.audio.srmr as S
    ta, fn, fl = (types.ModuleType(n) for n in ("torchaudio", "torchaudio.functional",
                                                 "torchaudio.functional.filtering"))
    fl.lfilter, ta.functional, fn.filtering = _lfilter, fn, fl
    names = {"torchaudio": ta, "torchaudio.functional": fn, "torchaudio.functional.filtering": fl}
    saved = {k: sys.modules.get(k) for k in names}
    flags = S._TORCHAUDIO_AVAILABLE, S._GAMMATONE_AVAILABLE
    sys.modules.update(names)
    S._TORCHAUDIO_AVAILABLE = S._GAMMATONE_AVAILABLE = True
    try:
        yield S.speech_reverberation_modulation_energy_ratio
    finally:
        S._TORCHAUDIO_AVAILABLE, S._GAMMATONE_AVAILABLE = flags
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def srmr(x: torch.Tensor, fs: int, **options) -> torch.Tensor:
    """torchmetrics' per-example SRMR of ``x`` ``(..., time)`` (float64)."""
    import warnings
    with _torchaudio_standin() as fn, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fast=True: "may slow down the speed of SRMR metric on GPU"
        return fn(x.to(torch.float64), fs, **options)
