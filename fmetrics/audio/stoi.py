"""`short_time_objective_intelligibility`: STOI and extended STOI in torch, batched (pystoi's algorithm).

Per example (``target`` is the clean speech ``x``, ``preds`` the processed ``y``):

1. **Resampling to 10 kHz** (unless ``fs == 10000``) by pystoi's polyphase
   filter: the Octave-compatible Kaiser-windowed sinc (60 dB rejection),
   normalized to unit sum, applied as ``scipy.signal.resample_poly`` does
   (``y[m] = up * sum_n x[n] h[m down + half - n up]``). Here the ``up``
   polyphase components are one strided ``conv1d`` with ``up`` output
   channels (stride ``down``), interleaved: ``O(time * taps / down)``, no
   upsampled signal.
2. **Silent-frame removal**: 256-sample Hann frames (hop 128) of the target;
   frames more than 40 dB below the loudest are dropped from both signals and
   the kept frames overlap-added. Batched without boolean indexing: a stable
   sort of the keep mask puts each example's kept frames first (their order
   kept), the rest are zeroed, and the overlap-add is a sum of frame halves.
   Each example keeps ``k`` frames (a tensor; no host sync).
3. **One-third-octave bands**: the 512-point FFT of the Hann-windowed frames
   of the overlap-added signal (``k - 1`` frames per example), band energies
   over the 15 one-third-octave bands (pystoi's 15 x 257 matrix, 150 Hz
   upward; each band a contiguous bin range: float64 sums each band's slice,
   float32 takes the matrix product over the used bins), square root.
4. **Intermediate intelligibility** over every window of 30 frames (``k - 30``
   windows; the others are masked out): STOI normalizes and clips the
   estimate's band envelope (at -15 dB SDR) and averages the per-band
   correlations; extended STOI (``extended=True``) row- and column-normalizes
   both 15 x 30 windows and averages the column correlations. An example with
   fewer than 30 frames left gets pystoi's ``1e-5``.

Computed in float64 (as pystoi). See docs/audio.md for the two differences
from pystoi (no warning for too-short examples; constant bands in ESTOI).
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch

from fmetrics import validation
from fmetrics.audio._mean import NanStrategy, check_bool, per_example_mean, signal_pair
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["short_time_objective_intelligibility", "stoi_values"]

FS = 10000  # STOI's internal rate
N_FRAME = 256
HOP = 128
NFFT = 512
NUMBAND = 15
MINFREQ = 150
N = 30  # frames per intermediate-intelligibility window
BETA = -15.0  # lower SDR bound (dB)
DYN_RANGE = 40  # speech dynamic range (dB)
EPS = float(np.finfo(np.float64).eps)
TOO_SHORT = 1e-5  # pystoi's value for an example with fewer than N frames left


def _band_weights() -> torch.Tensor:
    """``(2 bins, 16)``: the band matrix over the used bins, each row twice (re^2 and im^2), a zero 16th band
    (a 16-column product runs 2x faster than 15 in MKL)."""
    lo, hi = _band_bins()
    obm = torch.from_numpy(third_octave_matrix()[:, lo:hi].T.copy())
    return torch.nn.functional.pad(obm.repeat_interleave(2, 0), (0, 1))


def _hann() -> np.ndarray:
    return np.hanning(N_FRAME + 2)[1:-1]  # MATLAB's hanning(256)


@functools.lru_cache(maxsize=None)
def resample_filter(fs: int):
    """``(up, down, taps)``: pystoi's Octave-compatible anti-aliasing filter for ``fs -> 10 kHz``,
    scaled as ``resample_poly`` uses it (unit sum, times ``up``). ``None`` when ``fs == 10000``."""
    g = math.gcd(FS, fs)
    up, down = FS // g, fs // g
    if up == down:
        return None
    cutoff = 1.0 / (2 * max(up, down))
    roll_off = cutoff / 10
    rejection_db = 60.0
    half = int(np.ceil((rejection_db - 8) / (28.714 * roll_off)))
    t = np.arange(-half, half + 1)
    ideal = 2 * up * cutoff * np.sinc(2 * cutoff * t)
    beta = 0.1102 * (rejection_db - 8.7)
    h = np.kaiser(2 * half + 1, beta) * ideal
    return up, down, h / np.sum(h) * up


@functools.lru_cache(maxsize=None)
def _polyphase(fs: int):
    """The ``up`` polyphase filters as one ``(up, 1, K)`` conv1d weight, its left padding and output length rule.

    Output ``m = r + up q`` is ``sum_j g[ph_r + j up] x[a_r + q down - j]`` with
    ``a_r, ph_r = divmod(r down + half, up)``: channel ``r`` of a stride-``down``
    cross-correlation over ``x`` padded by ``pad`` on the left.
    """
    up, down, g = resample_filter(fs)
    half = (len(g) - 1) // 2
    a, ph = np.divmod(np.arange(up) * down + half, up)
    count = (len(g) - 1 - ph) // up + 1  # taps of phase r: g[ph_r], g[ph_r + up], ...
    pad = max(0, int((count - 1 - a).max()))
    k = int((a + pad).max()) + 1
    w = np.zeros((up, 1, k))
    r = np.repeat(np.arange(up), count)
    j = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    w[r, 0, (a + pad)[r] - j] = g[ph[r] + j * up]
    return up, down, pad, torch.from_numpy(w)


def resample(x: torch.Tensor, fs: int, plan=None) -> torch.Tensor:
    """``resample_poly(x, 10000, fs, window=pystoi's)`` along the last axis of a ``(B, time)`` tensor.

    float32 (and half): one strided ``conv1d`` with ``up`` output channels
    (oneDNN / cuDNN). float64 (a float64 ``conv1d`` takes CPU's slow im2col
    path): one matrix product over blocks of ``L`` outputs per channel. With
    the ``down`` phases of ``x`` as rows, ``X[i, p] = xp[i down + p]``, output
    ``out_r[q] = sum_{i < kk, p} X[q + i, p] w[r, i down + p]``; a block of
    ``L`` consecutive ``q`` reads ``L + kk - 1`` rows, so it is one row of
    ``(L + kk - 1) down`` samples times a block-Toeplitz ``((L + kk - 1) down,
    L up)`` matrix (a dense GEMM; 5x faster than FFT convolution at 16 kHz).
    """
    if plan is None:  # (computed outside any trace by the factory: numpy filter design)
        plan = resample_plan(fs)
    if plan is None:
        return x
    up, down, pad, w = plan
    b, n = x.shape
    n_out = -(-n * up // down)
    q = -(-n_out // up)  # outputs per channel
    k = w.shape[-1]
    kk = -(-k // down)  # taps per phase
    weight = w.to(dtype=x.dtype, device=x.device)
    if x.dtype != torch.float64:
        right = max(0, (q + kk) * down - pad - n)
        xp = torch.nn.functional.pad(x.unsqueeze(1), (pad, right))
        out = torch.nn.functional.conv1d(xp, weight, stride=down)[..., :q]  # (B, up, q)
        return out.transpose(1, 2).reshape(b, q * up)[:, :n_out]
    block = max(1, kk // 2)  # outputs per channel in one block (measured at 16 kHz: 8 beats 4 and 16)
    blocks = -(-q // block)
    rows = blocks * block + kk - 1
    xp = torch.nn.functional.pad(x, (pad, max(0, rows * down - pad - n)))[:, :rows * down]
    xb = xp.unfold(-1, (block + kk - 1) * down, block * down)  # (B, blocks, (L + kk - 1) down)
    taps = torch.nn.functional.pad(weight[:, 0], (0, kk * down - k)).reshape(up, kk, down).permute(1, 2, 0)
    # toeplitz[j, p, l, r] = taps[j - l, p, r] (zero outside 0 <= j - l < kk)
    padded = torch.nn.functional.pad(taps, (0, 0, 0, 0, block - 1, block - 1))  # (kk + 2L - 2, down, up)
    toeplitz = padded.unfold(0, block + kk - 1, 1).flip(0).permute(3, 1, 0, 2)  # (L + kk - 1, down, L, up)
    out = xb @ toeplitz.reshape((block + kk - 1) * down, block * up)  # (B, blocks, L up): outputs in order
    return out.reshape(b, blocks * block * up)[:, :n_out]


def resample_plan(fs: int):
    """``None`` (``fs == 10000``) or ``(up, down, pad, weight)`` for `resample`."""
    return None if resample_filter(fs) is None else _polyphase(fs)


@functools.lru_cache(maxsize=None)
def third_octave_matrix() -> np.ndarray:
    """pystoi's ``thirdoct(10000, 512, 15, 150)`` band matrix, ``(15, 257)``."""
    f = np.linspace(0, FS, NFFT + 1)[: NFFT // 2 + 1]
    k = np.arange(NUMBAND, dtype=float)
    low = MINFREQ * np.power(2.0, (2 * k - 1) / 6)
    high = MINFREQ * np.power(2.0, (2 * k + 1) / 6)
    obm = np.zeros((NUMBAND, len(f)))
    for i in range(NUMBAND):
        lo = np.argmin(np.square(f - low[i]))
        hi = np.argmin(np.square(f - high[i]))
        obm[i, lo:hi] = 1
    return obm


@functools.lru_cache(maxsize=None)
def _band_bins():
    """The FFT bins any band uses: ``[lo, hi)``."""
    used = np.flatnonzero(third_octave_matrix().any(0))
    return int(used[0]), int(used[-1]) + 1


def build_constants(device: torch.device, fs: int, plan=None):
    """``(hann, band weights, resample plan)`` float64, computed by torch ops on ``device`` (off the CPU: a
    pageable host-to-device copy would synchronize a GPU); equal to the host tables to ~1e-16."""
    hann = torch.hann_window(N_FRAME + 2, periodic=False, dtype=torch.float64, device=device)[1:-1]
    weights = torch.zeros(2 * (BAND_HI - BAND_LO), NUMBAND + 1, dtype=torch.float64, device=device)
    for band, (lo, hi) in enumerate(BAND_EDGES):
        weights[2 * (lo - BAND_LO):2 * (hi - BAND_LO), band] = 1.0
    if plan is None:  # eager callers; the factory passes its host plan (no numpy under a trace)
        plan = resample_plan(fs)
    if plan is not None:
        up, down, pad, w_host = plan
        cutoff = 1.0 / (2 * max(up, down))
        half = math.ceil((60.0 - 8) / (28.714 * cutoff / 10))
        t = torch.arange(-half, half + 1, dtype=torch.float64, device=device)
        h = torch.kaiser_window(2 * half + 1, periodic=False, beta=0.1102 * (60.0 - 8.7), dtype=torch.float64,
                                device=device) * (2 * up * cutoff * torch.sinc(2 * cutoff * t))
        h = h / h.sum() * up
        w = torch.zeros(w_host.shape, dtype=torch.float64, device=device)
        for r in range(up):
            a, ph = divmod(r * down + half, up)
            taps = h[ph::up]
            w[r, 0, a + pad - taps.shape[0] + 1:a + pad + 1] = taps.flip(0)
        plan = (up, down, pad, w)
    return hann, weights, plan


# constants (float64, CPU) built at import, so traced code only reads them
BAND_LO, BAND_HI = _band_bins()
BAND_EDGES = [(int(np.flatnonzero(row)[0]), int(np.flatnonzero(row)[-1]) + 1) for row in third_octave_matrix()]
BAND_WEIGHTS = _band_weights()
HANN = torch.from_numpy(_hann().copy())


def frame_count(n: int) -> int:
    """pystoi's frame count ``len(range(0, n - 256, 128))`` of an ``n``-sample signal."""
    return max(0, -(-(n - N_FRAME) // HOP))


def _band_envelopes(z: torch.Tensor, hann: torch.Tensor = None, band_weights: torch.Tensor = None):
    """Silent-frame removal and one-third-octave envelopes of ``(B, 2, time)`` (target, preds) at 10 kHz.

    Returns ``(tob, kept)``: ``(B, 2, 15, F - 1)`` band envelopes of the
    overlap-added kept frames (frames ``>= kept - 1`` are padding) and the
    number of kept frames per example, ``(B,)``.
    """
    b, _, n = z.shape
    frames = frame_count(n)
    w = (HANN if hann is None else hann).to(dtype=z.dtype, device=z.device)
    raw = z.unfold(-1, N_FRAME, HOP)[:, :, :frames]  # (B, 2, F, 256) view
    energy = 20 * torch.log10(torch.linalg.vector_norm(raw[:, 0] * w, dim=-1) + EPS)  # the target's frames
    keep = (energy.amax(-1, keepdim=True) - DYN_RANGE - energy) < 0
    kept = keep.sum(-1)
    # kept frames first, in their order (a stable sort of the drop flag), as rows of the flattened frames
    order = torch.argsort(torch.logical_not(keep).to(torch.uint8), dim=-1, stable=True)
    rows = (torch.arange(2 * b, device=z.device).reshape(b, 2, 1) * frames + order.unsqueeze(1)).reshape(-1)
    c = raw.reshape(b * 2 * frames, N_FRAME).index_select(0, rows).reshape(b, 2, frames, N_FRAME)
    live = torch.arange(frames, device=z.device) < kept.unsqueeze(-1)  # the others are zeroed
    c = c * (live[:, None, :, None].to(c.dtype) * w)
    # overlap-add by halves: half j = first half of kept frame j + second half of kept frame j - 1;
    # STFT frame j (of k - 1) = halves j and j + 1 (a 256-sample view of the signal), windowed, zero-padded to 512
    halves = torch.cat([c[..., :1, :HOP], c[..., 1:, :HOP] + c[..., :-1, HOP:]], -2)
    stft_frames = torch.nn.functional.pad(halves.flatten(-2).unfold(-1, N_FRAME, HOP) * w, (0, NFFT - N_FRAME))
    spec = torch.view_as_real(torch.fft.rfft(stft_frames, dim=-1)[..., BAND_LO:BAND_HI]).flatten(-2)
    power = spec * spec  # re^2, im^2 interleaved
    if power.dtype == torch.float64:  # a band is one contiguous slice: 15 slice sums, 1.5x faster than the product
        tob = torch.stack([power[..., 2 * (lo - BAND_LO):2 * (hi - BAND_LO)].sum(-1) for lo, hi in BAND_EDGES], -1)
    else:  # float32 slice sums take a slow path (4x slower than the product)
        weights = (BAND_WEIGHTS if band_weights is None else band_weights).to(dtype=z.dtype, device=z.device)
        tob = torch.matmul(power, weights)[..., :NUMBAND]
    tob = tob.sqrt()  # (B, 2, F - 1, 15)
    return tob.transpose(-1, -2), kept  # (B, 2, 15, F - 1)


def _window_sum(v: torch.Tensor) -> torch.Tensor:
    """Sums over every window of ``N`` consecutive frames of ``(..., frames)``: ``(..., frames - N + 1)``."""
    c = torch.nn.functional.pad(v.double().cumsum(-1), (1, 0))  # float64: no cancellation to speak of
    return (c[..., N:] - c[..., :-N]).to(v.dtype)


def _masked_mean(d: torch.Tensor, windows: torch.Tensor) -> torch.Tensor:
    """Mean over the valid windows (``d``: ``(B, S)`` per-window values; ``windows``: ``(B,)`` counts)."""
    s = d.shape[-1]
    valid = torch.arange(s, device=d.device) < windows.unsqueeze(-1)
    total = torch.where(valid, d, 0.0).sum(-1)
    return torch.where(windows > 0, total / windows.clamp(min=1), TOO_SHORT)


def _stoi(tob: torch.Tensor) -> torch.Tensor:
    """Per-window STOI of ``(B, 2, 15, F)`` envelopes: ``(B, S)``, the mean over bands of the clipped correlations.

    Per band and window: ``y' = min(y |x| / (|y| + eps), x (1 + 10^(-beta/20)))``,
    then the correlation of ``y'`` and ``x`` (centered, divided by norm + eps).
    """
    x, y = tob[:, 0], tob[:, 1]
    scale = (_window_sum(x.square()).sqrt() / (_window_sum(y.square()).sqrt() + EPS)).unsqueeze(-1)
    xw = x.unfold(-1, N, 1)  # (B, 15, S, 30) views
    yw = y.unfold(-1, N, 1)
    clip = 1 + 10 ** (-BETA / 20)
    yp = torch.minimum(yw * scale, xw * clip)
    yp = yp - yp.mean(-1, keepdim=True)
    xc = xw - (_window_sum(x) / N).unsqueeze(-1)
    num = (yp * xc).sum(-1)
    ny = yp.square().sum(-1).sqrt() + EPS
    nx = xc.square().sum(-1).sqrt() + EPS
    return (num / (ny * nx)).mean(1)


def _normalize(x: torch.Tensor, dim: int) -> torch.Tensor:
    x = x - x.mean(dim, keepdim=True)
    norm = x.square().sum(dim, keepdim=True).sqrt()
    return x * torch.where(norm > 0, 1 / norm, 0.0)


def _estoi(tob: torch.Tensor) -> torch.Tensor:
    """Per-window extended STOI of ``(B, 2, 15, F)`` envelopes: ``(B, S)``.

    Each 15 x 30 window is centered and normalized per band (over frames),
    then per frame (over bands); the value is the mean over frames of the
    column correlations. A constant row or column normalizes to zero.
    """
    w = tob.unfold(-1, N, 1)  # (B, 2, 15, S, 30)
    wn = _normalize(_normalize(w, -1), 2)
    return (wn[:, 0] * wn[:, 1]).sum(1).mean(-1)


def stoi_values(preds: torch.Tensor, target: torch.Tensor, fs: int, extended: bool = False,
                plan=None) -> torch.Tensor:
    """Per-example STOI (or extended STOI) of ``(..., time)`` signals sampled at ``fs``, float64 values.

    Computed in float64 for float64 inputs (pystoi's precision), else in float32.
    """
    shape = preds.shape[:-1]
    dtype = torch.float64 if preds.dtype == torch.float64 else torch.float32
    x = target.detach().reshape(-1, target.shape[-1]).to(dtype)
    y = preds.detach().reshape(-1, preds.shape[-1]).to(dtype)
    if x.shape[0] == 0:
        return torch.zeros(shape, dtype=torch.float64, device=preds.device)
    if x.device.type == "cpu":  # the import-time tables; ``plan`` from the factory (no numpy under a trace)
        hann, band_weights, device_plan = HANN, BAND_WEIGHTS, plan if plan is not None else resample_plan(fs)
    else:
        hann, band_weights, device_plan = build_constants(x.device, fs, plan)
    z = resample(torch.stack([x, y], 1).flatten(0, 1), fs, device_plan)
    z = z.reshape(x.shape[0], 2, z.shape[-1])
    if frame_count(z.shape[-1]) - 1 < N:  # static: fewer than 30 STFT frames even before removal
        return torch.full(shape, TOO_SHORT, dtype=torch.float64, device=preds.device)
    tob, kept = _band_envelopes(z, hann, band_weights)
    d = _estoi(tob) if extended else _stoi(tob)
    return _masked_mean(d.double(), kept - N).reshape(shape)


@factory
def short_time_objective_intelligibility(*, fs: int, extended: bool = False, per_example: bool = False,
                                         nan_strategy: NanStrategy = "error") -> Metric:
    """Short-time objective intelligibility (STOI, Taal et al. 2011) or extended STOI (Jensen & Taal 2016).

    The mean over 30-frame windows (384 ms) of the correlation between the
    clean and processed one-third-octave band envelopes (after resampling to
    10 kHz and removing the target's silent frames); ``d = mean_{j,m}
    corr(x_{j,m}, clip(y_{j,m}))`` for STOI. Values match pystoi (and so
    torchmetrics, which wraps it) to ~1e-10; computed in torch, batched,
    without host syncs.

    Args:
      fs: sampling rate of the signals in Hz, a positive int (e.g. 8000,
        16000; 10000 needs no resampling).
      extended: ``False`` (default): STOI; ``True``: extended STOI (ESTOI).
      per_example: ``False`` (default): the mean over all examples seen;
        ``True``: every example's value, concatenated along the first axis
        (torchmetrics' functional output).
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised at once on CPU in eager mode, quoting the values, the state
        untouched; elsewhere counted and raised by ``finalize``), ``"warn"`` /
        ``"ignore"`` (the example is left out, with / without a warning from
        ``finalize``) or ``"disable"`` (no check: NaN propagates).

    Inputs:
      ``update(state, preds, target)``: real floating tensors of one shape
      ``(..., time)``: the processed and the clean speech. An example with
      fewer than 30 frames after silence removal scores ``1e-5`` (pystoi's value).

    Returns:
      A float64 0-d tensor (or the per-example values).

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.randn(2, 8000, generator=g)
        >>> preds = target + torch.randn(2, 8000, generator=g)
        >>> fmetrics.short_time_objective_intelligibility(fs=8000, per_example=True)(preds, target)
        tensor([0.5212, 0.5202], dtype=torch.float64)
        >>> fmetrics.short_time_objective_intelligibility(fs=8000)(preds, target)  # pystoi: 0.52066
        tensor(0.5207, dtype=torch.float64)
    """
    name = "short_time_objective_intelligibility"
    if isinstance(fs, bool) or not isinstance(fs, int) or fs <= 0:
        raise validation.fail(name, "fs", "a positive int (Hz)", repr(fs))
    check_bool(name, "extended", extended)
    plan = resample_plan(fs)

    def values(preds, target):
        signal_pair(name, preds, target)
        return stoi_values(preds, target, fs, extended, plan)

    return per_example_mean(name, values, per_example, ("stoi", fs, extended), nan_strategy,
                            higher_is_better=True, is_differentiable=False, bounds=(None, 1.0))
