"""Procrustes disparity between point clouds (scipy.spatial.procrustes' disparity, batched).

Both clouds are centred and scaled to unit Frobenius norm; the second is
rotated (and scaled) onto the first by the orthogonal Procrustes solution
``R = U V^T`` from the SVD of ``M = X^T Y``; the disparity is the remaining sum
of squared differences, ``1 - (sum of singular values of M)^2``, in [0, 1].

`update` keeps each pair's ``D x D`` matrix ``M`` (float64 chunks, merged by
joining): the SVD synchronizes a GPU with the host, so it runs in the
finalizer, batched per chunk, which then averages, adds or lists the
disparities. A pair with a non-finite cloud or one whose points are all equal
(undefined: scipy raises) is rejected at update, or counted and raised by
`finalize` where checking is not free; it never reaches the SVD.
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["procrustes_disparity"]


class CrossState(NamedTuple):
    cross: tuple  # float64 chunks [n, D, D]: X^T Y of each pair of normalized clouds
    invalid: validation.Invalid  # pairs with a non-finite or single-point cloud (deferred check)


RULE = ("point clouds must be finite and hold at least 2 distinct points (scipy.spatial.procrustes raises too); "
        "the value quoted is the pair's index in its update")


def cross_covariance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``M = X^T Y`` of ``[B, N, D]`` clouds centred and scaled to unit Frobenius norm: ``[B, D, D]`` float64."""
    a = a.to(torch.float64)
    b = b.to(torch.float64)
    a = a - a.mean(1, keepdim=True)
    b = b - b.mean(1, keepdim=True)
    a = a / torch.linalg.matrix_norm(a, keepdim=True)
    b = b / torch.linalg.matrix_norm(b, keepdim=True)
    return a.transpose(1, 2) @ b


def disparity_of(cross: torch.Tensor) -> torch.Tensor:
    """Per-pair disparity ``1 - (sum_i sigma_i(M))^2`` (the optimal fit's residual) of ``[B, D, D]`` matrices."""
    return (1.0 - torch.linalg.svdvals(cross).sum(-1) ** 2).clamp(min=0.0)


def flaws(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(non-finite, flat)`` bool ``[B]`` masks of ``[B, N, D]`` clouds: a NaN / inf entry, or every point
    equal (exactly: the per-coordinate range is 0, so no centring round-off hides it)."""
    extent = x.amax(1) - x.amin(1)
    nonfinite = ~torch.isfinite(extent).all(1)
    return nonfinite, ~nonfinite & (extent == 0).all(1)


def _check(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    name = "procrustes_disparity"
    for arg, x in (("point_cloud1", a), ("point_cloud2", b)):
        if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3) or not x.is_floating_point() or x.shape[-2] < 2:
            raise validation.fail(name, arg, "a float tensor (N, D) or (B, N, D) with N >= 2 points",
                                  tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__)
    if a.shape != b.shape:
        raise validation.fail(name, "point_cloud2", f"the shape of point_cloud1 {tuple(a.shape)}", tuple(b.shape))
    if a.dim() == 2:
        a, b = a[None], b[None]
    return a, b


def _mean(d: torch.Tensor) -> torch.Tensor:
    """The mean disparity; NaN with a warning before any pair (docs/conventions.md, empty input)."""
    if d.numel() == 0:
        validation.warn_empty("procrustes_disparity", stacklevel=4)
    return d.mean()


def _pairs(mask: torch.Tensor) -> str:
    return f"pair {validation.quote(mask.nonzero()[:, 0])} of this update"


@factory
def procrustes_disparity(*, reduction: Literal["mean", "sum", "none"] = "mean") -> Metric:
    """Procrustes disparity of point clouds after the best similarity transform (scipy's definition).

    Args:
      reduction: ``"mean"`` (default) averages the disparities of all pairs
        seen, ``"sum"`` adds them, ``"none"`` returns each. Every reduction
        keeps each pair's ``D x D`` matrix ``X^T Y`` (the SVD runs in the finalizer).

    Inputs:
      ``update(state, point_cloud1, point_cloud2)``: float tensors ``(B, N, D)``
      (a batch of B pairs of N points in D dimensions) or ``(N, D)`` (one pair).

    Returns:
      A float64 scalar (or a ``[B_total]`` vector with ``"none"``), each
      disparity in [0, 1] (0: the clouds match up to a similarity transform).

    Example::

        >>> square = torch.tensor([[0., 0.], [1., 0.], [1., 1.], [0., 1.]])
        >>> turned = square @ torch.tensor([[0., -1.], [1., 0.]]) * 3 + 5
        >>> fmetrics.procrustes_disparity()(square, turned)
        tensor(0., dtype=torch.float64)
    """
    validation.check_policy("procrustes_disparity", "reduction", reduction, ("mean", "sum", "none"))

    def update(state, point_cloud1, point_cloud2):
        a, b = _check(point_cloud1, point_cloud2)
        a, b = a.detach(), b.detach()
        bad = torch.stack(flaws(a) + flaws(b)).any(0)
        cross = torch.where(bad[:, None, None], 0.0, cross_covariance(a, b))  # a bad pair's NaN never reaches the SVD
        pair = torch.arange(a.shape[0], device=a.device)
        return CrossState((cross,), validation.invalid_flag(state.invalid, bad, pair))

    def merge(x, y):
        return CrossState(x.cross + y.cross, validation.invalid_merge(x.invalid, y.invalid))

    def check(point_cloud1, point_cloud2):
        a, b = _check(point_cloud1, point_cloud2)
        for arg, x in (("point_cloud1", a), ("point_cloud2", b)):
            nonfinite, flat = flaws(x)
            if bool(nonfinite.any()):
                raise ValueError(f"procrustes_disparity: {arg} must be finite; found "
                                 f"{validation.quote(x[~torch.isfinite(x)])} in {_pairs(nonfinite)}")
            if bool(flat.any()):
                raise ValueError(f"procrustes_disparity: {arg} must hold at least 2 distinct points (scipy's "
                                 f"procrustes raises too); all points are equal in {_pairs(flat)}")

    def disparities(s: CrossState) -> torch.Tensor:  # chunk by chunk: D may differ between updates
        validation.invalid_report("procrustes_disparity", RULE, s.invalid)
        return torch.cat([disparity_of(m) for m in s.cross]) if s.cross else torch.zeros(0, dtype=torch.float64)

    finish = {"none": lambda d: d, "sum": torch.sum, "mean": _mean}[reduction]
    fam = Family(name="procrustes", key=(), init=lambda: CrossState((), validation.invalid_init()), update=update,
                 merge=merge, check=check, reductions=CrossState(cross="cat", invalid=None), shared=disparities)
    return fam.metric("procrustes_disparity", finish, higher_is_better=False, bounds=(0.0, 1.0))
