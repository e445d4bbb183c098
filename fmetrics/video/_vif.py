"""VIF at four scales (Sheikh & Bovik 2006), libvmaf's pixel-domain form as vmaf-torch computes it.

Per scale ``s`` (Gaussian window of ``N = 2^(4-s) + 1`` taps, ``sigma = N / 5``; scales 1-3 are the
previous one blurred and decimated by 2), with local moments ``mu``, ``sigma^2``, ``sigma_12`` of the
reference ``r`` and the distorted ``d`` (both minus 128, reflect-padded):
``g = sigma_12 / sigma_r^2``, ``sv^2 = sigma_d^2 - g sigma_12``,
``num = sum log2(1 + g^2 sigma_r^2 / (sv^2 + 2))``, ``den = sum log2(1 + sigma_r^2 / 2)``,
where pixels with ``sigma_r^2 < 2`` count ``1 - sigma_d^2 / (255^2 / 4)`` and ``1``.
The feature of a scale is ``num / den``.
"""
from __future__ import annotations

import torch

from fmetrics.video._filters import blur, gaussian_taps, pad2d

SIGMA_NSQ = 2.0
SIGMA_MAX_INV = 4.0 / (255.0 * 255.0)
WINDOWS = tuple(gaussian_taps(2 ** (4 - s) + 1, (2 ** (4 - s) + 1) / 5) for s in range(4))


def _scale_terms(ref: torch.Tensor, dist: torch.Tensor, taps, gain_limit: float):
    k = (len(taps) - 1) // 2
    z = pad2d(torch.stack((ref, dist, ref * ref, dist * dist, ref * dist)), k, k, k, k, "reflect")
    m = blur(z, taps)
    mu1, mu2 = m[0], m[1]
    s1 = torch.relu(m[2] - mu1 * mu1)
    s2 = torch.relu(m[3] - mu2 * mu2)
    s12 = m[4] - mu1 * mu2

    g = s12 / (s1 + 1e-10)
    sv = s2 - g * s12
    flat1 = s1 < 1e-10
    g = g.masked_fill(flat1, 0)
    sv = torch.where(flat1, s2, sv)
    s1 = s1.masked_fill(flat1, 0)
    flat2 = s2 < 1e-10
    g = g.masked_fill(flat2, 0)
    sv = sv.masked_fill(flat2, 0)
    sv = torch.where(g < 0, s2, sv)
    g = torch.relu(g)
    sv = sv.masked_fill(sv <= 1e-10, 1e-10)
    g = g.clamp(max=gain_limit)

    num = torch.log2(1 + g * g * s1 / (sv + SIGMA_NSQ))
    den = torch.log2(1 + s1 / SIGMA_NSQ)
    num = num.masked_fill(s12 < 0, 0)
    low = s1 < SIGMA_NSQ
    num = torch.where(low, 1 - s2 * SIGMA_MAX_INV, num)
    den = den.masked_fill(low, 1)
    return num.sum(dim=(-1, -2)), den.sum(dim=(-1, -2))


def vif_num_den(ref: torch.Tensor, dist: torch.Tensor, gain_limit: float):
    """``(num, den)``, each ``(n, 4)``: VIF's sums per frame and scale for frames ``(n, H, W)`` in [0, 255]."""
    ref, dist = ref - 128, dist - 128
    nums, dens = [], []
    for scale, taps in enumerate(WINDOWS):
        if scale:
            k = (len(taps) - 1) // 2
            h, w = ref.shape[-2:]
            both = pad2d(torch.stack((ref, dist)), k, k - w % 2, k, k - h % 2, "reflect")
            ref, dist = blur(both, taps, stride=2).unbind(0)
        num, den = _scale_terms(ref, dist, taps, gain_limit)
        nums.append(num)
        dens.append(den)
    return torch.stack(nums, dim=-1), torch.stack(dens, dim=-1)
