"""Shared pieces of the image metrics: input checks, the per-image score state, Gaussian filtering.

* `check_*`: configuration and input checks (metadata only: no host sync).
* `scored(...)`: a `Metric` whose update turns a batch into scores with the
  batch first (one per image, or a map per image) and keeps their float64
  sum and count (``reduction="elementwise_mean"`` / ``"sum"``: sum-mergeable)
  or the scores themselves as chunks (``"none"``).
* `filter_valid`: separable filtering with "valid" borders, by shifted
  multiply-adds over the last 2 (or 3) axes: on CPU ~20x faster than
  ``F.conv2d`` with a 1-channel kernel, and exact in the input's dtype.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional, Sequence

import torch

from fmetrics import validation
from fmetrics.image import _finite
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks, merge_fields

REDUCTIONS = ("elementwise_mean", "sum", "none", None)


# ------------------------------------------------------------------ configuration checks

def check_choice(name: str, arg: str, value, allowed: tuple):
    if value not in allowed:
        raise validation.fail(name, arg, f"one of {allowed}", repr(value))
    return value


def check_bool(name: str, arg: str, value) -> bool:
    if not isinstance(value, bool):
        raise validation.fail(name, arg, "a bool", repr(value))
    return value


def check_positive(name: str, arg: str, value, integer: bool = False, allow_zero: bool = False):
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not (value > 0 or (allow_zero and value == 0)):
        kind = "int" if integer else "number"
        raise validation.fail(name, arg, f"a {'non-negative' if allow_zero else 'positive'} {kind}", repr(value))
    return value


def check_data_range(name: str, data_range, required: bool = False):
    """``None`` (inferred per image), a positive number, or a ``(min, max)`` pair (inputs clamped to it)."""
    if data_range is None:
        if required:
            raise validation.fail(name, "data_range", "a positive number or a (min, max) pair", "None")
        return None
    if isinstance(data_range, (tuple, list)):
        if (len(data_range) != 2 or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            for v in data_range) or not data_range[1] > data_range[0]):
            raise validation.fail(name, "data_range", "a (min, max) pair with min < max", repr(data_range))
        return (float(data_range[0]), float(data_range[1]))
    return float(check_positive(name, "data_range", data_range))


def check_pair_sizes(name: str, arg: str, value, n: int, integer: bool, odd: bool = False) -> tuple:
    """``value`` as an ``n``-tuple of positive numbers (a scalar is repeated)."""
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * n
    if len(values) != n:
        raise validation.fail(name, arg, f"one value or {n} values", repr(value))
    for v in values:
        check_positive(name, arg, v, integer=integer)
        if odd and v % 2 == 0:
            raise validation.fail(name, arg, "odd sizes", repr(value))
    return values


# ------------------------------------------------------------------ input checks

def real(name: str, arg: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise validation.fail(name, arg, "a tensor", type(x).__name__)
    if x.is_complex() or x.dtype == torch.bool:
        raise validation.fail(name, arg, "a real (float or integer) tensor", f"dtype {x.dtype}")
    return x


def images(name: str, preds, target, ndims: Sequence[int] = (4,), same_dtype: bool = False):
    """Checks two image batches of one shape ``(N, C, H, W)`` (or ``(N, C, D, H, W)`` where allowed)."""
    preds, target = real(name, "preds", preds), real(name, "target", target)
    shapes = " or ".join({4: "(N, C, H, W)", 5: "(N, C, D, H, W)", 3: "(N, H, W)"}[d] for d in ndims)
    if preds.dim() not in ndims:
        raise validation.fail(name, "preds", f"a batch of images of shape {shapes}", f"shape {tuple(preds.shape)}")
    if preds.shape != target.shape:
        raise validation.fail(name, "target", f"the shape of preds {tuple(preds.shape)}", tuple(target.shape))
    if same_dtype and preds.dtype != target.dtype:
        raise validation.fail(name, "target", f"the dtype of preds ({preds.dtype})", target.dtype)
    check_pixels(name, "preds", preds)
    return preds, target


def check_pixels(name: str, arg: str, x: torch.Tensor) -> None:
    """Images with no channel or no pixel (``C``, ``H`` or ``W`` of 0) have no value: an error. An empty batch
    (``N = 0``) is no data: the empty-input rule (docs/conventions.md)."""
    if 0 in x.shape[1:]:
        raise validation.fail(name, arg, "images with at least one channel and one pixel (an image with no pixel "
                              "has no value; an empty batch (N = 0) is fine)", f"shape {tuple(x.shape)}")


def as_float(x: torch.Tensor) -> torch.Tensor:
    """Integer images as float32 (a copy); float images as they are."""
    return x if x.is_floating_point() else x.to(torch.float32)


def common_float(preds: torch.Tensor, target: torch.Tensor):
    p, t = as_float(preds), as_float(target)
    dt = torch.promote_types(p.dtype, t.dtype)
    return p.to(dt), t.to(dt)


def clamp_range(x: torch.Tensor, data_range) -> torch.Tensor:
    if isinstance(data_range, tuple):
        return x.clamp(data_range[0], data_range[1])
    return x


def range_value(data_range, preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The data range as a tensor broadcasting against per-image values: given, or inferred per image.

    Inferred: ``max(preds.max - preds.min, target.max - target.min)`` over each image (torchmetrics' rule,
    per image instead of per batch); when both images are constant, the gap between them
    ``|preds - target|``; when they are one and the same constant, 1 (any range gives SSIM 1 there).
    So a constant pair is scored instead of giving 0 / 0, e.g. ``p = t = 0`` scores 1.
    """
    if data_range is not None:  # a fill on the device, not a host-to-device copy
        return preds.new_full((), data_range[1] - data_range[0] if isinstance(data_range, tuple) else data_range)
    dims = tuple(range(1, preds.dim()))
    if preds.shape[0] == 0 or preds[0].numel() == 0:
        return torch.zeros(preds.shape[0], dtype=preds.dtype, device=preds.device)
    p_hi, p_lo = torch.amax(preds, dim=dims), torch.amin(preds, dim=dims)
    t_hi, t_lo = torch.amax(target, dim=dims), torch.amin(target, dim=dims)
    span = torch.maximum(p_hi - p_lo, t_hi - t_lo)
    span = torch.where(span > 0, span, torch.maximum(p_hi, t_hi) - torch.minimum(p_lo, t_lo))
    return torch.where(span > 0, span, 1.0)


# ------------------------------------------------------------------ per-image score state

class ScoreSum(NamedTuple):
    total: torch.Tensor      # float64 (): sum of the scores
    count: torch.Tensor      # int64 (): number of scores
    nonfinite: torch.Tensor  # int64 (): non-finite input entries (nan_strategy)


class ScoreCat(NamedTuple):
    values: tuple            # chunks of scores, batch first
    valid: tuple             # chunks (n,) bool: False for the images left out (nan_strategy)
    nonfinite: torch.Tensor  # int64 ()


def warn_empty(name: str, n) -> None:
    """The empty-input rule (docs/conventions.md): a mean over no image is NaN, and ``finalize`` says so."""
    if int(n) == 0:
        validation.warn_empty(name, stacklevel=3)


def scored(name: str, scores: Callable, reduction, key: tuple, *, nan_strategy: str = "error",
           names: tuple = ("preds", "target"), empty_shape: tuple = (0,), post: Optional[Callable] = None,
           **metadata) -> Metric:
    """A metric over ``scores(*inputs) -> tensor`` with the batch first.

    ``reduction``: ``"elementwise_mean"`` (mean of every score entry), ``"sum"``,
    ``"none"``/``None`` (the scores, joined along the batch). ``post`` maps the
    reduced float64 value (e.g. PSNR from a mean squared error). Images with
    non-finite entries follow ``nan_strategy`` (`fmetrics.image._finite`; ``names``: the inputs in its messages).
    """
    check_choice(name, "reduction", reduction, REDUCTIONS)
    _finite.check_strategy(name, nan_strategy)
    post = post or (lambda v: v)
    zero = lambda: torch.zeros((), dtype=torch.int64)  # noqa: E731
    if reduction in ("elementwise_mean", "sum"):
        def init():
            return ScoreSum(torch.zeros((), dtype=accum_dtype()), zero(), zero())

        def update(state, *inputs):
            values = scores(*inputs)
            screened = _finite.screen(nan_strategy, *inputs)
            ok = None if screened is None else screened[0]
            per_image = math.prod(values.shape[1:])
            return ScoreSum(state.total + _finite.keep(ok, values).sum(dtype=state.total.dtype),
                            state.count + _finite.kept(ok, values.shape[0]) * per_image,
                            _finite.counted(state.nonfinite, screened))

        def finalize(state):
            _finite.report(name, nan_strategy, state.nonfinite)
            if reduction == "sum":
                return post(state.total)
            warn_empty(name, state.count)
            return post(state.total / state.count)

        tags = ScoreSum(total="sum", count="sum", nonfinite="sum")
    else:
        def init():
            return ScoreCat((), (), zero())

        def update(state, *inputs):
            values = scores(*inputs).detach().to(accum_dtype())
            screened = _finite.screen(nan_strategy, *inputs)
            ok = None if screened is None else screened[0]
            return ScoreCat((values,), (_finite.flags(ok, values),), _finite.counted(state.nonfinite, screened))

        def finalize(state):
            _finite.report(name, nan_strategy, state.nonfinite)
            values = cat_chunks(state.values, torch.zeros(empty_shape, dtype=accum_dtype()))
            return post(values[cat_chunks(state.valid, torch.zeros(0, dtype=torch.bool))])

        tags = ScoreCat(values="cat", valid="cat", nonfinite="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("image.scored", *key, reduction, nan_strategy == "disable"), reductions=tags,
                  check=_finite.eager_check(name, names, nan_strategy), **metadata)


# ------------------------------------------------------------------ filtering

def gaussian_1d(size: int, sigma: float, dtype=torch.float64) -> torch.Tensor:
    """Normalized Gaussian taps ``exp(-x^2 / 2 sigma^2)``, ``x = -(size-1)/2 ... (size-1)/2``."""
    x = torch.arange(size, dtype=torch.float64) - (size - 1) / 2
    g = torch.exp(-(x ** 2) / (2 * sigma ** 2))
    return (g / g.sum()).to(dtype)


def gaussian_size(sigma: float) -> int:
    """Odd window of a Gaussian truncated at 3.5 sigma (scikit-image, torchmetrics): 11 for sigma = 1.5."""
    return int(3.5 * sigma + 0.5) * 2 + 1


def _filter_axis(x: torch.Tensor, taps: Sequence[float], axis: int) -> torch.Tensor:
    k = len(taps)
    n = x.shape[axis] - k + 1
    out = x.narrow(axis, 0, n) * taps[0]
    traced = validation.traced()
    for i in range(1, k):
        out = out + x.narrow(axis, i, n) * taps[i] if traced else out.add_(x.narrow(axis, i, n), alpha=taps[i])
    return out


def filter_valid(x: torch.Tensor, kernels: Sequence[Sequence[float]]) -> torch.Tensor:
    """Separable filtering of the last ``len(kernels)`` axes with "valid" borders (no padding).

    ``kernels[i]`` are the taps (Python floats) along axis ``-len(kernels) + i``;
    the output shrinks by ``len(taps) - 1`` along each axis.
    """
    nd = len(kernels)
    for i, taps in enumerate(kernels):
        x = _filter_axis(x, taps, x.dim() - nd + i)
    return x


CHUNK_ELEMENTS = 1 << 18  # per input and chunk: one 3x256x256 image; its four moment planes stay in L2/L3


def chunked(fn: Callable, n: Optional[int], *xs: torch.Tensor):
    """``fn(*xs)`` computed over batch chunks of ``n`` images in eager mode (cache-sized work), whole when traced.

    ``n=None``: as many images as fit in `CHUNK_ELEMENTS` entries per input (at least one). On CPU the
    filtering is bound by memory traffic: one 3x256x256 image at a time runs ~2x faster than 8 at a time.
    """
    if n is None:
        if xs[0].device.type != "cpu":  # accelerators: one launch per op over the whole batch is faster
            return fn(*xs)
        n = max(1, CHUNK_ELEMENTS // max(1, math.prod(xs[0].shape[1:])))
    if validation.traced() or xs[0].shape[0] <= n:
        return fn(*xs)
    parts = [fn(*c) for c in zip(*(x.split(n) for x in xs))]
    if isinstance(parts[0], tuple):
        return tuple(torch.cat(p) for p in zip(*parts))
    return torch.cat(parts)


def log10(x):
    return torch.log10(x) if isinstance(x, torch.Tensor) else math.log10(x)
