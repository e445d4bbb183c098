"""VMAF: Video Multi-Method Assessment Fusion (Netflix; Li et al. 2016), torchmetrics' functional name.

Per frame, six elementary features of the reference (``target``) and distorted (``preds``) luma:
ADM (`fmetrics.video._adm`), VIF at four scales (`fmetrics.video._vif`) and the reference's motion
(`fmetrics.video._motion`), fused by Netflix's ``vmaf_v0.6.1`` support-vector model (`fmetrics.video._svm`).
Features are computed for all frames of a batch of videos at once, in float64.
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.image import _common as c
from fmetrics.image import _finite
from fmetrics.image._finite import NanStrategy
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, cat_chunks, merge_fields
from fmetrics.video._adm import adm2, adm_num_den
from fmetrics.video._motion import motion
from fmetrics.video._svm import predict
from fmetrics.video._vif import vif_num_den

#: the output keys of ``features=True``, in torchmetrics' order (columns of libvmaf's ``--csv``)
KEYS = ("integer_motion2", "integer_motion", "integer_adm2", "integer_adm_scale0", "integer_adm_scale1",
        "integer_adm_scale2", "integer_adm_scale3", "integer_vif_scale0", "integer_vif_scale1",
        "integer_vif_scale2", "integer_vif_scale3", "vmaf")
MIN_SIDE = 17  # ADM's fourth scale (ceil(side / 16) coefficients) needs 2 for its mirrored border
LUMA = (0.299, 0.587, 0.114)


class VMAFFrames(NamedTuple):
    frames: tuple            # chunks (n, F, 12) float64: per video and frame, the columns of `KEYS`
    valid: tuple             # chunks (n,) bool: False for the videos left out (nan_strategy)
    nonfinite: torch.Tensor  # int64 (): non-finite input entries


class VMAFMean(NamedTuple):
    total: torch.Tensor      # float64 (12,): sums over frames of the columns of `KEYS`
    count: torch.Tensor      # int64 (): frames
    nonfinite: torch.Tensor  # int64 ()


def luma(video: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``(N, F, H, W)`` luma in [0, 255] of RGB (BT.601 weights) or one-channel videos in [0, 1]."""
    x = video.to(dtype)
    if x.shape[1] == 3:
        x = LUMA[0] * x[:, 0] + LUMA[1] * x[:, 1] + LUMA[2] * x[:, 2]
    else:
        x = x[:, 0]
    return x * 255


def frame_features(ref: torch.Tensor, dist: torch.Tensor, gain_limit: float) -> torch.Tensor:
    """``(n, 9)`` per frame ``(n, H, W)``: ``adm2, adm_scale0..3, vif_scale0..3``."""
    a_num, a_den = adm_num_den(ref, dist, gain_limit)
    v_num, v_den = vif_num_den(ref, dist, gain_limit)
    h, w = ref.shape[-2:]
    return torch.cat((adm2(a_num, a_den, h, w).unsqueeze(-1), a_num / a_den, v_num / v_den), dim=-1)


def table(ref: torch.Tensor, dist: torch.Tensor, gain_limit: float) -> torch.Tensor:
    """``(N, F, 12)``: the columns of `KEYS` for reference and distorted luma videos ``(N, F, H, W)``."""
    n, f, h, w = ref.shape
    per_frame = c.chunked(lambda r, d: frame_features(r, d, gain_limit), None,
                          ref.reshape(n * f, h, w), dist.reshape(n * f, h, w)).reshape(n, f, 9)
    m1, m2 = motion(ref)
    adm, vif = per_frame[..., :1], per_frame[..., 5:]
    score = predict(torch.cat((adm, m2.unsqueeze(-1), vif), dim=-1))
    return torch.cat((m2.unsqueeze(-1), m1.unsqueeze(-1), per_frame, score.unsqueeze(-1)), dim=-1)


def _check_videos(name: str, preds, target) -> None:
    for arg, x in (("preds", preds), ("target", target)):
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise validation.fail(name, arg, "a float tensor of videos in [0, 1]",
                                  f"dtype {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__)
    if preds.dim() != 5 or preds.shape[1] not in (1, 3):
        raise validation.fail(name, "preds", "videos of shape (N, C, F, H, W) with C = 3 (RGB) or 1 (luma)",
                              f"shape {tuple(preds.shape)}")
    if target.shape != preds.shape:
        raise validation.fail(name, "target", f"the shape of preds {tuple(preds.shape)}", tuple(target.shape))
    f, h, w = preds.shape[2:]
    if f < 1 or h < MIN_SIDE or w < MIN_SIDE:
        raise validation.fail(name, "preds", f"at least one frame of at least {MIN_SIDE}x{MIN_SIDE} pixels "
                              "(ADM's fourth scale is 1/16 of the frame)", f"shape {tuple(preds.shape)}")


@factory
def video_multi_method_assessment_fusion(
    *,
    features: bool = False,
    reduction: Literal["none", "mean"] = "none",
    clip_score: bool = False,
    neg: bool = False,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """VMAF per frame: Netflix's ``vmaf_v0.6.1`` model over ADM, VIF (4 scales) and motion features.

    ``VMAF = (sum_i alpha_i exp(-gamma |s(x) - sv_i|^2) - rho - b) / a`` with
    ``x = (adm2, motion2, vif_scale0, ..., vif_scale3)`` of a frame, ``s`` the model's feature scaling
    and ``sv_i`` its 211 support vectors. The luma is ``255 (0.299 R + 0.587 G + 0.114 B)``; ``target`` is
    the reference (its motion is used), ``preds`` the distorted video. Same features and model as
    ``vmaf-torch`` (what torchmetrics' VMAF wraps); computed in float64 (docs/video.md).

    Args:
      features: ``False`` (default): the VMAF scores; ``True``: a dict of the elementary features and
        ``"vmaf"`` (torchmetrics' keys: ``integer_motion2``, ``integer_motion``, ``integer_adm2``,
        ``integer_adm_scale0..3``, ``integer_vif_scale0..3``, ``vmaf``).
      reduction: ``"none"`` (default, torchmetrics): one value per video and frame, ``(N, F)``, videos
        joined over updates (a chunk state; all videos need the same frame count); ``"mean"``: the mean
        over every frame seen (a float64 sum and a frame count: bounded memory, all-reduced).
      clip_score: clip each frame's VMAF to [0, 100] (vmaf-torch's ``clip_score``). Default ``False``.
      neg: VMAF NEG: enhancement gain limits of 1 in VIF and ADM (vmaf-torch's ``NEG``). Default ``False``.
      nan_strategy: NaN / inf in a video: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such videos out; ``"disable"`` lets NaN propagate.

    Inputs:
      ``update(state, preds, target)``: float videos ``(N, C, F, H, W)`` in [0, 1] of one shape,
      ``C = 3`` (RGB) or ``1`` (luma), ``F >= 1``, ``H, W >= 16``. A video's frames come in one update.

    Returns:
      float64 ``(N, F)`` scores (a scalar for ``reduction="mean"``), or a dict of such tensors.

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.rand(2, 3, 4, 32, 32, generator=g)
        >>> preds = (target + 0.05 * torch.randn(2, 3, 4, 32, 32, generator=g)).clamp(0, 1)
        >>> vmaf = fmetrics.video_multi_method_assessment_fusion()
        >>> vmaf(preds, target).round(decimals=2)
        tensor([[ 77.4500,  89.4800,  99.7300,  99.0500],
                [ 80.4900, 103.0000,  84.4300,  95.2900]], dtype=torch.float64)
        >>> mean = fmetrics.video_multi_method_assessment_fusion(features=True, reduction="mean")
        >>> round(float(mean(preds, target)["integer_vif_scale0"]), 4)
        0.5003
    """
    name = "video_multi_method_assessment_fusion"
    c.check_bool(name, "features", features)
    c.check_choice(name, "reduction", reduction, ("none", "mean"))
    c.check_bool(name, "clip_score", clip_score)
    c.check_bool(name, "neg", neg)
    _finite.check_strategy(name, nan_strategy)
    gain_limit = 1.0 if neg else 100.0

    def columns(preds, target):
        _check_videos(name, preds, target)
        dtype = accum_dtype(preds.device)
        values = table(luma(target, dtype), luma(preds, dtype), gain_limit).detach()
        if clip_score:
            values = torch.cat((values[..., :-1], values[..., -1:].clamp(0.0, 100.0)), dim=-1)
        return values, _finite.screen(nan_strategy, preds, target)

    def output(values: torch.Tensor):
        return dict(zip(KEYS, values.unbind(-1))) if features else values[..., -1]

    zero = lambda: torch.zeros((), dtype=torch.int64)  # noqa: E731
    if reduction == "none":
        def init():
            return VMAFFrames((), (), zero())

        def update(state, preds, target):
            values, screened = columns(preds, target)
            ok = None if screened is None else screened[0]
            return VMAFFrames((values,), (_finite.flags(ok, values),), _finite.counted(state.nonfinite, screened))

        def finalize(state):
            _finite.report(name, nan_strategy, state.nonfinite)
            lengths = sorted({v.shape[1] for v in state.frames})
            if len(lengths) > 1:
                raise validation.fail(name, "preds", "videos of one frame count to join per frame (or "
                                      "reduction='mean')", f"frame counts {lengths}")
            empty = torch.zeros(0, lengths[0] if lengths else 0, len(KEYS), dtype=accum_dtype())
            values = cat_chunks(state.frames, empty)
            return output(values[cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))])

        tags = VMAFFrames(frames="cat", valid="cat", nonfinite="sum")
    else:
        def init():
            return VMAFMean(torch.zeros(len(KEYS), dtype=accum_dtype()), zero(), zero())

        def update(state, preds, target):
            values, screened = columns(preds, target)
            ok = None if screened is None else screened[0]
            total = state.total + _finite.keep(ok, values).sum(dim=(0, 1), dtype=state.total.dtype)
            return VMAFMean(total, state.count + _finite.kept(ok, values.shape[0]) * values.shape[1],
                            _finite.counted(state.nonfinite, screened))

        def finalize(state):
            _finite.report(name, nan_strategy, state.nonfinite)
            c.warn_empty(name, state.count)
            return output(state.total / state.count)

        tags = VMAFMean(total="sum", count="sum", nonfinite="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("video.vmaf", reduction, clip_score, neg, nan_strategy == "disable"),
                  reductions=tags, higher_is_better=True, is_differentiable=False,
                  check=_finite.eager_check(name, ("preds", "target"), nan_strategy))
