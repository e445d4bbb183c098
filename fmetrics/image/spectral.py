"""Spectral and pan-sharpening metrics: SAM, ERGAS, RASE, RMSE-SW, SCC, D_lambda, D_s, QNR.

Every state is sums and counts (float64 / int64). Dataset-level maps (RASE's
RMSE and target-mean maps, RMSE-SW's map) and band-pair tables (D_lambda's
UQI between bands, D_s' per-band UQI) start as 0-d zeros and take their shape
from the first batch by broadcasting, so an empty rank merges with any.
"""
from __future__ import annotations

import math
from typing import Literal, NamedTuple, Optional

import torch
import torch.nn.functional as F

from fmetrics import validation
from fmetrics.image import _common as c
from fmetrics.image import _finite
from fmetrics.image._finite import NanStrategy
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import accum_dtype, merge_fields

Reduction = Literal["elementwise_mean", "sum", "none", None]


def _z():
    return torch.zeros((), dtype=accum_dtype())


def _n():
    return torch.zeros((), dtype=torch.int64)


# ------------------------------------------------------------------ SAM, ERGAS

@factory
def spectral_angle_mapper(*, reduction: Reduction = "elementwise_mean", nan_strategy: NanStrategy = "error") -> Metric:
    """Spectral angle ``arccos(<p, t> / (|p| |t|))`` between the pixel spectra (channel vectors), in radians.

    Args:
      reduction: ``"elementwise_mean"`` (default) over every pixel; ``"sum"``;
        ``"none"``/``None``: the angle maps ``(N, H, W)``.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` with ``C >= 2`` bands.

    Returns:
      float64 value, or the maps.

    Example::

        >>> preds = torch.tensor([[[[1.]], [[0.]]]])
        >>> target = torch.tensor([[[[1.]], [[1.]]]])
        >>> fmetrics.spectral_angle_mapper()(preds, target)
        tensor(0.7854, dtype=torch.float64)
    """
    name = "spectral_angle_mapper"

    def scores(preds, target):
        preds, target = c.images(name, preds, target)
        if preds.shape[1] < 2:
            raise validation.fail(name, "preds", "images with at least 2 channels (bands)", f"shape {tuple(preds.shape)}")
        p, t = c.common_float(preds, target)
        p, t = p.to(torch.float64), t.to(torch.float64)
        cos = (p * t).sum(dim=1) / (p.norm(dim=1) * t.norm(dim=1))
        return torch.clamp(cos, -1, 1).acos().detach()

    return c.scored(name, scores, reduction, key=("sam",), nan_strategy=nan_strategy, empty_shape=(0, 0, 0),
                    higher_is_better=False,
                    is_differentiable=True, bounds=(0.0, math.pi))


@factory
def error_relative_global_dimensionless_synthesis(*, ratio: float = 4,
                                                  reduction: Reduction = "elementwise_mean",
                                                  nan_strategy: NanStrategy = "error") -> Metric:
    """ERGAS ``100 / ratio * sqrt(mean_bands (RMSE_b / mean(target_b))^2)`` per image.

    Args:
      ratio: ratio of the high- to low-resolution pixel sizes. Default 4.
      reduction: ``"elementwise_mean"`` (default) over images; ``"sum"``; ``"none"``/``None``.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` images.

    Returns:
      float64 value (``(N,)`` for ``"none"``).

    Example::

        >>> target = torch.full((1, 2, 2, 2), 2.0)
        >>> preds = target + 1
        >>> fmetrics.error_relative_global_dimensionless_synthesis()(preds, target)
        tensor(12.5000, dtype=torch.float64)
    """
    name = "error_relative_global_dimensionless_synthesis"
    c.check_positive(name, "ratio", ratio)

    def scores(preds, target):
        preds, target = c.images(name, preds, target)
        p, t = c.common_float(preds, target)
        p = p.to(torch.float64).flatten(2)
        t = t.to(torch.float64).flatten(2)
        rmse = ((p - t) ** 2).mean(dim=2).sqrt()
        return (100 / ratio * ((rmse / t.mean(dim=2)) ** 2).mean(dim=1).sqrt()).detach()

    return c.scored(name, scores, reduction, key=("ergas", ratio), nan_strategy=nan_strategy, higher_is_better=False,
                    is_differentiable=True, bounds=(0.0, None))


# ------------------------------------------------------------------ sliding-window RMSE and RASE

def _tm_pad(x: torch.Tensor, window: int) -> torch.Tensor:
    """torchmetrics' border extension for the uniform filter: ``w//2`` mirrored rows before, ``w//2 + w%2 - 1`` after."""
    pad, outer = window // 2, window % 2
    for dim in (2, 3):
        size = x.shape[dim]
        before = x.narrow(dim, 0, pad).flip(dim)
        after_n = pad + outer - 1
        after = x.narrow(dim, size - after_n, after_n).flip(dim) if after_n > 0 else x.narrow(dim, 0, 0)
        x = torch.cat((before, x, after), dim=dim)
    return x


def _uniform(x: torch.Tensor, window: int) -> torch.Tensor:
    """Mean over ``window x window`` windows, output the input's size (torchmetrics' border rule)."""
    taps = [1.0 / window] * window
    return c.filter_valid(_tm_pad(x, window), (taps, taps))


class RMSESWState(NamedTuple):
    total: torch.Tensor   # float64 (): sum of per-image mean RMSE (cropped maps)
    images: torch.Tensor  # int64 ()
    rmse_map: torch.Tensor  # float64 () or (C, H, W): sum of per-image RMSE maps
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


class RASEState(NamedTuple):
    rmse_map: torch.Tensor    # float64 () or (C, H, W): sum of per-image RMSE maps
    target_map: torch.Tensor  # float64 () or (C, H, W): sum of per-image local target means
    images: torch.Tensor      # int64 ()
    nonfinite: torch.Tensor   # int64 (): non-finite input entries (nan_strategy)


def _rmse_maps(name, preds, target, window):
    preds, target = c.images(name, preds, target)
    crop = round(window / 2)
    if crop >= preds.shape[2] or crop >= preds.shape[3]:
        raise validation.fail(name, "preds", f"images larger than round(window_size / 2) = {crop}",
                              f"shape {tuple(preds.shape)}")
    p, t = c.common_float(preds, target)
    p, t = p.to(torch.float64), t.to(torch.float64)
    return torch.sqrt(_uniform((t - p) ** 2, window)), t, crop


@factory
def root_mean_squared_error_using_sliding_window(*, window_size: int = 8, return_rmse_map: bool = False,
                                                 nan_strategy: NanStrategy = "error") -> Metric:
    """RMSE over sliding ``window_size`` windows, averaged over the map (border of ``round(w/2)`` cropped) and images.

    Args:
      window_size: window side. Default 8.
      return_rmse_map: also return the mean RMSE map ``(C, H, W)`` over images.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` images.

    Returns:
      float64 value (and the map when asked).

    Example::

        >>> target = torch.zeros(1, 1, 16, 16)
        >>> fmetrics.root_mean_squared_error_using_sliding_window()(target + 2, target)
        tensor(2., dtype=torch.float64)
    """
    name = "root_mean_squared_error_using_sliding_window"
    c.check_positive(name, "window_size", window_size, integer=True)
    c.check_bool(name, "return_rmse_map", return_rmse_map)
    _finite.check_strategy(name, nan_strategy)

    def update(state, preds, target):
        rmse, _, crop = _rmse_maps(name, preds, target, window_size)
        screened = _finite.screen(nan_strategy, preds, target)
        ok = None if screened is None else screened[0]
        rmse = _finite.keep(ok, rmse.detach())
        inner = rmse[:, :, crop:-crop, crop:-crop]
        per_image = inner.mean(dim=(1, 2, 3)) if inner.numel() else rmse.new_zeros(rmse.shape[0])
        return RMSESWState(state.total + per_image.sum(), state.images + _finite.kept(ok, rmse.shape[0]),
                           state.rmse_map + rmse.sum(0), _finite.counted(state.nonfinite, screened))

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        c.warn_empty(name, state.images)
        value = state.total / state.images
        return (value, state.rmse_map / state.images) if return_rmse_map else value

    tags = RMSESWState(total="sum", images="sum", rmse_map="sum", nonfinite="sum")
    return Metric(init=lambda: RMSESWState(_z(), _n(), _z(), _n()), update=update, merge=merge_fields(tags),
                  finalize=finalize, name=name, reductions=_gathered_maps(tags, "rmse_map"), higher_is_better=False,
                  bounds=(0.0, None), check=_finite.eager_check(name, ("preds", "target"), nan_strategy))


@factory
def relative_average_spectral_error(*, window_size: int = 8, nan_strategy: NanStrategy = "error") -> Metric:
    """RASE: ``100 / mean_c(mu_t) * sqrt(mean_c RMSE^2)`` over sliding windows, cropped and averaged.

    ``RMSE`` and ``mu_t`` (local target mean) are the maps averaged over every
    image seen (torchmetrics' definition), then the RASE map is cropped by
    ``round(w/2)`` and averaged.

    Args:
      window_size: window side. Default 8.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` images of one size.

    Returns:
      float64 value.

    Example::

        >>> target = torch.full((1, 1, 16, 16), 4.0)
        >>> fmetrics.relative_average_spectral_error()(target + 1, target)
        tensor(25., dtype=torch.float64)
    """
    name = "relative_average_spectral_error"
    c.check_positive(name, "window_size", window_size, integer=True)
    _finite.check_strategy(name, nan_strategy)

    def update(state, preds, target):
        rmse, t, _ = _rmse_maps(name, preds, target, window_size)
        mean_t = _uniform(t, window_size)
        screened = _finite.screen(nan_strategy, preds, target)
        ok = None if screened is None else screened[0]
        return RASEState(state.rmse_map + _finite.keep(ok, rmse.detach()).sum(0),
                         state.target_map + _finite.keep(ok, mean_t.detach()).sum(0),
                         state.images + _finite.kept(ok, rmse.shape[0]), _finite.counted(state.nonfinite, screened))

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        if not int(state.images):  # no image: no map to crop
            c.warn_empty(name, state.images)
            return torch.full((), float("nan"), dtype=state.rmse_map.dtype)
        crop = round(window_size / 2)
        rmse = state.rmse_map / state.images
        mean_t = (state.target_map / state.images).mean(0)
        rase = 100 / mean_t * torch.sqrt((rmse ** 2).mean(0))
        return rase[crop:-crop, crop:-crop].mean()

    tags = RASEState(rmse_map="sum", target_map="sum", images="sum", nonfinite="sum")
    return Metric(init=lambda: RASEState(_z(), _z(), _n(), _n()), update=update, merge=merge_fields(tags),
                  finalize=finalize, name=name, reductions=_gathered_maps(tags, "rmse_map", "target_map"),
                  higher_is_better=False, bounds=(0.0, None),
                  check=_finite.eager_check(name, ("preds", "target"), nan_strategy))


# ------------------------------------------------------------------ spatial correlation coefficient

def _symmetric_pad(x: torch.Tensor, left: int, right: int, top: int, bottom: int) -> torch.Tensor:
    parts = [x[..., :left].flip(-1), x, x[..., x.shape[-1] - right:].flip(-1)] if right else \
        [x[..., :left].flip(-1), x]
    x = torch.cat(parts, dim=-1)
    parts = [x[..., :top, :].flip(-2), x, x[..., x.shape[-2] - bottom:, :].flip(-2)] if bottom else \
        [x[..., :top, :].flip(-2), x]
    return torch.cat(parts, dim=-2)


def _laplacian(device: torch.device) -> torch.Tensor:
    """The 3x3 high-pass ``[[-1,-1,-1],[-1,8,-1],[-1,-1,-1]] = 9 delta - 1``, built on ``device`` (no host copy)."""
    return F.pad(torch.full((1, 1), 9.0, device=device), (1, 1, 1, 1)) - 1.0


def _scc_maps(p: torch.Tensor, t: torch.Tensor, hp: torch.Tensor, window: int) -> torch.Tensor:
    n, ch, h, w = p.shape
    x = torch.stack((p, t), dim=2).reshape(n * ch * 2, 1, h, w)
    kh, kw = hp.shape
    padded = _symmetric_pad(x, (kw - 1) // 2, math.ceil((kw - 1) / 2), (kh - 1) // 2, math.ceil((kh - 1) / 2))
    x = F.conv2d(padded, hp.flip(0, 1)[None, None].to(x.dtype)) * 2.0
    lo, hi = math.ceil((window - 1) / 2), (window - 1) // 2
    x = F.pad(x, (lo, hi, lo, hi))
    taps = [1.0 / window] * window
    x = x.reshape(n * ch, 2, *x.shape[2:])
    z = c.filter_valid(torch.stack((x[:, 0], x[:, 1], x[:, 0] ** 2, x[:, 1] ** 2, x[:, 0] * x[:, 1])), (taps, taps))
    mp, mt = z[0], z[1]
    vp = torch.clamp(z[2] - mp * mp, min=0.0)
    vt = torch.clamp(z[3] - mt * mt, min=0.0)
    cov = z[4] - mp * mt
    den = torch.sqrt(vt) * torch.sqrt(vp)
    scc = torch.where(den == 0, 0.0, cov / torch.where(den == 0, 1.0, den))
    return scc.reshape(n, ch, *scc.shape[1:])


@factory
def spatial_correlation_coefficient(*, hp_filter: Optional[torch.Tensor] = None, window_size: int = 8,
                                    reduction: Optional[Literal["mean", "none"]] = "mean",
                                    nan_strategy: NanStrategy = "error") -> Metric:
    """Spatial correlation coefficient (Zhou et al. 1998): local correlation of high-pass filtered images.

    Each channel is high-pass filtered (``hp_filter``, symmetric borders, times
    2 as torchmetrics), then the correlation over zero-padded ``window_size``
    windows is mapped (0 where a variance is 0) and averaged.

    Args:
      hp_filter: 2-D high-pass kernel (a parameter of the metric). Default: the
        3x3 Laplacian ``[[-1,-1,-1],[-1,8,-1],[-1,-1,-1]]``.
      window_size: window side. Default 8.
      reduction: ``"mean"`` (default) over every map entry, or ``"none"``: per image.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, C, H, W)`` (or ``(N, H, W)``) images, ``H, W >= window_size``.

    Returns:
      float64 value (``(N,)`` for ``"none"``).

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.rand(1, 1, 16, 16, generator=g)
        >>> round(float(fmetrics.spatial_correlation_coefficient()(target * 2, target)), 4)
        1.0
    """
    name = "spatial_correlation_coefficient"
    if hp_filter is not None and (not isinstance(hp_filter, torch.Tensor) or hp_filter.dim() != 2):
        raise validation.fail(name, "hp_filter", "a 2-D tensor", repr(hp_filter))
    c.check_positive(name, "window_size", window_size, integer=True)
    c.check_choice(name, "reduction", reduction, ("mean", "none", None))

    def scores(preds, target):
        preds, target = c.real(name, "preds", preds), c.real(name, "target", target)
        if preds.dim() == 3:
            preds, target = preds.unsqueeze(1), target.unsqueeze(1)
        preds, target = c.images(name, preds, target)
        if window_size > preds.shape[2] or window_size > preds.shape[3]:
            raise validation.fail(name, "preds", f"images at least window_size={window_size} wide and high",
                                  f"shape {tuple(preds.shape)}")
        p, t = preds.to(torch.float32), target.to(torch.float32)
        hp = _laplacian(p.device) if hp_filter is None else hp_filter.to(device=p.device)
        maps = _scc_maps(p, t, hp, window_size).detach()
        return maps if reduction == "mean" else maps.mean(dim=(1, 2, 3))

    return c.scored(name, scores, "elementwise_mean" if reduction == "mean" else "none",
                    key=("scc", window_size), nan_strategy=nan_strategy, higher_is_better=True,
                    bounds=(-1.0, 1.0)).replace(state_key=None)


# ------------------------------------------------------------------ D_lambda, D_s, QNR

UQI_TAPS = tuple(c.gaussian_1d(11, 1.5).tolist())


def _uqi_sums(a: torch.Tensor, b: torch.Tensor, ok=None):
    """Sums of the UQI maps (11x11, sigma 1.5, valid) of channel pairs ``a[:, i]`` vs ``b[:, i]``: ``(C,)``, entries
    per image; the images that are not ``ok`` (nan_strategy) are left out."""
    if min(a.shape[2:]) < 11:
        raise ValueError("the universal image quality index needs images of at least 11 x 11")
    kernels = (UQI_TAPS, UQI_TAPS)
    from fmetrics.image.ssim import moment_sums
    mp, mt, vsum, cov = moment_sums(a, b, kernels)
    eps = torch.finfo(a.dtype).eps
    q = (4 * cov * mp * mt) / (vsum * (mp * mp + mt * mt) + eps)
    return _finite.keep(ok, q.to(torch.float64)).sum(dim=(0, 2, 3)), q.shape[2] * q.shape[3]


def _band_pairs(x: torch.Tensor, ok=None):
    """UQI sums between every pair of bands ``(L, L)`` (upper triangle), entries per image pair (``ok`` images)."""
    length = x.shape[1]
    table = torch.zeros(length, length, dtype=torch.float64, device=x.device)
    if length < 2:
        return table, 1
    rows, cols = torch.triu_indices(length, length, 1, device=x.device)  # pairs l < r, built on the device
    sums, entries = _uqi_sums(x.index_select(1, rows), x.index_select(1, cols), ok)
    table = table.index_put((rows, cols), sums)
    return table + table.T, entries


class DLambdaState(NamedTuple):
    q_preds: torch.Tensor   # float64 () or (L, L): sums of band-pair UQI maps of preds
    q_target: torch.Tensor  # float64 () or (L, L): the same for target
    n_preds: torch.Tensor   # int64 (): map entries per band pair, summed over images
    n_target: torch.Tensor  # int64 ()
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


def _dlambda_update(name, nan_strategy, state, preds, target):
    preds, target = c.real(name, "preds", preds), c.real(name, "target", target)
    if preds.dim() != 4 or target.dim() != 4 or preds.shape[:2] != target.shape[:2]:
        raise validation.fail(name, "target", f"(N, C, h, w) images with the (N, C) of preds {tuple(preds.shape)}",
                              tuple(target.shape))
    p, t = c.common_float(preds, target)
    screened = _finite.screen(nan_strategy, preds, target)
    ok = None if screened is None else screened[0]
    try:
        qp, ep = _band_pairs(p.detach(), ok)
        qt, et = _band_pairs(t.detach(), ok)
    except ValueError as err:
        raise validation.fail(name, "preds", "images of at least 11 x 11 (the UQI window)",
                              f"shapes {tuple(preds.shape)}, {tuple(target.shape)}") from err
    n = _finite.kept(ok, p.shape[0])
    return DLambdaState(state.q_preds + qp, state.q_target + qt, state.n_preds + ep * n, state.n_target + et * n,
                        _finite.counted(state.nonfinite, screened))


def _dlambda_value(state, p):
    m2 = state.q_preds / state.n_preds
    m1 = state.q_target / state.n_target
    diff = (m1 - m2).abs() ** p
    length = diff.shape[0] if diff.dim() else 1
    if length == 1:
        return diff.reshape(-1)[0] ** (1.0 / p)
    return (diff.sum() / (length * (length - 1))) ** (1.0 / p)


def _dl_init():
    return DLambdaState(_z(), _z(), _n(), _n(), _n())


DL_TAGS = DLambdaState(q_preds="sum", q_target="sum", n_preds="sum", n_target="sum", nonfinite="sum")


def _gathered_maps(tags, *fields):
    """The reducer's tags: fields whose shape comes from the first image (0-d until then) are gathered and
    merged (a rank that saw nothing holds a 0-d zero, which no all_reduce can add to a map)."""
    return tags._replace(**{f: None for f in fields})


DL_REDUCE = _gathered_maps(DL_TAGS, "q_preds", "q_target")


@factory
def spectral_distortion_index(*, p: int = 1, reduction: Reduction = "elementwise_mean",
                              nan_strategy: NanStrategy = "error") -> Metric:
    """Spectral distortion ``D_lambda = (1/(L(L-1)) sum_{l != r} |Q(t_l, t_r) - Q(p_l, p_r)|^p)^(1/p)``.

    ``Q`` is the universal image quality index (11x11 Gaussian windows, sigma
    1.5) between bands ``l`` and ``r``, averaged over every image seen
    (torchmetrics' definition); sum-mergeable band-pair tables.

    Args:
      p: order of the norm. Default 1.
      reduction: accepted for torchmetrics compatibility; the value is one number.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, target)``: ``(N, L, H, W)`` fused images and
      ``(N, L, h, w)`` target (multispectral) images, sides at least 11.

    Returns:
      float64 value in [0, 1].

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> target = torch.rand(1, 3, 16, 16, generator=g)
        >>> float(fmetrics.spectral_distortion_index()(target, target))
        0.0
    """
    name = "spectral_distortion_index"
    c.check_positive(name, "p", p, integer=True)
    c.check_choice(name, "reduction", reduction, c.REDUCTIONS)
    _finite.check_strategy(name, nan_strategy)

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        c.warn_empty(name, state.n_target)
        return _dlambda_value(state, p)

    return Metric(init=_dl_init, update=lambda s, preds, target: _dlambda_update(name, nan_strategy, s, preds, target),
                  merge=merge_fields(DL_TAGS), finalize=finalize, name=name, reductions=DL_REDUCE,
                  higher_is_better=False, bounds=(0.0, 1.0),
                  check=_finite.eager_check(name, ("preds", "target"), nan_strategy))


class DSState(NamedTuple):
    q_ms: torch.Tensor    # float64 () or (L,): per-band sums of UQI(ms, degraded pan) maps
    q_fused: torch.Tensor  # float64 () or (L,): per-band sums of UQI(preds, pan) maps
    n_ms: torch.Tensor    # int64 ()
    n_fused: torch.Tensor  # int64 ()
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


DS_TAGS = DSState(q_ms="sum", q_fused="sum", n_ms="sum", n_fused="sum", nonfinite="sum")
DS_NAMES = ("preds", "ms", "pan", "pan_lr")
DS_REDUCE = _gathered_maps(DS_TAGS, "q_ms", "q_fused")


def _ds_update(name, window_size, nan_strategy, state, preds, ms, pan, pan_lr=None):
    for arg, x in (("preds", preds), ("ms", ms), ("pan", pan)) + ((("pan_lr", pan_lr),) if pan_lr is not None else ()):
        c.real(name, arg, x)
        if x.dim() != 4 or x.shape[:2] != preds.shape[:2]:
            raise validation.fail(name, arg, f"(N, C, h, w) images with the (N, C) of preds {tuple(preds.shape)}",
                                  tuple(x.shape))
    if pan.shape[-2:] != preds.shape[-2:]:
        raise validation.fail(name, "pan", f"the spatial size of preds {tuple(preds.shape[-2:])}", tuple(pan.shape))
    if preds.shape[-2] % ms.shape[-2] or preds.shape[-1] % ms.shape[-1]:
        raise validation.fail(name, "ms", "a spatial size dividing that of preds", tuple(ms.shape))
    if pan_lr is not None and pan_lr.shape[-2:] != ms.shape[-2:]:
        raise validation.fail(name, "pan_lr", f"the spatial size of ms {tuple(ms.shape[-2:])}", tuple(pan_lr.shape))
    if window_size >= ms.shape[-2] or window_size >= ms.shape[-1]:
        raise validation.fail(name, "ms", f"a spatial size larger than window_size={window_size}", tuple(ms.shape))
    screened = _finite.screen(nan_strategy, preds, ms, pan, pan_lr)
    ok = None if screened is None else screened[0]
    dt = torch.promote_types(c.as_float(preds).dtype, c.as_float(ms).dtype)
    preds, ms, pan = preds.to(dt).detach(), ms.to(dt).detach(), pan.to(dt).detach()
    if pan_lr is None:
        degraded = F.interpolate(_uniform(pan, window_size), size=tuple(ms.shape[-2:]), mode="bilinear",
                                 align_corners=False, antialias=False)
    else:
        degraded = pan_lr.to(dt).detach()
    try:
        q1, e1 = _uqi_sums(ms, degraded, ok)
        q2, e2 = _uqi_sums(preds, pan, ok)
    except ValueError as err:
        raise validation.fail(name, "ms", "images of at least 11 x 11 (the UQI window)", tuple(ms.shape)) from err
    n = _finite.kept(ok, preds.shape[0])
    return DSState(state.q_ms + q1, state.q_fused + q2, state.n_ms + e1 * n, state.n_fused + e2 * n,
                   _finite.counted(state.nonfinite, screened))


def _ds_value(state, norm_order):
    m1 = state.q_ms / state.n_ms
    m2 = state.q_fused / state.n_fused
    return ((m1 - m2).abs() ** norm_order).mean() ** (1 / norm_order)


def _ds_init():
    return DSState(_z(), _z(), _n(), _n(), _n())


@factory
def spatial_distortion_index(*, norm_order: int = 1, window_size: int = 7,
                             reduction: Reduction = "elementwise_mean", nan_strategy: NanStrategy = "error") -> Metric:
    """Spatial distortion ``D_s = (mean_l |Q(ms_l, pan_lr_l) - Q(fused_l, pan_l)|^q)^(1/q)``.

    ``Q``: the universal image quality index averaged over every image seen;
    ``pan_lr``: given, or ``pan`` smoothed by a ``window_size`` mean filter and
    bilinearly resized to the ``ms`` size (torchmetrics' degradation, without torchvision).

    Args:
      norm_order: ``q``. Default 1.
      window_size: mean-filter side for degrading ``pan``. Default 7.
      reduction: ``"elementwise_mean"`` (default) over bands; ``"sum"``; ``"none"``/``None``
        (accepted as torchmetrics: with ``"sum"`` the bands are summed before the root).
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, ms, pan, pan_lr=None)``: fused ``(N, L, H, W)``,
      multispectral ``(N, L, h, w)``, panchromatic ``(N, L, H, W)`` and optional
      low-resolution panchromatic ``(N, L, h, w)`` images.

    Returns:
      float64 value.

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> pan = torch.rand(1, 2, 32, 32, generator=g)
        >>> ms = torch.rand(1, 2, 16, 16, generator=g)
        >>> round(float(fmetrics.spatial_distortion_index()(pan, ms, pan, ms)), 4)
        0.0
    """
    name = "spatial_distortion_index"
    c.check_positive(name, "norm_order", norm_order, integer=True)
    c.check_positive(name, "window_size", window_size, integer=True)
    c.check_choice(name, "reduction", reduction, c.REDUCTIONS)

    _finite.check_strategy(name, nan_strategy)

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        c.warn_empty(name, state.n_ms)
        if reduction == "sum":
            m1, m2 = state.q_ms / state.n_ms, state.q_fused / state.n_fused
            return ((m1 - m2).abs() ** norm_order).sum() ** (1 / norm_order)
        return _ds_value(state, norm_order)

    return Metric(init=_ds_init, update=lambda s, *a: _ds_update(name, window_size, nan_strategy, s, *a),
                  merge=merge_fields(DS_TAGS), finalize=finalize, name=name, reductions=DS_REDUCE,
                  higher_is_better=False, bounds=(0.0, 1.0), check=_finite.eager_check(name, DS_NAMES, nan_strategy))


class QNRState(NamedTuple):
    d_lambda: DLambdaState
    d_s: DSState


@factory
def quality_with_no_reference(*, alpha: float = 1, beta: float = 1, norm_order: int = 1, window_size: int = 7,
                              reduction: Reduction = "elementwise_mean", nan_strategy: NanStrategy = "error") -> Metric:
    """QNR ``(1 - D_lambda)^alpha (1 - D_s)^beta`` (Alparone et al. 2008).

    ``D_lambda`` compares preds with ``ms`` (`spectral_distortion_index` with
    ``p = norm_order``); ``D_s`` as `spatial_distortion_index`.

    Args:
      alpha, beta: exponents (>= 0). Default 1, 1.
      norm_order, window_size, reduction: as in `spatial_distortion_index`.
      nan_strategy: NaN / inf in the inputs: ``"error"`` (default) raises (at once on CPU, else in
        ``finalize``); ``"warn"`` / ``"ignore"`` leave such images out (with / without a warning);
        ``"disable"`` lets NaN propagate (docs/image.md, "Bad input").

    Inputs:
      ``update(state, preds, ms, pan, pan_lr=None)`` as `spatial_distortion_index`.

    Returns:
      float64 value in [0, 1].

    Example::

        >>> g = torch.Generator().manual_seed(0)
        >>> pan = torch.rand(1, 2, 32, 32, generator=g)
        >>> ms = torch.rand(1, 2, 16, 16, generator=g)
        >>> round(float(fmetrics.quality_with_no_reference()(pan, ms, pan, ms)), 4)
        0.7694
    """
    name = "quality_with_no_reference"
    c.check_positive(name, "alpha", alpha, allow_zero=True)
    c.check_positive(name, "beta", beta, allow_zero=True)
    c.check_positive(name, "norm_order", norm_order, integer=True)
    c.check_positive(name, "window_size", window_size, integer=True)
    c.check_choice(name, "reduction", reduction, c.REDUCTIONS)

    _finite.check_strategy(name, nan_strategy)

    def update(state, preds, ms, pan, pan_lr=None):
        ds = _ds_update(name, window_size, nan_strategy, state.d_s, preds, ms, pan, pan_lr)
        dl = _dlambda_update(name, nan_strategy, state.d_lambda, preds, ms)
        return QNRState(dl, ds)

    def finalize(state):
        _finite.report(name, nan_strategy, state.d_s.nonfinite)  # D_s screens every input
        c.warn_empty(name, state.d_s.n_ms)
        return (1 - _dlambda_value(state.d_lambda, norm_order)) ** alpha * (1 - _ds_value(state.d_s, norm_order)) ** beta

    tags = QNRState(DL_TAGS, DS_TAGS)
    return Metric(init=lambda: QNRState(_dl_init(), _ds_init()), update=update, merge=merge_fields(tags),
                  finalize=finalize, name=name, reductions=QNRState(DL_REDUCE, DS_REDUCE), higher_is_better=True,
                  bounds=(0.0, 1.0), check=_finite.eager_check(name, DS_NAMES, nan_strategy))
