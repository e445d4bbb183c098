"""Perceptual path length (Karras et al. 2019), as torchmetrics' ``perceptual_path_length``.

``PPL = E[ D(G(z1), G(I(z1, z2, eps))) / eps^2 ]``: ``G`` the generator (images in [0, 255], rescaled to
[-1, 1] for ``D``), ``I`` the interpolation (``lerp`` / ``slerp_any`` / ``slerp_unit``) a step ``eps`` from
``z1`` towards ``z2``, ``D`` the similarity network (LPIPS in the paper). The distances between the
``lower_discard`` and ``upper_discard`` quantiles (``interpolation="lower"``) are kept; the value is their
mean, their (unbiased) std and the kept distances. The quantiles need every distance, so the state keeps
them (a ``cat`` field). The latent pairs are inputs (`sample_latents` draws them as torchmetrics does), so
``update`` is pure; generator and similarity network are the metric's parameters.
"""
from __future__ import annotations

import math
import warnings
from typing import Literal, NamedTuple, Optional

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

METHODS = ("lerp", "slerp_any", "slerp_unit")


class PPLState(NamedTuple):
    distances: tuple         # chunks (n,) float64
    valid: tuple             # chunks (n,) bool: False for pairs left out (nan_strategy)
    nonfinite: torch.Tensor  # int64 (): non-finite latent entries


def interpolate(z1: torch.Tensor, z2: torch.Tensor, epsilon: float, method: str) -> torch.Tensor:
    """The point a step ``epsilon`` from ``z1`` towards ``z2`` (torchmetrics' ``_interpolate``, without masks).

    ``slerp_any``: ``(sin((1 - e) w) z1 + sin(e w) z2) / sin w`` with ``w`` the angle between them (lerp where
    a latent is ~0 or they are ~collinear); ``slerp_unit``: that point scaled to unit norm.
    """
    lerp = z1 + (z2 - z1) * epsilon
    if method == "lerp":
        return lerp
    eps = 1e-7
    u1 = z1 / (z1 ** 2).sum(-1, keepdim=True).sqrt().clamp_min(eps)
    u2 = z2 / (z2 ** 2).sum(-1, keepdim=True).sqrt().clamp_min(eps)
    d = (u1 * u2).sum(-1, keepdim=True)
    use_lerp = ((u1.norm(dim=-1, keepdim=True) < eps) | (u2.norm(dim=-1, keepdim=True) < eps)
                | (d > 1 - eps) | (d < -1 + eps))
    omega = d.acos()
    denom = omega.sin().clamp_min(eps)
    out = ((1 - epsilon) * omega).sin() / denom * z1 + (epsilon * omega).sin() / denom * z2
    out = torch.where(use_lerp, lerp, out)
    if method == "slerp_unit":
        out = out / (out ** 2).sum(-1, keepdim=True).sqrt().clamp_min(eps)
    return out


def resize_images(x: torch.Tensor, size: int) -> torch.Tensor:
    """To ``size x size``: area when both sides shrink, else bilinear (torchmetrics' LPIPS resize)."""
    if x.shape[-1] > size and x.shape[-2] > size:
        return F.interpolate(x, (size, size), mode="area")
    return F.interpolate(x, (size, size), mode="bilinear", align_corners=False)


def sample_latents(source, num_samples: Optional[int] = None, conditional: Optional[bool] = None):
    """``(z1, z2, labels)`` drawn as torchmetrics draws them: ``generator.sample(num_samples)`` twice, then
    ``torch.randint(0, generator.num_classes, (num_samples,))`` when ``conditional`` (else ``labels=None``).

    ``source``: a `perceptual_path_length` metric (its generator, ``num_samples`` and ``conditional`` are the
    defaults) or a generator. Uses the global RNG (seed it with ``torch.manual_seed`` for a repeatable draw)."""
    if isinstance(source, Metric):
        kw = source.recipe.arguments
        generator = kw["generator"]
        num_samples = kw["num_samples"] if num_samples is None else num_samples
        conditional = kw["conditional"] if conditional is None else conditional
    else:
        generator = source
    if num_samples is None:
        raise validation.fail("sample_latents", "num_samples", "a positive int (given a generator)", "None")
    z1, z2 = generator.sample(num_samples), generator.sample(num_samples)
    labels = torch.randint(0, generator.num_classes, (num_samples,)) if conditional else None
    return z1, z2, labels


def _check_discard(name: str, arg: str, value) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not 0 <= value <= 1):
        raise validation.fail(name, arg, "a number in [0, 1] or None", repr(value))


@factory
def perceptual_path_length(
    *,
    generator: torch.nn.Module,
    sim_net: torch.nn.Module,
    num_samples: int = 10_000,
    conditional: bool = False,
    batch_size: int = 64,
    interpolation_method: Literal["lerp", "slerp_any", "slerp_unit"] = "lerp",
    epsilon: float = 1e-4,
    resize: Optional[int] = 64,
    lower_discard: Optional[float] = 0.01,
    upper_discard: Optional[float] = 0.99,
    nan_strategy: NanStrategy = "error",
) -> Metric:
    """Perceptual path length ``E[D(G(z1), G(I(z1, z2, eps))) / eps^2]`` over the kept quantile range.

    Args:
      generator: an ``nn.Module``: ``forward(z)`` (``forward(z, labels)`` when ``conditional``) returns images
        ``(N, C, H, W)`` in [0, 255]; ``sample(n)`` returns ``(n, z_size)`` latents (used by `sample_latents`);
        ``num_classes`` (an int) when ``conditional``.
      sim_net: an ``nn.Module``: ``sim_net(img1, img2)`` with images in [-1, 1] returns one distance per pair
        (``(N,)`` or any shape with N entries), e.g. an LPIPS network (docs/image.md, "PPL").
      num_samples: how many latent pairs `sample_latents(metric)` draws. Default 10000.
      conditional: the generator takes class labels. Default False.
      batch_size: pairs per generator forward (``2 * batch_size`` images). Default 64.
      interpolation_method: ``"lerp"`` (default), ``"slerp_any"`` or ``"slerp_unit"``.
      epsilon: the interpolation step (a positive float). Default 1e-4.
      resize: images are resized to ``resize x resize`` before ``sim_net`` (area when shrinking, else
        bilinear, as torchmetrics' LPIPS networks); ``None``: as generated. Default 64.
      lower_discard, upper_discard: quantiles (``interpolation="lower"``) outside which distances are
        discarded; ``None``: keep all on that side. Defaults 0.01 and 0.99.
      nan_strategy: NaN / inf in the latents: ``"error"`` (default), ``"warn"`` / ``"ignore"`` (leave such pairs
        out), ``"disable"`` (docs/image.md, "Bad input").

    Inputs:
      ``update(state, z1, z2, labels=None)``: latents ``(N, z_size)`` each (``sample_latents`` draws them) and,
      when ``conditional``, int labels ``(N,)``.

    Returns:
      ``(mean, std, distances)``: float64; the kept distances in the order seen. NaN (with a warning) and an
      empty tensor on no pairs.

    Example::

        >>> class Gen(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__(); self.lin = torch.nn.Linear(2, 3 * 4 * 4)
        ...     def forward(self, z):
        ...         return 255 * torch.sigmoid(self.lin(z)).reshape(-1, 3, 4, 4)
        ...     def sample(self, n):
        ...         return torch.randn(n, 2)
        >>> class L2(torch.nn.Module):
        ...     def forward(self, a, b):
        ...         return ((a - b) ** 2).flatten(1).mean(1)
        >>> _ = torch.manual_seed(0)
        >>> m = fmetrics.perceptual_path_length(generator=Gen(), sim_net=L2(), num_samples=20, resize=None)
        >>> mean, std, d = m(*fmetrics.image.ppl.sample_latents(m))
        >>> d.shape
        torch.Size([19])
    """
    name = "perceptual_path_length"
    if not isinstance(generator, torch.nn.Module):
        raise validation.fail(name, "generator", "an nn.Module with forward(z) -> images and sample(n) -> latents",
                              type(generator).__name__)
    if not callable(getattr(generator, "sample", None)):
        raise validation.fail(name, "generator", "a generator with a sample(num_samples) method returning "
                              "(num_samples, z_size) latents", type(generator).__name__)
    if not isinstance(sim_net, torch.nn.Module):
        raise validation.fail(name, "sim_net", "an nn.Module sim_net(img1, img2) -> distances (nothing is "
                              "downloaded: pass your LPIPS network)", repr(sim_net))
    c.check_positive(name, "num_samples", num_samples, integer=True)
    c.check_bool(name, "conditional", conditional)
    if conditional and (isinstance(getattr(generator, "num_classes", None), bool)
                        or not isinstance(getattr(generator, "num_classes", None), int)):
        raise validation.fail(name, "generator", "an int num_classes attribute with conditional=True",
                              repr(getattr(generator, "num_classes", None)))
    c.check_positive(name, "batch_size", batch_size, integer=True)
    c.check_choice(name, "interpolation_method", interpolation_method, METHODS)
    if isinstance(epsilon, bool) or not isinstance(epsilon, float) or not epsilon > 0:
        raise validation.fail(name, "epsilon", "a positive float", repr(epsilon))
    if resize is not None:
        c.check_positive(name, "resize", resize, integer=True)
    _check_discard(name, "lower_discard", lower_discard)
    _check_discard(name, "upper_discard", upper_discard)
    _finite.check_strategy(name, nan_strategy)
    gen, net = eval_view(generator, name, "generator"), eval_view(sim_net, name, "sim_net")

    def distances(z1, z2, labels):
        z2 = interpolate(z1, z2, epsilon, interpolation_method)
        out = []
        for i in range(0, z1.shape[0], batch_size):
            a, b = z1[i:i + batch_size], z2[i:i + batch_size]
            z = torch.cat((a, b))
            imgs = gen(z, torch.cat((labels[i:i + batch_size],) * 2)) if conditional else gen(z)
            x, y = (2 * (imgs / 255) - 1).chunk(2)
            if resize is not None:
                x, y = resize_images(x, resize), resize_images(y, resize)
            out.append(net(x, y).reshape(a.shape[0]) / epsilon ** 2)
        return torch.cat(out) if out else z1.new_zeros(0)

    def update(state, z1, z2, labels=None):
        for arg, z in (("z1", z1), ("z2", z2)):
            z = c.real(name, arg, z)
            if z.dim() < 2 or not z.is_floating_point():
                raise validation.fail(name, arg, "float latents (N, z_size)", f"{z.dtype} of shape {tuple(z.shape)}")
        if z1.shape != z2.shape:
            raise validation.fail(name, "z2", f"the shape of z1 {tuple(z1.shape)}", tuple(z2.shape))
        if conditional:
            if (not isinstance(labels, torch.Tensor) or labels.shape != z1.shape[:1]
                    or labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool):
                raise validation.fail(name, "labels", f"int class labels of shape ({z1.shape[0]},) with "
                                      "conditional=True", "None" if labels is None else repr(labels)[:80])
        elif labels is not None:
            raise validation.fail(name, "labels", "None with conditional=False", type(labels).__name__)
        with torch.no_grad():
            d = distances(z1, z2, labels).detach().to(accum_dtype())
        screened = _finite.screen(nan_strategy, z1, z2)
        ok = None if screened is None else screened[0]
        return PPLState(state.distances + (d,), state.valid + (_finite.flags(ok, d),),
                        _finite.counted(state.nonfinite, screened))

    def finalize(state):
        _finite.report(name, nan_strategy, state.nonfinite)
        d = cat_chunks(state.distances, torch.zeros(0, dtype=accum_dtype()))
        d = d[cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))]
        if d.numel() == 0:
            c.warn_empty(name, 0)
            nan = torch.full((), float("nan"), dtype=accum_dtype())
            return nan, nan, d
        if nan_strategy != "disable" and not math.isfinite(float(d.sum())):
            raise ValueError(f"{name}: the generator / sim_net gave non-finite distances for finite latents "
                             f"({validation.quote(d[~torch.isfinite(d)])}); check the networks")
        lo = torch.quantile(d, lower_discard, interpolation="lower") if lower_discard is not None else -math.inf
        hi = torch.quantile(d, upper_discard, interpolation="lower") if upper_discard is not None else math.inf
        d = d[(d >= lo) & (d <= hi)]
        if d.numel() < 2:
            warnings.warn(f"{name}: fewer than 2 distances were kept ({d.numel()}); the std is NaN",
                          UserWarning, stacklevel=2)
        return d.mean(), d.std(), d

    tags = PPLState(distances="cat", valid="cat", nonfinite="sum")
    return Metric(init=lambda: PPLState((), (), torch.zeros((), dtype=torch.int64)), update=update,
                  merge=merge_fields(tags), finalize=finalize, name=name, reductions=tags, higher_is_better=False,
                  check=_finite.eager_check(name, ("z1", "z2"), nan_strategy))
