"""SSIM, MS-SSIM and the universal image quality index (Wang et al. 2004; Wang, Simoncelli, Bovik 2003).

One pass for the local moments: ``preds, target, preds^2 + target^2,
preds*target`` (the formulas need only the variances' sum; `moments` gives
all five) are stacked and filtered together by a separable window with
"valid" borders (the map covers only windows that lie inside the image, as in
Wang et al.'s reference code, scikit-image and pytorch-msssim; torchmetrics
instead reflect-pads and averages the map over the padded border too).
The moments are taken about a per-image, per-channel shift (the target's mean),
so float32 arithmetic on 8-bit-range data does not lose the variances.
"""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional, Sequence, Union

import torch

from fmetrics import validation
from fmetrics.image import _common as c
from fmetrics.image import _finite
from fmetrics.image._finite import NanStrategy
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, cat_chunks, merge_fields

Reduction = Literal["elementwise_mean", "sum", "none", None]


def _kernels(name, gaussian_kernel, sigma, kernel_size, nd):
    if gaussian_kernel:
        sigmas = c.check_pair_sizes(name, "sigma", sigma, nd, integer=False)
        return tuple(tuple(c.gaussian_1d(c.gaussian_size(s), s).tolist()) for s in sigmas)
    sizes = c.check_pair_sizes(name, "kernel_size", kernel_size, nd, integer=True, odd=True)
    return tuple(tuple([1.0 / k] * k) for k in sizes)


def _kernel_sets(name, gaussian_kernel, sigma, kernel_size) -> dict:
    """``{spatial dims: kernels}``: a sequence of sigmas / sizes fixes 2-D or 3-D; a scalar serves both."""
    spec = sigma if gaussian_kernel else kernel_size
    nds = (len(spec),) if isinstance(spec, (tuple, list)) else (2, 3)
    if any(nd not in (2, 3) for nd in nds):
        raise validation.fail(name, "sigma" if gaussian_kernel else "kernel_size", "one value or 2 or 3 values",
                              repr(spec))
    if gaussian_kernel:  # still validated, as torchmetrics does
        c.check_pair_sizes(name, "kernel_size", kernel_size, nds[0] if isinstance(kernel_size, int) else
                           len(kernel_size), integer=True, odd=True)
    return {nd: _kernels(name, gaussian_kernel, sigma, kernel_size, nd) for nd in nds}


def _check_window(name: str, x: torch.Tensor, kernels) -> None:
    spatial = tuple(x.shape[2:])
    window = tuple(len(k) for k in kernels)
    if any(s < k for s, k in zip(spatial, window)):
        raise validation.fail(name, "preds", f"images at least as large as the {window} window",
                              f"spatial size {spatial}")


def moments(p: torch.Tensor, t: torch.Tensor, kernels):
    """Local means, variances and covariance of ``p`` and ``t`` (valid windows), in one filtering pass."""
    nd = len(kernels)
    dims = tuple(range(2, 2 + nd))
    shift = t.mean(dim=dims, keepdim=True) if t.numel() else torch.zeros((), dtype=t.dtype, device=t.device)
    p0, t0 = p - shift, t - shift
    z = torch.stack((p0, t0, p0 * p0, t0 * t0, p0 * t0))
    m = c.filter_valid(z, kernels)
    mp, mt = m[0], m[1]
    vp = m[2] - mp * mp
    vt = m[3] - mt * mt
    cov = m[4] - mp * mt
    return mp + shift, mt + shift, vp, vt, cov


def moment_sums(p: torch.Tensor, t: torch.Tensor, kernels):
    """Local means, the sum of the variances ``s_p^2 + s_t^2`` and the covariance, from four filtered planes.

    SSIM, MS-SSIM and UQI only need the variances' sum, so ``p^2 + t^2`` is filtered as one plane: four
    filtered planes instead of five (the filtering is the cost). Same shifted moments as `moments`.
    """
    nd = len(kernels)
    dims = tuple(range(2, 2 + nd))
    shift = t.mean(dim=dims, keepdim=True) if t.numel() else torch.zeros((), dtype=t.dtype, device=t.device)
    if validation.traced():
        p0, t0 = p - shift, t - shift
        z = torch.stack((p0, t0, p0 * p0 + t0 * t0, p0 * t0))
    else:  # eager: the four planes written in place (no temporaries)
        z = torch.empty((4, *p.shape), dtype=p.dtype, device=p.device)
        p0, t0 = torch.sub(p, shift, out=z[0]), torch.sub(t, shift, out=z[1])
        torch.mul(p0, p0, out=z[2]).addcmul_(t0, t0)
        torch.mul(p0, t0, out=z[3])
    m = c.filter_valid(z, kernels)
    mp, mt = m[0], m[1]
    vsum = m[2] - mp * mp - mt * mt
    cov = m[3] - mp * mt
    return mp + shift, mt + shift, vsum, cov


def ssim_maps(p, t, kernels, c1, c2, cs_only: bool = False):
    """SSIM and contrast-sensitivity maps (valid windows); ``c1``, ``c2`` broadcast per image.

    ``cs_only``: ``(None, cs)``, skipping the luminance term (MS-SSIM's coarse levels but the last).
    """
    mp, mt, vsum, cov = moment_sums(p, t, kernels)
    cs = (2 * cov + c2) / (vsum + c2)
    if cs_only:
        return None, cs
    lum = (2 * mp * mt + c1) / (mp * mp + mt * mt + c1)
    return lum * cs, cs


def _constants(data_range, p, t, k1, k2, nd):
    dr = c.range_value(data_range, p, t)
    if dr.dim():
        dr = dr.view(-1, *([1] * (nd + 1)))
    return (k1 * dr) ** 2, (k2 * dr) ** 2


class SSIMState(NamedTuple):
    total: torch.Tensor   # float64 (2,): sums of per-image SSIM and contrast sensitivity
    count: torch.Tensor   # int64 (): images
    values: tuple         # chunks (n, 2) of per-image (SSIM, CS) for reduction="none"
    maps: tuple           # chunks of SSIM maps for return_full_image=True
    valid: tuple          # chunks (n,) bool beside values / maps: False for the images left out (nan_strategy)
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


@factory
def structural_similarity_index_measure(
    *,
    gaussian_kernel: bool = True,
    sigma: Union[float, Sequence[float]] = 1.5,
    kernel_size: Union[int, Sequence[int]] = 11,
    reduction: Reduction = "elementwise_mean",
    data_range: Optional[Union[float, tuple]] = None,
    k1: float = 0.01,
    k2: float = 0.03,
    return_full_image: bool = False,
    return_contrast_sensitivity: bool = False,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """Structural similarity (Wang et al. 2004), averaged over each image, then over images.

    ``SSIM = (2 mu_p mu_t + C1)(2 s_pt + C2) / ((mu_p^2 + mu_t^2 + C1)(s_p^2 + s_t^2 + C2))``
    with local Gaussian-weighted (``sigma``) or uniform (``kernel_size``)
    moments over every window inside the image ("valid": no padding),
    ``C1 = (k1 L)^2``, ``C2 = (k2 L)^2`` and ``L`` the data range. The image's
    SSIM is the mean of its map (over channels too); the value is the mean over
    images (``reduction``). Matches scikit-image's ``structural_similarity(...,
    gaussian_weights=True, sigma=1.5, use_sample_covariance=False)`` and
    pytorch-msssim; torchmetrics averages over a reflect-padded border as well.

    Args:
      gaussian_kernel: ``True`` (default): Gaussian window of ``sigma``, truncated
        at 3.5 sigma (11 taps for 1.5; ``kernel_size`` then unused, as in
        torchmetrics); ``False``: uniform ``kernel_size`` window.
      sigma: Gaussian standard deviation, one value or one per spatial axis. Default 1.5.
      kernel_size: odd uniform window size, one value or one per spatial axis. Default 11.
      reduction: ``"elementwise_mean"`` (default) mean over images; ``"sum"``;
        ``"none"``/``None``: the per-image values.
      data_range: ``L``: a number, or ``(min, max)`` (inputs are clamped to it);
        ``None`` (default): per image, ``max(range(preds), range(target))``
        (torchmetrics infers it per batch).
      k1, k2: stabilizing constants. Defaults 0.01, 0.03.
      return_full_image: also return the SSIM maps ``(N, C, H-k+1, W-k+1)`` (joined over updates).
      return_contrast_sensitivity: also return the contrast-sensitivity value (reduced the same way).
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: images ``(N, C, H, W)`` or volumes
      ``(N, C, D, H, W)`` of one shape, float or integer; spatial size at least the window.

    Returns:
      float64 value (``(N,)`` for ``reduction="none"``); a pair with the maps or CS when asked.

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.rand(2, 1, 16, 16, generator=g)
        >>> preds = (target + 0.1 * torch.rand(2, 1, 16, 16, generator=g)).clamp(0, 1)
        >>> round(float(fmetrics.structural_similarity_index_measure(data_range=1.0)(preds, target)), 4)
        0.989
    """
    name = "structural_similarity_index_measure"
    c.check_bool(name, "gaussian_kernel", gaussian_kernel)
    c.check_choice(name, "reduction", reduction, c.REDUCTIONS)
    data_range = c.check_data_range(name, data_range)
    c.check_positive(name, "k1", k1)
    c.check_positive(name, "k2", k2)
    c.check_bool(name, "return_full_image", return_full_image)
    c.check_bool(name, "return_contrast_sensitivity", return_contrast_sensitivity)
    if return_full_image and return_contrast_sensitivity:
        raise validation.fail(name, "return_full_image", "not together with return_contrast_sensitivity=True", True)
    _finite.check_strategy(name, nan_strategy)
    kern = _kernel_sets(name, gaussian_kernel, sigma, kernel_size)
    keep_values = reduction in ("none", None)

    def per_image(p, t):
        nd = p.dim() - 2
        kernels = kern[nd]
        p, t = c.clamp_range(p, data_range), c.clamp_range(t, data_range)
        c1, c2 = _constants(data_range, p, t, k1, k2, nd)
        s, cs = ssim_maps(p, t, kernels, c1, c2)
        dims = tuple(range(1, s.dim()))
        return torch.stack((s.mean(dim=dims), cs.mean(dim=dims)), dim=-1), s

    def update(state, preds, target):
        preds, target = c.images(name, preds, target, ndims=(4, 5))
        p, t = c.common_float(preds, target)
        nd = p.dim() - 2
        kernels = kern.get(nd)
        if kernels is None:
            raise validation.fail(name, "preds", f"{'volumes' if nd == 2 else 'images'} matching the "
                                  "number of sigma / kernel_size values", f"shape {tuple(p.shape)}")
        _check_window(name, p, kernels)
        if return_full_image:
            vals, maps = per_image(p, t)
            maps = (maps.detach().to(accum_dtype()),)
        else:
            vals = c.chunked(lambda a, b: per_image(a, b)[0], None, p, t)
            maps = ()
        vals = vals.detach()
        screened = _finite.screen(nan_strategy, preds, target)
        ok = None if screened is None else screened[0]
        total = state.total + _finite.keep(ok, vals).sum(0, dtype=state.total.dtype)
        chunked = keep_values or return_full_image
        return SSIMState(total, state.count + _finite.kept(ok, vals.shape[0]),
                         (vals.to(accum_dtype()),) if keep_values else (), maps,
                         (_finite.flags(ok, vals),) if chunked else (), _finite.counted(state.nonfinite, screened))

    def init():
        z = torch.zeros((), dtype=torch.int64)
        return SSIMState(torch.zeros(2, dtype=accum_dtype()), z, (), (), (), z.clone())

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        ok = cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))
        if keep_values:
            v = cat_chunks(state.values, torch.zeros(0, 2, dtype=accum_dtype()))[ok]
            value, cs = v[:, 0], v[:, 1]
        elif reduction == "sum":
            value, cs = state.total[0], state.total[1]
        else:
            c.warn_empty(name, state.count)
            value, cs = state.total[0] / state.count, state.total[1] / state.count
        if return_contrast_sensitivity:
            return value, cs
        if return_full_image:
            return value, cat_chunks(state.maps, torch.zeros(0, dtype=accum_dtype()))[ok]
        return value

    tags = SSIMState(total="sum", count="sum", values="cat", maps="cat", valid="cat", nonfinite="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, higher_is_better=True, is_differentiable=True, bounds=(-1.0, 1.0),
                  check=_finite.eager_check(name, ("preds", "target"), nan_strategy))


DEFAULT_BETAS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def _pool(x: torch.Tensor) -> torch.Tensor:
    """2x average pooling of the spatial axes, an odd side zero-padded in front (``F.avg_pool2d(x, 2,
    padding=side % 2)`` with its zero counted, as pytorch-msssim), by strided pair sums: ~5x faster on CPU."""
    for axis in range(2, x.dim()):
        if x.shape[axis] % 2:
            x = torch.cat((torch.zeros_like(x.narrow(axis, 0, 1)), x), dim=axis)
        even = [slice(None)] * x.dim()
        odd = list(even)
        even[axis], odd[axis] = slice(0, None, 2), slice(1, None, 2)
        x = x[tuple(even)] + x[tuple(odd)]
    return x * (0.5 ** (x.dim() - 2))


@factory
def multiscale_structural_similarity_index_measure(
    *,
    gaussian_kernel: bool = True,
    sigma: float = 1.5,
    kernel_size: int = 11,
    reduction: Reduction = "elementwise_mean",
    data_range: Optional[Union[float, tuple]] = None,
    k1: float = 0.01,
    k2: float = 0.03,
    betas: tuple = DEFAULT_BETAS,
    normalize: Optional[Literal["relu", "simple"]] = "relu",
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """Multi-scale SSIM (Wang, Simoncelli, Bovik 2003), per channel, averaged over channels and images.

    ``MS-SSIM = SSIM_M^b_M * prod_{j<M} CS_j^b_j`` where level ``j+1`` is level
    ``j`` average-pooled by 2 (odd sizes zero-padded, as pytorch-msssim), the
    per-level means of the SSIM / CS maps are taken per channel, and
    ``normalize="relu"`` clamps them at 0 first (``"simple"``: ``(x + 1) / 2``).
    Matches pytorch-msssim's ``ms_ssim``; torchmetrics differs (reflect-padded
    maps, channel mean before the powers, floor pooling: docs/image.md).

    Args:
      gaussian_kernel, sigma, kernel_size, data_range, k1, k2: as in
        `structural_similarity_index_measure` (the data range is inferred once
        per image at full scale when ``None``).
      reduction: ``"elementwise_mean"`` (default), ``"sum"``, ``"none"``/``None``.
      betas: level weights (the number of levels). Default Wang et al.'s five.
      normalize: ``"relu"`` (default), ``"simple"`` or ``None``.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` or ``(N, C, D, H, W)``;
      the smallest level must still hold a window: side ``>= (k - 1) * 2^(levels - 1) + 1``.

    Returns:
      float64 value (``(N,)`` for ``reduction="none"``).

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.rand(1, 1, 176, 176, generator=g)
        >>> preds = (target + 0.2 * torch.rand(1, 1, 176, 176, generator=g)).clamp(0, 1)
        >>> m = fmetrics.multiscale_structural_similarity_index_measure(data_range=1.0)
        >>> round(float(m(preds, target)), 4)
        0.9799
    """
    name = "multiscale_structural_similarity_index_measure"
    c.check_bool(name, "gaussian_kernel", gaussian_kernel)
    data_range = c.check_data_range(name, data_range)
    c.check_positive(name, "k1", k1)
    c.check_positive(name, "k2", k2)
    c.check_choice(name, "normalize", normalize, ("relu", "simple", None))
    if not isinstance(betas, tuple) or not betas or not all(isinstance(b, float) for b in betas):
        raise validation.fail(name, "betas", "a non-empty tuple of floats", repr(betas))
    levels = len(betas)
    kern = _kernel_sets(name, gaussian_kernel, sigma, kernel_size)

    def scores(preds, target):
        preds, target = c.images(name, preds, target, ndims=(4, 5))
        p, t = c.common_float(preds, target)
        nd = p.dim() - 2
        kernels = kern.get(nd)
        if kernels is None:
            raise validation.fail(name, "preds", "inputs matching the number of sigma / kernel_size values",
                                  f"shape {tuple(p.shape)}")
        k = len(kernels[0])
        need = (k - 1) * 2 ** (levels - 1) + 1
        if min(p.shape[2:]) < need:
            raise validation.fail(name, "preds", f"spatial sides of at least {need} for {levels} levels and a "
                                  f"{k}-tap window", f"shape {tuple(p.shape)}")
        p, t = c.clamp_range(p, data_range), c.clamp_range(t, data_range)
        c1, c2 = _constants(data_range, p, t, k1, k2, nd)
        dims = tuple(range(2, 2 + nd))
        per_image = (p.shape[0],) + (1,) * (nd + 1)
        c1, c2 = torch.broadcast_to(c1, per_image), torch.broadcast_to(c2, per_image)
        parts = []
        for level in range(levels):
            last = level == levels - 1

            def step(a, b, c1_, c2_, last=last):
                s, cs = ssim_maps(a, b, kernels, c1_, c2_, cs_only=not last)
                v = (s if last else cs).mean(dim=dims)  # (n, C)
                return (v,) if last else (v, _pool(a), _pool(b))

            # level by level, each in cache-sized chunks of images (eager): coarse levels take many at once
            out = c.chunked(step, None, p, t, c1, c2)
            parts.append(out[0])
            if not last:
                p, t = out[1], out[2]
        stack = torch.stack(parts)  # (levels, N, C)
        if normalize == "relu":
            stack = torch.relu(stack)
        elif normalize == "simple":
            stack = (stack + 1) / 2
        return torch.stack([v ** b for v, b in zip(stack, betas)]).prod(dim=0).mean(dim=1)  # Python exponents

    return c.scored(name, lambda p, t: scores(p, t).detach(), reduction, key=("ms_ssim",),
                    nan_strategy=nan_strategy, higher_is_better=True, is_differentiable=True, bounds=(0.0, 1.0))


@factory
def universal_image_quality_index(
    *,
    kernel_size: Sequence[int] = (11, 11),
    sigma: Sequence[float] = (1.5, 1.5),
    reduction: Reduction = "elementwise_mean",
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """Universal image quality index (Wang & Bovik 2002): SSIM with ``C1 = C2 = 0``.

    ``Q = 4 s_pt mu_p mu_t / ((s_p^2 + s_t^2)(mu_p^2 + mu_t^2))`` over Gaussian
    windows of ``kernel_size`` taps and ``sigma`` inside the image; the value
    is the mean over every map entry (torchmetrics: the same cropped map,
    ``eps`` added to the denominator).

    Args:
      kernel_size: odd window sizes ``(kh, kw)``. Default (11, 11).
      sigma: Gaussian standard deviations ``(sh, sw)``. Default (1.5, 1.5).
      reduction: ``"elementwise_mean"`` (default) mean of the maps; ``"sum"``;
        ``"none"``/``None``: the maps ``(N, C, H-kh+1, W-kw+1)``.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` float images, ``H >= kh``, ``W >= kw``.

    Returns:
      float64 value, or the maps.

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.rand(2, 1, 16, 16, generator=g)
        >>> preds = target * 0.75 + 0.1
        >>> round(float(fmetrics.universal_image_quality_index()(preds, target)), 4)
        0.959
    """
    name = "universal_image_quality_index"
    sizes = c.check_pair_sizes(name, "kernel_size", kernel_size, 2, integer=True, odd=True)
    sigmas = c.check_pair_sizes(name, "sigma", sigma, 2, integer=False)
    kernels = tuple(tuple(c.gaussian_1d(k, s).tolist()) for k, s in zip(sizes, sigmas))

    def scores(preds, target):
        preds, target = c.images(name, preds, target)
        p, t = c.common_float(preds, target)
        _check_window(name, p, kernels)
        mp, mt, vsum, cov = moment_sums(p, t, kernels)
        eps = torch.finfo(p.dtype).eps
        return ((4 * cov * mp * mt) / (vsum * (mp * mp + mt * mt) + eps)).detach()

    return c.scored(name, scores, reduction, key=("uqi", sizes, sigmas), nan_strategy=nan_strategy,
                    empty_shape=(0, 1, 0, 0),
                    higher_is_better=True, is_differentiable=True, bounds=(-1.0, 1.0))
