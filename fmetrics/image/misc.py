"""Total variation, image gradients and visual information fidelity."""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional

import torch
import torch.nn.functional as F

from fmetrics import validation
from fmetrics.image import _common as c
from fmetrics.image import _finite
from fmetrics.image._finite import NanStrategy
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks, merge_fields


def _one_batch(name: str, img, ndims=(4,)) -> torch.Tensor:
    img = c.real(name, "img", img)
    if img.dim() not in ndims:
        raise validation.fail(name, "img", "a batch of images (N, C, H, W)", f"shape {tuple(img.shape)}")
    c.check_pixels(name, "img", img)
    return img


@factory
def total_variation(*, reduction: Optional[Literal["sum", "mean", "none"]] = "sum",
                    nan_strategy: NanStrategy = "error") -> Metric:
    """Anisotropic total variation ``sum |x[i+1, j] - x[i, j]| + sum |x[i, j+1] - x[i, j]|`` per image.

    Args:
      reduction: ``"sum"`` (default) over images, ``"mean"`` over images, ``"none"``/``None``: per image.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, img)``: ``(N, C, H, W)`` images, float or integer.

    Returns:
      float64 value (``(N,)`` for ``"none"``).

    Example::

        >>> img = torch.tensor([[[[0., 1.], [3., 2.]]]])
        >>> fmetrics.total_variation()(img)
        tensor(6., dtype=torch.float64)
    """
    name = "total_variation"
    c.check_choice(name, "reduction", reduction, ("sum", "mean", "none", None))

    def scores(img):
        x = c.as_float(_one_batch(name, img)).to(torch.float64)
        dh = (x[..., 1:, :] - x[..., :-1, :]).abs().sum(dim=(1, 2, 3))
        dw = (x[..., :, 1:] - x[..., :, :-1]).abs().sum(dim=(1, 2, 3))
        return (dh + dw).detach()

    red = {"sum": "sum", "mean": "elementwise_mean"}.get(reduction, "none")
    return c.scored(name, scores, red, key=("tv",), nan_strategy=nan_strategy, names=("img",),
                    higher_is_better=False, is_differentiable=True,
                    bounds=(0.0, None))


class GradState(NamedTuple):
    dy: tuple  # chunks (N, C, H, W)
    dx: tuple
    valid: tuple  # chunks (N,) bool: False for the images left out (nan_strategy)
    nonfinite: torch.Tensor  # int64 (): non-finite input entries


@factory
def image_gradients(*, nan_strategy: NanStrategy = "error") -> Metric:
    """Forward differences ``dy[i, j] = x[i+1, j] - x[i, j]``, ``dx[i, j] = x[i, j+1] - x[i, j]`` (0 on the last row / column).

    Args:
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, img)``: ``(N, C, H, W)`` images.

    Returns:
      ``(dy, dx)``, each ``(N, C, H, W)`` in the input's float dtype, joined over updates.

    Example::

        >>> img = torch.arange(0, 9, dtype=torch.float32).reshape(1, 1, 3, 3)
        >>> dy, dx = fmetrics.image_gradients()(img)
        >>> dy[0, 0]
        tensor([[3., 3., 3.],
                [3., 3., 3.],
                [0., 0., 0.]])
    """
    name = "image_gradients"
    _finite.check_strategy(name, nan_strategy)

    def update(state, img):
        x = c.as_float(_one_batch(name, img)).detach()
        dy = F.pad(x[..., 1:, :] - x[..., :-1, :], (0, 0, 0, 1))
        dx = F.pad(x[..., :, 1:] - x[..., :, :-1], (0, 1, 0, 0))
        screened = _finite.screen(nan_strategy, x)
        ok = None if screened is None else screened[0]
        return GradState((dy,), (dx,), (_finite.flags(ok, x),), _finite.counted(state.nonfinite, screened))

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        empty = torch.zeros(0, 0, 0, 0)
        ok = cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))
        return cat_chunks(state.dy, empty)[ok], cat_chunks(state.dx, empty)[ok]

    tags = GradState(dy="cat", dx="cat", valid="cat", nonfinite="sum")
    return Metric(init=lambda: GradState((), (), (), torch.zeros((), dtype=torch.int64)), update=update,
                  merge=merge_fields(tags), finalize=finalize, name=name, reductions=tags, is_differentiable=True,
                  check=_finite.eager_check(name, ("img",), nan_strategy))


# VIF's 2-D Gaussian windows (sigma = taps / 5) are separable: two 1-D "valid" passes give the same sums
_VIF_TAPS = {n: tuple(c.gaussian_1d(n, n / 5.0).tolist()) for n in (17, 9, 5, 3)}


def vif_per_image(preds: torch.Tensor, target: torch.Tensor, sigma_n_sq: float) -> torch.Tensor:
    """Pixel-domain VIF (Sheikh & Bovik 2006), per channel then averaged over channels: ``(N,)``."""
    n, ch = preds.shape[:2]
    p = preds.reshape(n * ch, 1, *preds.shape[2:])
    t = target.reshape(n * ch, 1, *target.shape[2:])
    eps = 1e-10
    num = torch.zeros(n * ch, dtype=p.dtype, device=p.device)
    den = torch.zeros(n * ch, dtype=p.dtype, device=p.device)
    for scale in range(4):
        size = 2 ** (4 - scale) + 1
        kernels = (_VIF_TAPS[size], _VIF_TAPS[size])
        if scale > 0:  # t and p filtered together (one pass; fewer traced ops)
            t, p = c.filter_valid(torch.stack((t, p)), kernels)[..., ::2, ::2].unbind(0)
        z = c.filter_valid(torch.stack((t, p, t * t, p * p, t * p)), kernels)
        mt, mp = z[0], z[1]
        st = torch.clamp(z[2] - mt * mt, min=0.0)
        sp = torch.clamp(z[3] - mp * mp, min=0.0)
        stp = z[4] - mt * mp
        g = stp / (st + eps)
        sv = sp - g * stp
        low_t = st < eps
        g = torch.where(low_t, 0.0, g)
        sv = torch.where(low_t, sp, sv)
        st = torch.where(low_t, 0.0, st)
        low_p = sp < eps
        g = torch.where(low_p, 0.0, g)
        sv = torch.where(low_p, 0.0, sv)
        neg = g < 0
        sv = torch.where(neg, sp, sv)
        g = torch.where(neg, 0.0, g)
        sv = torch.clamp(sv, min=eps)
        num = num + torch.log10(1.0 + g * g * st / (sv + sigma_n_sq)).sum(dim=(1, 2, 3))
        den = den + torch.log10(1.0 + st / sigma_n_sq).sum(dim=(1, 2, 3))
    return (num / den).reshape(n, ch).mean(dim=1)


@factory
def visual_information_fidelity(*, sigma_n_sq: float = 2.0,
                                reduction: Literal["mean", "none"] = "mean",
                                nan_strategy: NanStrategy = "error") -> Metric:
    """Pixel-domain visual information fidelity (Sheikh & Bovik 2006), per image, averaged over images.

    Four scales of Gaussian windows (17, 9, 5, 3 taps; sigma = taps / 5),
    ``VIF = sum log10(1 + g^2 s_t^2 / (s_v^2 + s_n^2)) / sum log10(1 + s_t^2 / s_n^2)``
    per channel, averaged over channels (torchmetrics' definition).

    Args:
      sigma_n_sq: variance of the visual noise ``s_n^2``. Default 2.0.
      reduction: ``"mean"`` (default) over images, or ``"none"``: per image.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` images with ``H, W >= 41``.

    Returns:
      float64 value (``(N,)`` for ``"none"``).

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.rand(1, 1, 41, 41, generator=g) * 255
        >>> preds = target + 10 * torch.randn(1, 1, 41, 41, generator=g)
        >>> round(float(fmetrics.visual_information_fidelity()(preds, target)), 4)
        0.5313
    """
    name = "visual_information_fidelity"
    c.check_positive(name, "sigma_n_sq", sigma_n_sq)
    c.check_choice(name, "reduction", reduction, ("mean", "none"))

    def scores(preds, target):
        preds, target = c.images(name, preds, target)
        if preds.shape[-1] < 41 or preds.shape[-2] < 41:
            raise validation.fail(name, "preds", "images of at least 41 x 41", f"shape {tuple(preds.shape)}")
        p, t = c.common_float(preds, target)
        return vif_per_image(p, t, sigma_n_sq).detach()

    return c.scored(name, scores, "elementwise_mean" if reduction == "mean" else "none", key=("vif", sigma_n_sq),
                    nan_strategy=nan_strategy,
                    higher_is_better=True, is_differentiable=True, bounds=(0.0, None))
