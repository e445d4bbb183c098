"""Procrustes disparity between point clouds (scipy.spatial.procrustes' disparity, batched).

Both clouds are centred and scaled to unit Frobenius norm; the second is
rotated (and scaled) onto the first by the orthogonal Procrustes solution
``R = U V^T`` from the SVD of ``X^T Y``; the disparity is the remaining sum
of squared differences, in [0, 1]. The metric averages the disparity of each
pair of clouds over the stream (float64 sum and count: sum-mergeable).
"""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["procrustes_disparity"]


class SumState(NamedTuple):
    total: torch.Tensor  # float64
    count: torch.Tensor  # int64


class ValuesState(NamedTuple):
    values: tuple  # float64 chunks [n]


def disparity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Per-pair disparity of ``[B, N, D]`` clouds, in float64."""
    a = a.to(torch.float64)
    b = b.to(torch.float64)
    a = a - a.mean(1, keepdim=True)
    b = b - b.mean(1, keepdim=True)
    a = a / torch.linalg.matrix_norm(a, keepdim=True)
    b = b / torch.linalg.matrix_norm(b, keepdim=True)
    singular = torch.linalg.svdvals(a.transpose(1, 2) @ b)  # the optimal fit leaves 1 - (sum of sigma)^2
    return (1.0 - singular.sum(-1) ** 2).clamp(min=0.0)


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
        seen, ``"sum"`` adds them, ``"none"`` returns each (kept as chunks).

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
    if reduction == "none":
        def update_values(state, point_cloud1, point_cloud2):
            a, b = _check(point_cloud1, point_cloud2)
            return ValuesState((disparity(a.detach(), b.detach()),))

        fam = Family(name="procrustes_values", key=(), init=lambda: ValuesState(()), update=update_values,
                     reductions=ValuesState(values="cat"))
        finish = lambda s: torch.cat(s.values) if s.values else torch.zeros(0, dtype=torch.float64)  # noqa: E731
        return fam.metric("procrustes_disparity", finish, higher_is_better=False, bounds=(0.0, 1.0))

    def init():
        return SumState(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64))

    def update(state, point_cloud1, point_cloud2):
        a, b = _check(point_cloud1, point_cloud2)
        d = disparity(a.detach(), b.detach())
        return SumState(state.total + d.sum(), state.count + d.shape[0])

    def finish(s: SumState) -> torch.Tensor:
        if reduction == "sum":
            return s.total
        return s.total / s.count

    fam = Family(name="procrustes_sum", key=(), init=init, update=update, reductions=SumState(total="sum", count="sum"))
    return fam.metric("procrustes_disparity", finish, higher_is_better=False, bounds=(0.0, 1.0))
