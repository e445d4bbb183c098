"""Hausdorff distance between the edges of predicted and target masks (exact distance transforms in torch)."""
from __future__ import annotations

import math

from typing import Literal, NamedTuple, Optional, Sequence

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.segmentation.overlap import _check_config, count_invalid, report, value_check, warn_empty
from fmetrics.state import merge_fields

__all__ = ["hausdorff_distance"]

_BLOCK = 1 << 24  # elements of one broadcast in a distance-transform pass


class DistanceState(NamedTuple):
    total: torch.Tensor  # float64: sum of the per (sample, class) distances
    count: torch.Tensor  # int64: (sample, class) pairs with an edge on either side
    invalid: torch.Tensor  # int64: input entries that broke the value rule (deferred checks)


def _masks(name, x, num_classes, input_format, include_background, what):
    if input_format == "index":
        if x.is_floating_point() or x.is_complex():
            raise validation.fail(name, what, "an integer class-index tensor [N, ...]", x.dtype)
        m = x[:, None] == torch.arange(num_classes, device=x.device).reshape((1, -1) + (1,) * (x.dim() - 1))
    else:
        if x.dim() < 3 or x.shape[1] != num_classes:
            raise validation.fail(name, what, f"a one-hot tensor [N, {num_classes}, ...]", tuple(x.shape))
        m = x != 0
    return m if include_background else m[:, 1:]


def edges(mask: torch.Tensor, dims: int) -> torch.Tensor:
    """Pixels of ``mask`` with a 2*dims-neighbour outside it (the image border counts as outside)."""
    inner = mask
    for d in range(mask.dim() - dims, mask.dim()):
        n = mask.shape[d]
        zero = torch.zeros_like(mask.narrow(d, 0, 1))
        up = torch.cat([mask.narrow(d, 1, n - 1), zero], d)
        down = torch.cat([zero, mask.narrow(d, 0, n - 1)], d)
        inner = inner & up & down
    return mask & ~inner


def distance_to(seeds: torch.Tensor, dims: int, metric: str, spacing: Sequence[float]) -> torch.Tensor:
    """Exact distance (float64) from every pixel to the nearest ``True`` of ``seeds`` (``inf`` without one).

    Separable passes, one per spatial axis: ``f(i) <- min_j f(j) (+|max) cost(i - j)``, with squared
    distances for ``"euclidean"`` (Felzenszwalb-Huttenlocher's decomposition, done by broadcast).
    """
    f = torch.where(seeds, 0.0, torch.inf).to(torch.float64)
    lead = seeds.dim() - dims
    for k in range(dims):
        d = lead + k
        n = f.shape[d]
        idx = torch.arange(n, device=f.device, dtype=torch.float64)
        gap = (idx[:, None] - idx[None, :]).abs() * float(spacing[k])  # [i, j]
        cost = gap * gap if metric == "euclidean" else gap
        g = f.movedim(d, -1)
        shape = g.shape
        g = g.reshape(math.prod(shape[:-1]), n)
        rows = max(1, _BLOCK // max(n * n, 1))
        parts = []
        for a in range(0, g.shape[0], rows):
            blk = g[a:a + rows, None, :]  # [r, 1, j]
            v = torch.maximum(blk, cost) if metric == "chessboard" else blk + cost
            parts.append(v.amin(-1))
        g = torch.cat(parts, 0) if len(parts) > 1 else (parts[0] if parts else g)
        f = g.reshape(shape).movedim(-1, d)
    return f.sqrt() if metric == "euclidean" else f


@factory
def hausdorff_distance(*, num_classes: int, include_background: bool = False,
                       distance_metric: Literal["euclidean", "chessboard", "taxicab"] = "euclidean",
                       spacing: Optional[Sequence[float]] = None, directed: bool = False,
                       input_format: Literal["one-hot", "index"] = "one-hot") -> Metric:
    """Hausdorff distance between mask edges, ``max(sup_p inf_t d(p, t), sup_t inf_p d(p, t))``, averaged.

    Per sample and class, the edges of the predicted and target masks (pixels with a
    4-neighbour, 6 in 3-D, outside the mask or the image: torchmetrics' ``mask_edges``) are
    compared; ``directed=True`` keeps the first term (predicted edges to the target's). The value is
    the mean over (sample, class) pairs, as torchmetrics' ``HausdorffDistance``; a pair where one
    side has no edge scores ``inf``; a pair where neither has one is skipped (torchmetrics fails).

    Args:
      num_classes: number of classes C (required).
      include_background: count class 0 (default ``False``, as torchmetrics).
      distance_metric: ``"euclidean"`` (default), ``"chessboard"`` (max of axis gaps) or ``"taxicab"``
        (sum of axis gaps).
      spacing: pixel spacing per spatial axis (default ``None``: 1 on every axis).
      directed: only predicted-to-target distances (default ``False``: symmetric).
      input_format: ``"one-hot"`` (default: ``[N, C, *spatial]`` 0/1) or ``"index"`` (``[N, *spatial]``).

    Inputs:
      ``update(state, preds, target)``, both in ``input_format``, equal shapes, 2-D or 3-D (any
      number of spatial axes works; torchmetrics accepts 2-D only).

    Returns:
      float64 scalar (``NaN`` when no pair scored).

    Example::

        >>> preds = torch.zeros(1, 2, 5, 5, dtype=torch.long)
        >>> target = torch.zeros(1, 2, 5, 5, dtype=torch.long)
        >>> preds[0, 1, 1:3, 1:3] = 1
        >>> target[0, 1, 1:4, 1:4] = 1
        >>> hausdorff_distance(num_classes=2)(preds, target)
        tensor(1.4142, dtype=torch.float64)
        >>> hausdorff_distance(num_classes=2, distance_metric="taxicab")(preds, target)
        tensor(2., dtype=torch.float64)
    """
    name = "hausdorff_distance"
    _check_config(name, num_classes, include_background, input_format)
    if distance_metric not in ("euclidean", "chessboard", "taxicab"):
        raise validation.fail(name, "distance_metric", "'euclidean', 'chessboard' or 'taxicab'", repr(distance_metric))
    if spacing is not None:
        spacing = [float(v) for v in (spacing.tolist() if isinstance(spacing, torch.Tensor) else spacing)]
        if any(not v > 0 for v in spacing):
            raise validation.fail(name, "spacing", "None or positive floats, one per spatial axis", repr(spacing))
    if not isinstance(directed, bool):
        raise validation.fail(name, "directed", "a bool", repr(directed))
    tags = DistanceState("sum", "sum", "sum")

    def init():
        return DistanceState(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64),
                             torch.zeros((), dtype=torch.int64))

    def update(s, preds, target):
        if not isinstance(preds, torch.Tensor) or not isinstance(target, torch.Tensor) or preds.shape != target.shape:
            raise validation.fail(name, "preds, target", "tensors of equal shapes",
                                  f"{getattr(preds, 'shape', preds)} and {getattr(target, 'shape', target)}")
        p = _masks(name, preds.detach(), num_classes, input_format, include_background, "preds")
        t = _masks(name, target.detach(), num_classes, input_format, include_background, "target")
        dims = p.dim() - 2
        if dims < 1:
            raise validation.fail(name, "preds", "at least one spatial dimension", tuple(preds.shape))
        sp = spacing if spacing is not None else [1.0] * dims
        if len(sp) != dims:
            raise validation.fail(name, "spacing", f"{dims} values (one per spatial axis)", repr(spacing))
        ep, et = edges(p, dims), edges(t, dims)
        flat = lambda x: x.reshape(x.shape[0], x.shape[1], math.prod(x.shape[2:]))  # noqa: E731
        has_p, has_t = flat(ep).any(-1), flat(et).any(-1)
        d = flat(torch.where(ep, distance_to(et, dims, distance_metric, sp), -math.inf)).amax(-1)
        if not directed:
            d = torch.maximum(d, flat(torch.where(et, distance_to(ep, dims, distance_metric, sp), -math.inf)).amax(-1))
        scored = has_p | has_t
        d = torch.where(has_p & has_t, d, torch.inf)
        return DistanceState(s.total + torch.where(scored, d, 0.0).sum(), s.count + scored.sum(),
                             s.invalid + count_invalid(preds, target, num_classes, input_format))

    def finalize(s):
        report(name, num_classes, input_format, s.invalid)
        warn_empty(name, s.count > 0)
        return torch.where(s.count > 0, s.total / s.count.clamp(min=1), torch.nan)

    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, check=value_check(name, num_classes, input_format), higher_is_better=False,
                  is_differentiable=False, bounds=(0.0, None))
