"""The VMAF model's prediction from the six features, with the model's tables on the features' device."""
from __future__ import annotations

import torch

from fmetrics.video import _model

_ON_DEVICE: dict = {}


def _host_tables(dtype: torch.dtype):
    return tuple(torch.tensor(t, dtype=dtype) for t in
                 (_model.SUPPORT_VECTORS, _model.ALPHA, _model.SLOPES, _model.INTERCEPTS))


def _tables(device: torch.device, dtype: torch.dtype):
    """The support vectors, weights and feature normalization as ``dtype`` on ``device``: built once per
    (device, dtype) outside a trace (a host-to-device copy per update would synchronize a GPU)."""
    if torch.compiler.is_compiling():
        return tuple(t.to(device) for t in _host_tables(dtype))
    key = (device, dtype)
    if key not in _ON_DEVICE:
        host = _host_tables(dtype)
        if device.type == "cuda":
            host = tuple(t.pin_memory() for t in host)
        _ON_DEVICE[key] = tuple(t.to(device, non_blocking=device.type == "cuda") for t in host)
    return _ON_DEVICE[key]


def predict(x: torch.Tensor) -> torch.Tensor:
    """VMAF per row of ``x (..., 6)`` = ``(adm2, motion2, vif_scale0..3)`` (not clipped)."""
    sv, alpha, slopes, intercepts = _tables(x.device, x.dtype)
    z = x * slopes + intercepts
    k = torch.exp(-_model.GAMMA * ((z.unsqueeze(-2) - sv) ** 2).sum(dim=-1))
    s = (k * alpha).sum(dim=-1) - _model.RHO
    return (s - _model.INTERCEPT) / _model.SLOPE
