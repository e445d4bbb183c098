"""Procrustes disparity between point clouds (scipy.spatial.procrustes' disparity, batched).

Both clouds are centred and scaled to unit Frobenius norm; the second is
rotated (and scaled) onto the first by the orthogonal Procrustes solution
``R = U V^T`` from the SVD of ``M = X^T Y``; the disparity is the remaining sum
of squared differences, ``1 - (sum of singular values of M)^2``, in [0, 1].

`update` keeps each pair's ``D x D`` matrix ``M`` (float64 chunks, merged by
joining): the SVD synchronizes a GPU with the host, so it runs in the
finalizer, batched per chunk, which then averages, adds or lists the
disparities.
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


def _check(a, b) -> tuple[torch.Tensor, torch.Tensor]:
    name = "procrustes_disparity"
    for arg, x in (("point_cloud1", a), ("point_cloud2", b)):
        if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3) or not x.is_floating_point():
            raise validation.fail(name, arg, "a float tensor (N, D) or (B, N, D)",
                                  tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__)
    if a.shape != b.shape:
        raise validation.fail(name, "point_cloud2", f"the shape of point_cloud1 {tuple(a.shape)}", tuple(b.shape))
    if a.dim() == 2:
        a, b = a[None], b[None]
    return a, b


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
        return CrossState((cross_covariance(a.detach(), b.detach()),))

    def disparities(s: CrossState) -> torch.Tensor:  # chunk by chunk: D may differ between updates
        return torch.cat([disparity_of(m) for m in s.cross]) if s.cross else torch.zeros(0, dtype=torch.float64)

    finish = {"none": lambda d: d, "sum": torch.sum, "mean": torch.mean}[reduction]
    fam = Family(name="procrustes", key=(), init=lambda: CrossState(()), update=update,
                 reductions=CrossState(cross="cat"), shared=disparities)
    return fam.metric("procrustes_disparity", finish, higher_is_better=False, bounds=(0.0, 1.0))
