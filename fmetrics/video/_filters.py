"""Padding and separable filtering of frame batches ``(n, H, W)`` for the VMAF features.

Filters are shifted multiply-adds over the last two axes (Python-float taps, no ``conv2d``): exact in the
input's dtype, traceable, and no constant tensor to move to the device. The taps are float32 numbers, as
in libvmaf's filter tables and vmaf-torch's buffers.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch


def gaussian_taps(size: int, sigma: float) -> tuple:
    """``exp(-x^2 / 2 sigma^2)`` for ``x = -(size // 2) .. size // 2``, normalized, in float32 (as vmaf-torch)."""
    x = torch.arange(-(size // 2), size // 2 + 1, dtype=torch.float32)
    g = torch.exp(-(x ** 2 / (2.0 * sigma ** 2)))
    return tuple((g / g.sum()).tolist())


def f32(value: float) -> float:
    """``value`` rounded to float32 (a constant vmaf-torch holds as a float32 buffer)."""
    return float(torch.tensor(value, dtype=torch.float32))


def pad_axis(x: torch.Tensor, axis: int, before: int, after: int, after_mode: str) -> torch.Tensor:
    """Pads ``axis`` by ``before`` mirrored entries without the edge (``dcb|abc``) and ``after`` entries,
    mirrored with the edge (``"symmetric"``: ``def|fed``, libvmaf's rule) or without (``"reflect"``)."""
    n = x.shape[axis]
    parts = []
    if before:
        parts.append(x.narrow(axis, 1, before).flip(axis))
    parts.append(x)
    if after:
        if after_mode == "symmetric":
            parts.append(x.narrow(axis, n - after, after).flip(axis))
        else:
            parts.append(x.narrow(axis, n - 1 - after, after).flip(axis))
    return torch.cat(parts, dim=axis) if len(parts) > 1 else x


def pad2d(x: torch.Tensor, left: int, right: int, top: int, bottom: int, after_mode: str) -> torch.Tensor:
    x = pad_axis(x, x.dim() - 1, left, right, after_mode)
    return pad_axis(x, x.dim() - 2, top, bottom, after_mode)


def filter_axis(x: torch.Tensor, taps: Sequence[float], axis: int, stride: int = 1) -> torch.Tensor:
    """``out[i] = sum_j taps[j] x[stride i + j]`` along ``axis`` ("valid": no padding)."""
    n = (x.shape[axis] - len(taps)) // stride + 1
    index = [slice(None)] * x.dim()
    out = None
    for j, tap in enumerate(taps):
        index[axis] = slice(j, j + stride * (n - 1) + 1, stride)
        term = x[tuple(index)] * tap
        out = term if out is None else out + term
    return out


def blur(x: torch.Tensor, taps: Sequence[float], stride: int = 1) -> torch.Tensor:
    """Separable filter of the last two axes, rows first then columns (valid borders), with ``stride``."""
    return filter_axis(filter_axis(x, taps, x.dim() - 1, stride), taps, x.dim() - 2, stride)


def border(size: int) -> tuple:
    """libvmaf's ADM border: the first and one-past-last kept index of ``size`` coefficients (10% cut,
    ``floor(0.1 size - 0.5)``; -1 for sizes below 5, as vmaf-torch)."""
    lo = math.floor(size * 0.1 - 0.5)
    return lo, size - lo
