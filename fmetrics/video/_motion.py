"""VMAF's motion features of the reference video (libvmaf ``motion.c``, as vmaf-torch computes them).

Each frame is blurred by a 5-tap Gaussian (sigma 1, libvmaf's borders);
``motion_i = mean |b_i - b_(i-1)|`` (0 for the first frame) and
``motion2_i = min(motion_i, motion_(i+1))`` (0 for the first frame, ``motion_i`` for the last).
"""
from __future__ import annotations

import torch

from fmetrics.video._filters import blur, gaussian_taps, pad2d

TAPS = gaussian_taps(5, 1.0)


def motion(ref: torch.Tensor):
    """``(motion, motion2)``, each ``(N, F)``, for reference videos ``(N, F, H, W)``."""
    b = blur(pad2d(ref, 2, 2, 2, 2, "symmetric"), TAPS)
    sad = (b[:, 1:] - b[:, :-1]).abs().mean(dim=(-1, -2))  # (N, F - 1): frame i + 1 against frame i
    zero = sad.new_zeros(sad.shape[0], 1)
    m1 = torch.cat((zero, sad), dim=1)
    m2 = torch.cat((zero, torch.minimum(sad[:, :-1], sad[:, 1:]), sad[:, -1:]), dim=1)
    return m1, m2
