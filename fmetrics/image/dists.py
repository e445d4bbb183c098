"""DISTS (Ding et al. 2020): deep image structure and texture similarity.

For feature maps ``x_k, y_k`` (``k = 0..K``; ``k = 0`` the image itself) with spatial means ``mu``, variances
``s^2`` and covariance ``s_xy`` per channel::

    D = 1 - sum_k sum_c [ a_kc (2 mu_x mu_y + c1) / (mu_x^2 + mu_y^2 + c1)
                        + b_kc (2 s_xy + c2) / (s_x^2 + s_y^2 + c2) ]

with ``c1 = c2 = 1e-6`` and the weights ``a, b`` divided by their joint sum. The backbone is the metric's
parameter: `DISTSBackbone` builds DISTS' VGG-16 with L2 pooling from ``vgg16().features``; ``alpha`` / ``beta``
are DISTS' learned weights (docs/image.md, "DISTS"). Nothing is downloaded.
"""
from __future__ import annotations

import math
from typing import Literal, Optional

import torch
import torch.nn.functional as F

from fmetrics import validation
from fmetrics.image import _common as c
from fmetrics.image._finite import NanStrategy
from fmetrics.image.arniqa import IMAGENET_MEAN, IMAGENET_STD
from fmetrics.metric import Metric
from fmetrics.networks import eval_view
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks

C1 = C2 = 1e-6


class L2Pool(torch.nn.Module):
    """DISTS' L2 pooling: ``sqrt(hann3x3 * x^2 + 1e-12)`` per channel, stride 2, padding 1 (replaces max pooling)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = _taps(x).expand(x.shape[1], 1, 3, 3)
        return (F.conv2d(x * x, w, stride=2, padding=1, groups=x.shape[1]) + 1e-12).sqrt()


def _taps(x: torch.Tensor) -> torch.Tensor:
    """The 3x3 Hann taps built on ``x``'s device by arithmetic (no host-to-device copy)."""
    i = torch.arange(3, device=x.device, dtype=x.dtype)
    a = 1.0 - (i - 1).abs() / 2  # 0.5, 1, 0.5
    return a[:, None] * a[None, :] / 4.0


class DISTSBackbone(torch.nn.Module):
    """DISTS' feature taps from a VGG-style ``features`` sequence: images in [0, 1] -> ``[x, f_1, ..., f_K]``.

    The images are ImageNet-normalized, the layers split into stages at each ``MaxPool2d`` (which L2 pooling
    replaces; a trailing one is dropped), and the output of every stage is tapped. With
    ``torchvision.models.vgg16(weights=...).features`` this is DISTS' network (relu1_2 ... relu5_3).
    """

    def __init__(self, features):
        super().__init__()
        stages, cur = [], []
        for layer in features:
            if isinstance(layer, torch.nn.MaxPool2d):
                stages.append(torch.nn.Sequential(*cur))
                cur = [L2Pool()]
            else:
                cur.append(layer)
        if len(cur) > 1:
            stages.append(torch.nn.Sequential(*cur))
        self.stages = torch.nn.ModuleList(stages)

    def forward(self, x: torch.Tensor) -> list:
        h = torch.cat([(x[:, i:i + 1] - m) / s for i, (m, s) in enumerate(zip(IMAGENET_MEAN, IMAGENET_STD))], 1)
        out = [x]
        for stage in self.stages:
            h = stage(h)
            out.append(h)
        return out


def dists_scores(net, x: torch.Tensor, y: torch.Tensor, alpha, beta, name: str = "dists") -> torch.Tensor:
    """Per-image DISTS ``(N,)`` (the module docstring's formula); ``alpha`` / ``beta``: ``(sum C_k,)`` or None."""
    fx, fy = net(x), net(y)
    chns = [f.shape[1] for f in fx]
    if alpha is not None and alpha.numel() != sum(chns):
        raise validation.fail(name, "alpha", f"one weight per channel of the feature maps ({sum(chns)})",
                              alpha.numel())
    if alpha is None:
        alpha = fx[0].new_ones(sum(chns))
        beta = alpha
    alpha, beta = alpha.reshape(-1).to(fx[0].dtype), beta.reshape(-1).to(fx[0].dtype)
    total = alpha.sum() + beta.sum()
    a, b = torch.split(alpha / total, chns), torch.split(beta / total, chns)
    dist = 0
    for k, (u, v) in enumerate(zip(fx, fy)):
        mu_x, mu_y = u.mean((2, 3), keepdim=True), v.mean((2, 3), keepdim=True)
        s1 = (2 * mu_x * mu_y + C1) / (mu_x ** 2 + mu_y ** 2 + C1)
        var_x = ((u - mu_x) ** 2).mean((2, 3), keepdim=True)
        var_y = ((v - mu_y) ** 2).mean((2, 3), keepdim=True)
        cov = (u * v).mean((2, 3), keepdim=True) - mu_x * mu_y
        s2 = (2 * cov + C2) / (var_x + var_y + C2)
        dist = dist + (a[k] * s1.flatten(1)).sum(1) + (b[k] * s2.flatten(1)).sum(1)
    return 1 - dist


def _checked(name: str, finalize):
    """``finalize`` that first raises when the network gave non-finite scores for finite images."""
    def run(state):
        if hasattr(state, "total"):
            sums = state.total
        else:
            sums = cat_chunks(state.values, torch.zeros(0, dtype=torch.float64))
            sums = sums[cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))]
        if sums.numel() and not math.isfinite(float(sums.sum())):
            raise ValueError(f"{name}: the network returned non-finite scores for finite images; "
                             "check the network's weights")
        return finalize(state)
    return run


@factory
def deep_image_structure_and_texture_similarity(
    *,
    net: torch.nn.Module,
    alpha: Optional[torch.Tensor] = None,
    beta: Optional[torch.Tensor] = None,
    reduction: Optional[Literal["sum", "mean", "none"]] = "mean",
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """DISTS ``1 - sum_k sum_c (a_kc S_kc + b_kc T_kc)`` (structure ``S``: means; texture ``T``: covariances).

    Args:
      net: an ``nn.Module`` mapping images in [0, 1] ``(N, 3, H, W)`` to the list of feature maps
        ``[x, f_1, ..., f_K]`` (``(N, C_k, H_k, W_k)``), e.g. ``DISTSBackbone(vgg16(weights=...).features)``.
      alpha, beta: DISTS' learned weights, ``(sum C_k,)`` or ``(1, sum C_k, 1, 1)`` tensors (torchmetrics ships
        them: ``dists_models/weights.pt``); default (both None): equal weights. Pass both or neither.
      reduction: ``"mean"`` (default, as the torchmetrics class), ``"sum"``, or ``"none"`` / ``None`` (one
        value per image, as torchmetrics' functional default).
      nan_strategy: NaN / inf in the images: ``"error"`` (default), ``"warn"``, ``"ignore"``, ``"disable"``
        (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: two float image batches ``(N, 3, H, W)`` in [0, 1].

    Returns:
      float64 value (``(N,)`` for ``"none"``); NaN with a warning on no images for ``"mean"``.

    Example::

        >>> _ = torch.manual_seed(0)
        >>> vgg = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        ...                           torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.ReLU())
        >>> m = fmetrics.deep_image_structure_and_texture_similarity(net=DISTSBackbone(vgg))
        >>> x = torch.rand(2, 3, 8, 8)
        >>> float(m(x, x))
        0.0
    """
    name = "deep_image_structure_and_texture_similarity"
    if not isinstance(net, torch.nn.Module):
        raise validation.fail(name, "net", "an nn.Module returning the list of feature maps [x, f_1, ..., f_K] "
                              "(nothing is downloaded: see fmetrics.image.dists.DISTSBackbone)", type(net).__name__)
    if (alpha is None) != (beta is None):
        raise validation.fail(name, "alpha", "alpha and beta both given or both None",
                              f"alpha={'None' if alpha is None else 'a tensor'}, "
                              f"beta={'None' if beta is None else 'a tensor'}")
    for arg, w in (("alpha", alpha), ("beta", beta)):
        if w is not None and (not isinstance(w, torch.Tensor) or not w.is_floating_point()):
            raise validation.fail(name, arg, "a float tensor of per-channel weights", repr(w))
    if alpha is not None and alpha.numel() != beta.numel():
        raise validation.fail(name, "beta", f"as many weights as alpha ({alpha.numel()})", beta.numel())
    c.check_choice(name, "reduction", reduction, ("sum", "mean", "none", None))
    model = eval_view(net, name, "net")

    def scores(preds, target):
        preds, target = c.images(name, preds, target)
        if preds.shape[1] != 3:
            raise validation.fail(name, "preds", "RGB images (N, 3, H, W)", f"shape {tuple(preds.shape)}")
        a, b = c.common_float(preds, target)
        with torch.no_grad():
            return dists_scores(model, a, b, alpha, beta, name).detach()

    red = {"mean": "elementwise_mean", "sum": "sum"}.get(reduction, "none")
    m = c.scored(name, scores, red, key=("dists",), nan_strategy=nan_strategy, higher_is_better=False)
    return m.replace(state_key=None, finalize=_checked(name, m._finalize))
