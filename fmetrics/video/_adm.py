"""ADM, the detail-loss measure (Li et al. 2011), libvmaf's form as vmaf-torch computes it.

Four scales of a db2 wavelet transform of the reference ``O`` and the distorted ``T`` (libvmaf's
``dcb|abc|cba`` borders). Per subband (horizontal, vertical, diagonal): the restored detail
``R = clip(T / O, 0, 1) O`` (enhanced up to ``T`` within 1 degree of ``O``'s direction, gain limit 100,
or 1 for NEG), the additive impairment ``A = T - R``; with the contrast sensitivity weights ``c_s`` and the
masking threshold ``thr = (1/30) [1 1 1; 1 2 1; 1 1 1] * (sum of |c A| over subbands)``:
``num_s = sum_bands ||max(|c R| - thr, 0)||_3 + 3 (area / 32)^(1/3)``,
``den_s = sum_bands ||c O||_3 + 3 (area / 32)^(1/3)``, over the coefficients inside a 10% border.
``adm2 = sum_s num_s / sum_s den_s`` (1 when the denominator is negligible); ``adm_scale_s = num_s / den_s``.
"""
from __future__ import annotations

import math

import torch

from fmetrics.video._filters import border, f32, filter_axis, pad2d

RFACTORS = ((0.017382, 0.017382, 0.005891), (0.031985, 0.031985, 0.014299),
            (0.043373, 0.043373, 0.024397), (0.045673, 0.045673, 0.031313))
LO = tuple(f32(v) for v in (0.482962913144690, 0.836516303737469, 0.224143868041857, -0.129409522550921))
HI = tuple(f32(v) for v in (-0.129409522550921, -0.224143868041857, 0.836516303737469, -0.482962913144690))
CM_EDGE, CM_CENTER = f32(1 / 30), f32(1 / 15)
COS_1DEG_SQ = math.cos(math.pi / 180.0) ** 2
EPS = 1e-30


def _pass(x: torch.Tensor, taps, axis: int) -> torch.Tensor:
    n = x.shape[axis]
    pads = (1, 1 + n % 2)
    x = pad2d(x, *pads, 0, 0, "symmetric") if axis == x.dim() - 1 else pad2d(x, 0, 0, *pads, "symmetric")
    return filter_axis(x, taps, axis, stride=2)


def dwt2(x: torch.Tensor):
    """One level of the db2 transform: ``(a, h, v, d)``, each ``ceil(H/2) x ceil(W/2)``."""
    rows, cols = x.dim() - 2, x.dim() - 1
    lo, hi = _pass(x, LO, rows), _pass(x, HI, rows)
    return _pass(lo, LO, cols), _pass(hi, LO, cols), _pass(lo, HI, cols), _pass(hi, HI, cols)


def _decouple(o, t, gain_limit: float, angle_flag: torch.Tensor):
    r = (t / (o + EPS)).clamp(0.0, 1.0) * o
    r = torch.where(angle_flag & (r > 0), torch.minimum(r * gain_limit, t), r)
    r = torch.where(angle_flag & (r < 0), torch.maximum(r * gain_limit, t), r)
    return r, t - r


def _masking(x: torch.Tensor) -> torch.Tensor:
    """``[1 1 1; 1 2 1; 1 1 1] / 30`` filter of ``x`` (libvmaf's borders): the contrast masking threshold."""
    p = pad2d(x, 1, 1, 1, 1, "symmetric")
    h, w = x.shape[-2:]
    out = p[..., 1:h + 1, 1:w + 1] * CM_CENTER
    for i in range(3):
        for j in range(3):
            if (i, j) != (1, 1):
                out = out + p[..., i:i + h, j:j + w] * CM_EDGE
    return out


def _norm3(x: torch.Tensor) -> torch.Tensor:
    return x.abs().pow(3).sum(dim=(-1, -2)).pow(1.0 / 3.0)


def adm_num_den(ref: torch.Tensor, dist: torch.Tensor, gain_limit: float):
    """``(num, den)``, each ``(n, 4)``: ADM's sums per frame and scale for frames ``(n, H, W)``."""
    nums, dens = [], []
    o_a, t_a = ref, dist
    for scale in range(4):
        both = dwt2(torch.stack((o_a, t_a)))
        o_a, t_a = both[0].unbind(0)
        o_bands = [b[0] for b in both[1:]]
        t_bands = [b[1] for b in both[1:]]
        height, width = o_a.shape[-2:]
        left, right = border(width)
        top, bottom = border(height)
        inner = (..., slice(max(top, 0), bottom), slice(max(left, 0), right))
        constant = 3 * ((bottom - top) * (right - left) / 32.0) ** (1.0 / 3.0)

        (oh, ov, od), (th, tv, td) = o_bands, t_bands
        ot_dp = oh * th + ov * tv
        angle_flag = (ot_dp >= 0) & (ot_dp * ot_dp >= COS_1DEG_SQ * (oh * oh + ov * ov) * (th * th + tv * tv))
        rfactor = RFACTORS[scale]
        thr = None
        restored = []
        for o, t, c in zip(o_bands, t_bands, rfactor):
            r, a = _decouple(o, t, gain_limit, angle_flag)
            restored.append(r)
            m = _masking((c * a).abs())
            thr = m if thr is None else thr + m
        thr = thr[inner]
        num = sum(_norm3(torch.relu((r[inner] * c).abs() - thr)) for r, c in zip(restored, rfactor))
        den = sum(_norm3(c * o[inner]) for o, c in zip(o_bands, rfactor))
        nums.append(num + constant)
        dens.append(den + constant)
    return torch.stack(nums, dim=-1), torch.stack(dens, dim=-1)


def adm2(num: torch.Tensor, den: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """The ADM score ``sum_s num_s / sum_s den_s`` per frame; 1 where the denominator is below libvmaf's limit."""
    limit = 1e-10 * (width * height) / (1920 * 1080)
    n, d = num.sum(dim=-1), den.sum(dim=-1)
    n = n.masked_fill(n < limit, 0.0)
    d = d.masked_fill(d < limit, 0.0)
    return (n / d).masked_fill(d == 0, 1.0)
