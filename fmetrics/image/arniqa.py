"""ARNIQA (Agnolucci et al. 2024): no-reference image quality from a distortion-manifold encoder and a linear regressor.

``score = (r([u(E(x)), u(E(x_half))]) - lo) / (hi - lo)``: ``E`` the encoder (ResNet-50 without its fc layer),
``u`` the unit-L2 normalization, ``x_half`` the image resized to ``(H // 2, W // 2)`` (bilinear, antialiased:
torchvision's ``Resize`` on tensors), ``r`` the linear regressor and ``(lo, hi)`` the score range of the
regressor's dataset (KonIQ-10k 1..100, KADID-10k 1..5). Both networks are the metric's parameters: nothing is
downloaded (docs/image.md, "ARNIQA").
"""
from __future__ import annotations

import math
from typing import Literal, NamedTuple

import torch
import torch.nn.functional as F

from fmetrics import validation
from fmetrics.image import _common as c
from fmetrics.image import _finite
from fmetrics.image._finite import NanStrategy
from fmetrics.metric import Metric
from fmetrics.networks import eval_view
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, cat_chunks, merge_fields

REGRESSOR_RANGES = {"kadid10k": (1.0, 5.0), "koniq10k": (1.0, 100.0)}
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
RANGE_RULE = "images must be in [0, 1] with normalize=True"


class ARNIQAState(NamedTuple):
    total: torch.Tensor      # float64 (): sum of the kept images' scores
    count: torch.Tensor      # int64 (): kept images
    scores: tuple            # chunks (n,) float64: the scores (reduction="none" only)
    valid: tuple             # chunks (n,) bool: False for images left out (reduction="none" only)
    nonfinite: torch.Tensor  # int64 (): non-finite image entries (nan_strategy)
    outside: torch.Tensor    # int64 (): entries outside [0, 1] with normalize=True (deferred path)


def imagenet_normalize(x: torch.Tensor) -> torch.Tensor:
    """``(x - mean) / std`` per channel with the ImageNet statistics (torchvision's ``Normalize``)."""
    return torch.cat([(x[:, i:i + 1] - m) / s for i, (m, s) in enumerate(zip(IMAGENET_MEAN, IMAGENET_STD))], 1)


def arniqa_scores(encoder, regressor, img: torch.Tensor, normalize: bool, lo: float, hi: float) -> torch.Tensor:
    """Per-image ARNIQA scores ``(N,)`` (the module docstring's formula)."""
    h, w = img.shape[-2:]
    half = F.interpolate(img, size=(h // 2, w // 2), mode="bilinear", align_corners=False, antialias=True)
    if normalize:
        img, half = imagenet_normalize(img), imagenet_normalize(half)
    n = img.shape[0]
    f = F.normalize(encoder(img).flatten(1), dim=1)
    f_half = F.normalize(encoder(half).flatten(1), dim=1)
    score = regressor(torch.cat((f, f_half), dim=1))
    return (score.reshape(n) - lo) / (hi - lo)


def _range_check(name: str, normalize: bool, nan_strategy: str):
    finite = _finite.eager_check(name, ("img",), nan_strategy)

    def check(img, *args, **kwargs):
        if finite is not None:
            finite(img)
        if normalize and isinstance(img, torch.Tensor) and img.is_floating_point() and img.numel():
            bad = img[(img < 0) | (img > 1)]
            if bad.numel():
                raise ValueError(f"{name}: img must be in [0, 1] with normalize=True (or ImageNet-normalized with "
                                 f"normalize=False); found {validation.quote(bad)}")
    return check


@factory
def arniqa(
    *,
    encoder: torch.nn.Module,
    regressor: torch.nn.Module,
    regressor_dataset: Literal["kadid10k", "koniq10k"] = "koniq10k",
    reduction: Literal["sum", "mean", "none"] = "mean",
    normalize: bool = True,
    autocast: bool = False,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """ARNIQA no-reference quality ``(r([u(E(x)), u(E(x/2))]) - lo) / (hi - lo)`` in [0, 1], higher is better.

    Args:
      encoder: an ``nn.Module`` mapping ImageNet-normalized images ``(N, 3, H, W)`` to features ``(N, d)`` (or
        ``(N, d, 1, 1)``): ARNIQA's ResNet-50 without its fc layer (docs/image.md builds it from the checkpoint).
      regressor: an ``nn.Module`` mapping ``(N, 2 d)`` to ``(N, 1)``: ARNIQA's linear regressor.
      regressor_dataset: ``"koniq10k"`` (default; scores 1..100) or ``"kadid10k"`` (1..5): the range the
        regressor's output is scaled from.
      reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (one score per image) over images.
      normalize: ``True`` (default): images in [0, 1], ImageNet-normalized here; ``False``: images already
        ImageNet-normalized.
      autocast: run the networks under ``torch.autocast`` in the images' dtype. Default False.
      nan_strategy: NaN / inf in the images: ``"error"`` (default), ``"warn"``, ``"ignore"``, ``"disable"``
        (docs/image.md, "Bad input").

    Inputs:
      ``update(state, img)``: images ``(N, 3, H, W)``, float.

    Returns:
      float64 value (``(N,)`` scores for ``reduction="none"``); NaN with a warning on no images.

    Example::

        >>> enc = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1))
        >>> _ = torch.manual_seed(0); reg = torch.nn.Linear(8, 1)
        >>> m = fmetrics.arniqa(encoder=enc, regressor=reg, reduction="none")
        >>> m(torch.rand(2, 3, 8, 8)).shape
        torch.Size([2])
    """
    name = "arniqa"
    for arg, net in (("encoder", encoder), ("regressor", regressor)):
        if not isinstance(net, torch.nn.Module):
            raise validation.fail(name, arg, "an nn.Module (nothing is downloaded: build ARNIQA's networks from "
                                  "the checkpoint, docs/image.md)", type(net).__name__)
    c.check_choice(name, "regressor_dataset", regressor_dataset, tuple(REGRESSOR_RANGES))
    c.check_choice(name, "reduction", reduction, ("sum", "mean", "none"))
    c.check_bool(name, "normalize", normalize)
    c.check_bool(name, "autocast", autocast)
    _finite.check_strategy(name, nan_strategy)
    enc, reg = eval_view(encoder, name, "encoder"), eval_view(regressor, name, "regressor")
    lo, hi = REGRESSOR_RANGES[regressor_dataset]
    zero = lambda: torch.zeros((), dtype=torch.int64)  # noqa: E731

    def init():
        return ARNIQAState(torch.zeros((), dtype=accum_dtype()), zero(), (), (), zero(), zero())

    def update(state, img):
        img = c.real(name, "img", img)
        if img.dim() != 4 or img.shape[1] != 3:
            raise validation.fail(name, "img", "a batch of RGB images (N, 3, H, W)", f"shape {tuple(img.shape)}")
        c.check_pixels(name, "img", img)
        x = c.as_float(img)
        with torch.no_grad(), torch.autocast(x.device.type, dtype=x.dtype, enabled=autocast):
            s = arniqa_scores(enc, reg, x, normalize, lo, hi).detach().to(accum_dtype())
        screened = _finite.screen(nan_strategy, x)
        ok = None if screened is None else screened[0]
        outside = state.outside
        if normalize and not validation.eager_check_applies_to(x):  # the eager check covered it otherwise
            out = ((x < 0) | (x > 1)).flatten(1).sum(1)
            outside = outside + out.sum()
            ok = out == 0 if ok is None else ok & (out == 0)
        kept = _finite.keep(ok, s)
        if reduction == "none":
            return state._replace(scores=state.scores + (s,), valid=state.valid + (_finite.flags(ok, s),),
                                  count=state.count + _finite.kept(ok, s.shape[0]),
                                  nonfinite=_finite.counted(state.nonfinite, screened), outside=outside)
        return state._replace(total=state.total + kept.sum(), count=state.count + _finite.kept(ok, s.shape[0]),
                              nonfinite=_finite.counted(state.nonfinite, screened), outside=outside)

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        validation.report(name, {RANGE_RULE: state.outside}, "error")
        if reduction == "none":
            s = cat_chunks(state.scores, torch.zeros(0, dtype=accum_dtype()))
            s = s[cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))]
            _finite_scores(name, s)
            return s
        _finite_scores(name, state.total)
        if reduction == "sum":
            return state.total
        c.warn_empty(name, state.count)
        return state.total / state.count

    tags = ARNIQAState(total="sum", count="sum", scores="cat", valid="cat", nonfinite="sum", outside="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, higher_is_better=True,
                  check=_range_check(name, normalize, nan_strategy))


def _finite_scores(name: str, scores: torch.Tensor) -> None:
    """``finalize`` raises when the network gave non-finite scores for finite images (a broken network)."""
    if scores.numel() and not math.isfinite(float(scores.sum())):
        raise ValueError(f"{name}: the network returned non-finite scores for finite images "
                         f"({validation.quote(scores[~torch.isfinite(scores)])}); check the network's weights")
