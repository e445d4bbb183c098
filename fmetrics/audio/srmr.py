"""Speech-to-reverberation modulation energy ratio (SRMR, Falk et al. 2010), in torch, as torchmetrics defines it.

The steps of torchmetrics' ``speech_reverberation_modulation_energy_ratio`` (a
port of SRMRpy / the SRMR toolbox), batched over examples, in float64:

1. each signal scaled by ``max(1, max |x|)``;
2. a gammatone filterbank of ``n_cochlear_filters`` ERB-spaced channels from
   ``low_freq`` to ``fs / 2`` (Slaney's four cascaded biquads, each stage's
   output clipped to [-1, 1] as torchaudio's ``lfilter`` does by default) and
   the Hilbert envelope (FFT length rounded up to a multiple of 16); or, with
   ``fast=True``, the FFT-weighted gammatonegram (10 ms windows, 2.5 ms hop:
   an envelope sampled at 400 Hz), as the ``gammatone`` package's ``fft_gtgram``;
3. eight modulation band-pass biquads (Q = 2) with centre frequencies spaced
   geometrically from ``min_cf`` to ``max_cf``;
4. the energy of 256 ms Hamming frames every 64 ms, optionally clipped to a
   30 dB range below its peak (``norm``), averaged over frames;
5. ``SRMR = sum_{k<4} E_k / sum_{4<=k<k*} E_k`` (energies summed over the
   cochlear channels) with ``k*`` set by the bandwidth holding 90% of the energy.

The IIR filters run by blocks of 64 samples (one matmul with the impulse
response's Toeplitz matrix) chained by a parallel prefix scan over blocks
(``log2(T / 64)`` tensor steps, no Python loop over samples), so ``update`` is
traceable, vmap-able and runs on the state's device.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F

from fmetrics import validation
from fmetrics.audio._mean import NanStrategy, check_bool, check_nan_strategy, per_example_mean
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["speech_reverberation_modulation_energy_ratio", "srmr_values"]

EAR_Q, MIN_BW = 9.26449, 24.7  # Glasberg and Moore
F64 = torch.float64


class Constants(NamedTuple):
    erb_coefs: torch.Tensor   # (N, 10) Slaney's A0, A11..A14, A2, B0, B1, B2, gain
    erbs: torch.Tensor        # (N,) channel bandwidths, low to high
    mod_b: torch.Tensor       # (8, 3) modulation filter numerators
    mod_a: torch.Tensor       # (8, 3) ... denominators
    cutoffs: torch.Tensor     # (8,) lower cut-offs of the modulation bands
    fft_weights: Optional[torch.Tensor]  # (N, nfft / 2 + 1) fast gammatonegram weights


def _centre_freqs(fs: int, n: int, low: float, device) -> torch.Tensor:
    """ERB-spaced centre frequencies from ``fs / 2`` down to ``low`` (gammatone's ``centre_freqs``)."""
    frac = torch.arange(1, n + 1, dtype=F64, device=device) / n
    hi = fs / 2 + EAR_Q * MIN_BW
    return -EAR_Q * MIN_BW + torch.exp(frac * (math.log(low + EAR_Q * MIN_BW) - math.log(hi))) * hi


def _erb_filters(fs: int, cf: torch.Tensor) -> torch.Tensor:
    """Slaney's ``MakeERBFilters`` coefficients ``(N, 10)`` (gammatone's ``make_erb_filters``)."""
    t = 1.0 / fs
    erb = cf / EAR_Q + MIN_BW
    b = 1.019 * 2 * math.pi * erb
    arg = 2 * cf * math.pi * t
    vec = torch.exp(2j * arg.to(torch.complex128))
    cos, sin, decay = torch.cos(arg), torch.sin(arg), torch.exp(-b * t)
    rt_pos, rt_neg = math.sqrt(3 + 2 ** 1.5), math.sqrt(3 - 2 ** 1.5)
    ks = [cos + rt_pos * sin, cos - rt_pos * sin, cos + rt_neg * sin, cos - rt_neg * sin]
    common = -t * decay
    gain_arg = torch.exp(1j * arg.to(torch.complex128) - b * t)
    g = (t / decay / (-decay + 1 + vec * (1 - 1 / decay))) ** 4
    for k in ks:
        g = g * (vec - gain_arg * k)
    ones = torch.ones_like(cf)
    return torch.stack([t * ones, *(common * k for k in ks), 0 * ones, ones, -2 * cos * decay, decay ** 2,
                        g.abs()], dim=-1)


def _modulation_filters(min_cf: float, max_cf: float, fs: float, device, n: int = 8, q: int = 2):
    """``(b, a, lower cut-offs)`` of the ``n`` modulation band-pass biquads (torchmetrics' definition)."""
    cfs = min_cf * (max_cf / min_cf) ** (torch.arange(n, dtype=F64, device=device) / (n - 1))
    w0 = torch.tan(2 * math.pi * cfs / fs / 2)
    b0 = w0 / q
    zero = torch.zeros_like(b0)
    b = torch.stack([b0, zero, -b0], -1)
    a = torch.stack([1 + b0 + w0 ** 2, 2 * w0 ** 2 - 2, 1 - b0 + w0 ** 2], -1)
    cutoffs = cfs - torch.tan(2 * math.pi * cfs / fs / 2) / q * fs / (2 * math.pi)
    return b, a, cutoffs


def _fft_weights(nfft: int, fs: int, n: int, low: float, device) -> torch.Tensor:
    """gammatone's ``fft_weights``: FFT bins to gammatone channels (low to high), ``(n, nfft // 2 + 1)``."""
    cf = _centre_freqs(fs, n, low, device).flip(0)
    c = _erb_filters(fs, cf)
    ucirc = torch.exp(2j * math.pi * torch.arange(nfft // 2 + 1, dtype=F64, device=device) / nfft)[None]
    pole = (c[:, 8].sqrt() * torch.exp(1j * (2 * math.pi * cf / fs)))[:, None]
    w = (fs * (pole - ucirc) * (pole.conj() - ucirc)).abs() ** -4 / c[:, 9, None]
    for j in range(1, 5):
        w = w * (ucirc + c[:, j, None] * fs).abs()
    return w


def constants(fs: int, n: int, low: float, min_cf: float, max_cf: float, fast: bool, device=None) -> Constants:
    """The filterbanks of one configuration, built by torch ops on ``device`` (no host-to-device copy)."""
    cf = _centre_freqs(fs, n, low, device)
    mfs = 400.0 if fast else float(fs)
    mb, ma, cutoffs = _modulation_filters(min_cf, max_cf, mfs, device)
    weights = _fft_weights(_nfft(fs), fs, n, low, device) if fast else None
    return Constants(_erb_filters(fs, cf), (cf / EAR_Q + MIN_BW).flip(0), mb, ma, cutoffs, weights)


def _nfft(fs: int) -> int:
    return int(2 ** math.ceil(math.log2(2 * 0.010 * fs)))


def _round_half_away(x: float) -> int:
    return int(math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1))


# ---------------------------------------------------------------- filtering by a prefix scan

def _shift(x: torch.Tensor, k: int) -> torch.Tensor:
    """``x`` delayed by ``k`` samples along the last axis (zeros first)."""
    return F.pad(x[..., :x.shape[-1] - k], (k, 0)) if k < x.shape[-1] else torch.zeros_like(x)


def _scan(u0: torch.Tensor, u1: torch.Tensor, m: list) -> tuple:
    """``s_j = M s_{j-1} + u_j`` along the last axis (``s_{-1} = 0``), ``M = [[m00, m01], [m10, m11]]`` per channel
    ``(C, 1)``, by a Hillis-Steele scan: after step ``i`` each ``s_j`` sums ``M^k u_{j-k}`` for ``k < 2^(i+1)``."""
    m00, m01, m10, m11 = m
    k, n = 1, u0.shape[-1]
    while k < n:
        s0, s1 = _shift(u0, k), _shift(u1, k)
        u0, u1 = u0 + m00 * s0 + m01 * s1, u1 + m10 * s0 + m11 * s1
        m00, m01, m10, m11 = m00 * m00 + m01 * m10, m00 * m01 + m01 * m11, m10 * m00 + m11 * m10, m10 * m01 + m11 * m11
        k *= 2
    return u0, u1


def biquad(x: torch.Tensor, b: torch.Tensor, a: torch.Tensor, block: int = 64) -> torch.Tensor:
    """``lfilter(b, a, x)`` along the last axis for biquads ``b, a`` of shape ``(C, 3)`` over ``x`` ``(..., C, T)``.

    The FIR part by shifts. The recursion ``y_n = v_n + c1 y_{n-1} + c2 y_{n-2}`` by blocks of ``L``
    samples: each block's zero-state response is one matmul with the ``L x L`` Toeplitz matrix of the
    impulse response ``h``; the state a block hands on, ``(y_{L-1}, y_{L-2})``, follows ``s_j = M s_{j-1} +
    e_j`` over blocks (a prefix scan, `_scan`), and enters block ``j`` as ``h_{n+1} y_{-1} + c2 h_n y_{-2}``.
    """
    b, a = b / a[:, :1], a / a[:, :1]
    col = lambda t: t[:, None]  # (C, 1)
    t, ch = x.shape[-1], x.shape[-2]
    nb = -(-t // block)
    # the FIR part (zeros before the signal), padded to whole blocks: three passes over one padded copy
    xp = F.pad(x.reshape(-1, ch, t), (2, nb * block - t))
    n = nb * block
    v = (xp[..., 2:] * col(b[:, 0])).addcmul_(xp[..., 1:n + 1], col(b[:, 1])).addcmul_(xp[..., :n], col(b[:, 2]))
    c1, c2 = -a[:, 1], -a[:, 2]
    h = [torch.ones_like(c1), c1]  # impulse response h_0 .. h_L
    for _ in range(block - 1):
        h.append(c1 * h[-1] + c2 * h[-2])
    h = torch.stack(h, -1)  # (C, L + 1)
    lag = torch.arange(block, device=x.device)
    diff = lag[None, :] - lag[:, None]  # (L, L): n - m at row m, column n
    toeplitz = torch.where(diff >= 0, h[:, diff.clamp(min=0)], 0.0)  # (C, L, L): h_{n-m} for n >= m
    y0 = v.unflatten(-1, (nb, block)) @ toeplitz  # (B', C, nb, L) zero-state responses
    g = torch.stack([h[:, 1:], col(c2) * h[:, :-1]], -2)  # (C, 2, L): responses to y_{-1} = 1, y_{-2} = 1
    m = [col(g[:, 0, -1]), col(g[:, 1, -1]), col(g[:, 0, -2]), col(g[:, 1, -2])]
    s0, s1 = _scan(y0[..., -1], y0[..., -2], m)  # (B', C, nb): (y_{L-1}, y_{L-2}) at each block's end
    state = torch.stack([_shift(s0, 1), _shift(s1, 1)], -1)  # (B', C, nb, 2): the state entering each block
    y = torch.baddbmm(y0.flatten(0, 1), state.flatten(0, 1), g.expand(y0.shape[0], -1, -1, -1).flatten(0, 1)) \
        if y0.shape[0] else y0
    return y.reshape(*x.shape[:-1], nb * block)[..., :t]


def _erb_filterbank(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``(B, T)`` -> ``(B, N, T)``: four cascaded biquads per channel, each output clipped to [-1, 1]."""
    y = x[:, None, :].expand(-1, c.shape[0], -1)
    den = c[:, 6:9]
    for j in range(1, 5):
        y = biquad(y, torch.stack([c[:, 0], c[:, j], c[:, 5]], -1), den).clamp(-1.0, 1.0)
    return y / c[:, 9, None]


def _hilbert_envelope(x: torch.Tensor) -> torch.Tensor:
    """``|analytic signal|`` with the FFT length rounded up to a multiple of 16 (torchmetrics' ``_hilbert``)."""
    t = x.shape[-1]
    n = -(-t // 16) * 16
    h = torch.zeros(n, dtype=F64, device=x.device)
    h[0] = 1
    h[1:(n + 1) // 2] = 2
    if n % 2 == 0:
        h[n // 2] = 1
    return torch.fft.ifft(torch.fft.fft(x, n=n, dim=-1) * h, dim=-1)[..., :t].abs()


def _fft_gtgram(x: torch.Tensor, fs: int, weights: torch.Tensor) -> torch.Tensor:
    """gammatone's ``fft_gtgram`` (10 ms Hann windows in ``nfft`` frames every 2.5 ms): ``(B, N, frames)``."""
    nfft, s = _nfft(fs), x.shape[-1]
    nwin, nhop = _round_half_away(0.010 * fs), _round_half_away(0.0025 * fs)
    half, halff = nwin // 2, nfft // 2
    act = min(halff, half)
    halfwin = 0.5 * (1 + torch.cos(math.pi * torch.arange(act, dtype=F64, device=x.device) / half))
    win = torch.zeros(nfft, dtype=F64, device=x.device)
    win[halff:halff + act] = halfwin
    win[halff - act + 1:halff + 1] = halfwin.flip(0)
    count, cols = len(range(0, s - nfft, nhop)), 1 + (s - nfft) // nhop  # gammatone's loop leaves the rest zero
    frames = x.unfold(-1, nfft, nhop)[..., :count, :] * win
    spec = torch.fft.rfft(frames, dim=-1).abs()  # (B, count, nfft / 2 + 1)
    gt = torch.einsum("nf,bcf->bnc", weights, spec) / nfft
    return F.pad(gt, (0, cols - count))


def _frame_energy(x: torch.Tensor, w_len: int, w_inc: int, device) -> torch.Tensor:
    """``sum_i (x[j w_inc + i] w_i)^2`` for every whole Hamming frame ``j``: the squared signal cut in hops,
    each hop times the ``K = ceil(w_len / w_inc)`` window segments (one matmul), frame ``j`` summing segment
    ``q`` of hop ``j + q``."""
    k = -(-w_len // w_inc)
    frames = (x.shape[-1] - w_len) // w_inc + 1
    w2 = torch.hamming_window(w_len + 1, dtype=F64, device=device)[:-1].square()
    segments = F.pad(w2, (0, k * w_inc - w_len)).reshape(k, w_inc).T  # (w_inc, K)
    hops = frames + k - 1
    x2 = F.pad(x, (0, max(hops * w_inc - x.shape[-1], 0)))[..., :hops * w_inc].square()
    parts = x2.unflatten(-1, (hops, w_inc)) @ segments  # (..., hops, K)
    return sum(parts[..., q:q + frames, q] for q in range(k))


def srmr_values(preds: torch.Tensor, fs: int, c: Constants, norm: bool, fast: bool) -> torch.Tensor:
    """SRMR of each row of ``preds`` ``(B, T)`` float64: ``(B,)``."""
    time = preds.shape[-1]
    x = preds / preds.abs().amax(-1, keepdim=True).clamp(min=1.0)
    if fast:
        env, mfs = _fft_gtgram(x, fs, c.fft_weights), 400.0
    else:
        env, mfs = _hilbert_envelope(_erb_filterbank(x, c.erb_coefs)), float(fs)
    w_len, w_inc = math.ceil(0.256 * mfs), math.ceil(0.064 * mfs)
    num_frames = 1 + (time - w_len) // w_inc  # from the signal's length (torchmetrics', also with fast=True)
    mod = biquad(env[:, :, None, :].expand(-1, -1, 8, -1), c.mod_b, c.mod_a)  # (B, N, 8, T')
    mod = F.pad(mod, (0, max(-(-time // w_inc) * w_inc - time, w_len - time)))
    energy = _frame_energy(mod, w_len, w_inc, x.device)[..., :num_frames]  # (B, N, 8, frames)
    if norm:  # a 30 dB range below the peak of the channel-averaged energy
        peak = energy.mean(1, keepdim=True).amax(dim=(2, 3), keepdim=True)
        energy = torch.minimum(torch.maximum(energy, peak * 10.0 ** -3), peak)
    avg = energy.mean(-1)  # (B, N, 8)
    per_channel = avg.sum(-1)
    perc = per_channel * 100 / per_channel.sum(-1, keepdim=True)
    idx = torch.argmax((perc.flip(-1).cumsum(-1) > 90).to(torch.uint8), dim=-1)
    bw = c.erbs[idx]  # (B,)
    kstar = 4 + (c.cutoffs[4:] <= bw[:, None]).sum(-1)  # 5..8 (torchmetrics raises where it would be 4)
    band = torch.arange(8, device=x.device)
    upper = ((band >= 4) & (band < kstar.clamp(min=5)[:, None])).to(F64)
    total = avg.sum(1)  # (B, 8): energy summed over the cochlear channels
    return total[:, :4].sum(-1) / (total * upper).sum(-1)


# ---------------------------------------------------------------- the metric

@factory
def speech_reverberation_modulation_energy_ratio(
    *,
    fs: int,
    n_cochlear_filters: int = 23,
    low_freq: float = 125,
    min_cf: float = 4,
    max_cf: Optional[float] = None,
    norm: bool = False,
    fast: bool = False,
    per_example: bool = False,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """Speech-to-reverberation modulation energy ratio (SRMR), non-intrusive: ``sum_{k<4} E_k / sum_{4<=k<k*} E_k``.

    ``E_k``: the energy of modulation band ``k`` of the gammatone envelopes (see
    the module docstring for every step), as torchmetrics' functional
    ``speech_reverberation_modulation_energy_ratio`` (SRMRpy). Higher is less
    reverberant. The stream value is the mean over examples.

    Args:
      fs: sampling rate in Hz, a positive int (required).
      n_cochlear_filters: gammatone channels, a positive int. Default 23.
      low_freq: lowest gammatone centre frequency in Hz, > 0. Default 125.
      min_cf: centre frequency of the first modulation filter in Hz, > 0. Default 4.
      max_cf: centre frequency of the last modulation filter in Hz, > 0; default
        ``None``: 30 with ``norm=True``, else 128 (torchmetrics' rule).
      norm: clip the modulation energies to 30 dB below their peak. Default False.
      fast: the FFT-based gammatonegram (envelopes at 400 Hz) instead of the IIR
        filterbank and Hilbert envelope. Default False.
      per_example: ``False`` (default): the mean over examples; ``True``: every
        example's value, concatenated along the first axis (the functional output).
      nan_strategy: NaN / inf in ``preds``: ``"error"`` (default; at once on CPU,
        else raised by ``finalize``), ``"warn"`` / ``"ignore"`` (the example is
        left out) or ``"disable"`` (NaN propagates).

    Inputs:
      ``update(state, preds)``: a real floating tensor ``(..., time)`` with at
      least ``ceil(0.256 fs)`` samples (one 256 ms frame).

    Returns:
      A float64 0-d tensor (or the per-example values).

    Example::

        >>> g = torch.Generator().manual_seed(1)
        >>> m = fmetrics.speech_reverberation_modulation_energy_ratio(fs=8000, per_example=True)
        >>> m(torch.randn(2, 4000, generator=g, dtype=torch.float64))  # torchmetrics' code: the same to 1e-9
        tensor([0.4195, 0.4002], dtype=torch.float64)
    """
    name = "speech_reverberation_modulation_energy_ratio"
    if isinstance(fs, bool) or not isinstance(fs, int) or fs <= 0:
        raise validation.fail(name, "fs", "a positive int (Hz)", repr(fs))
    if isinstance(n_cochlear_filters, bool) or not isinstance(n_cochlear_filters, int) or n_cochlear_filters <= 0:
        raise validation.fail(name, "n_cochlear_filters", "a positive int", repr(n_cochlear_filters))
    for arg, v in (("low_freq", low_freq), ("min_cf", min_cf), ("max_cf", max_cf)):
        if (v is not None or arg != "max_cf") and (isinstance(v, bool) or not isinstance(v, (int, float))
                                                   or not 0 < v < math.inf):
            raise validation.fail(name, arg, "a finite number > 0 (Hz)" + (" or None" if arg == "max_cf" else ""),
                                  repr(v))
    check_bool(name, "norm", norm)
    check_bool(name, "fast", fast)
    check_bool(name, "per_example", per_example)
    check_nan_strategy(name, nan_strategy)
    top = float(max_cf if max_cf is not None else (30 if norm else 128))
    config = (fs, n_cochlear_filters, float(low_freq), float(min_cf), top, fast)
    min_len = math.ceil(0.256 * fs)
    built: dict = {}

    def constants_on(device):
        if device not in built:
            c = constants(*config, device=device)
            if torch.compiler.is_compiling():
                return c
            built[device] = c
        return built[device]

    def values(preds):
        if not isinstance(preds, torch.Tensor):
            raise validation.fail(name, "preds", "a tensor", type(preds).__name__)
        if not preds.is_floating_point():
            raise validation.fail(name, "preds", "a real floating-point tensor (scale integer audio to "
                                  "[-1, 1] first)", f"dtype {preds.dtype}")
        if preds.dim() < 1 or preds.shape[-1] < min_len:
            raise validation.fail(name, "preds", f"signals (..., time) of at least {min_len} samples (one 256 ms "
                                  f"frame at fs={fs})", f"shape {tuple(preds.shape)}")
        rows = preds.reshape(-1, preds.shape[-1]).to(F64)
        if rows.shape[0] == 0:  # no example (MKL's FFT rejects an empty batch)
            return rows.new_zeros(preds.shape[:-1])
        v = srmr_values(rows, fs, constants_on(preds.device), norm, fast)
        return v.reshape(preds.shape[:-1])

    return per_example_mean(name, values, per_example, ("srmr", *config, norm), nan_strategy,
                            higher_is_better=True, is_differentiable=False, bounds=(0.0, None))
