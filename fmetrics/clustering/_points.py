"""States over points and their cluster labels (intrinsic clustering scores).

* `PointState` -- the points and labels as chunks (Davies-Bouldin and Dunn
  need every point's distance to its centroid).
* `MomentState` -- per-cluster count, sum and sum of squared norms (float64)
  for a known number of clusters: sum-mergeable (Calinski-Harabasz).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from fmetrics import validation
from fmetrics.clustering._contingency import _dense_ids
from fmetrics.state import cat_chunks

__all__ = ["PointState", "FINITE_RULE", "check_points", "check_finite", "nonfinite_rows", "points_update",
           "points_merge", "joined", "centroids"]


class PointState(NamedTuple):
    data: tuple    # float64 chunks [n, d]
    labels: tuple  # int64 chunks [n]
    invalid: validation.Invalid  # non-finite data entries (deferred check)


FINITE_RULE = "data must be finite (no NaN or inf)"


def nonfinite_rows(data: torch.Tensor) -> torch.Tensor:
    """Bool ``[N]``: rows of ``(N, D)`` data holding a NaN or inf."""
    return ~torch.isfinite(data).all(1)


def check_finite(name: str, data: torch.Tensor) -> None:
    """The eager value check (CPU, eager): raises quoting the non-finite entries of ``data``."""
    bad = ~torch.isfinite(data)
    if bool(bad.any()):
        raise ValueError(f"{name}: argument `data`: {FINITE_RULE}; found {validation.quote(data[bad])} in row "
                         f"{validation.quote(nonfinite_rows(data).nonzero()[:, 0])}")


def check_points(name: str, data: torch.Tensor, labels: torch.Tensor) -> None:
    if not isinstance(data, torch.Tensor) or data.dim() != 2 or not data.is_floating_point():
        raise validation.fail(name, "data", "a float tensor of shape (N, D)",
                              tuple(data.shape) if isinstance(data, torch.Tensor) else type(data).__name__)
    if not isinstance(labels, torch.Tensor) or labels.shape != data.shape[:1] or labels.is_floating_point():
        raise validation.fail(name, "labels", f"integer labels of shape ({data.shape[0]},)",
                              tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__)


def points_update(name: str):
    def update(state: PointState, data: torch.Tensor, labels: torch.Tensor) -> PointState:
        check_points(name, data, labels)
        data = data.detach()
        return PointState((data.to(torch.float64, copy=True),), (labels.detach().to(torch.int64, copy=True),),
                          validation.invalid_flag(state.invalid, ~torch.isfinite(data), data))

    return update


def points_merge(a: PointState, b: PointState) -> PointState:
    return PointState(a.data + b.data, a.labels + b.labels, validation.invalid_merge(a.invalid, b.invalid))


def joined(state: PointState, device=None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(data [N, D], dense labels [N] in 0..K-1, K)``."""
    data = cat_chunks(state.data, torch.zeros(0, 0, dtype=torch.float64))
    labels = cat_chunks(state.labels, torch.zeros(0, dtype=torch.int64))
    if labels.numel() == 0:
        return data, labels, 0
    ids, k = _dense_ids(labels)
    return data, ids, k


def centroids(data: torch.Tensor, ids: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(counts [K], centroids [K, D])`` in float64."""
    counts = torch.bincount(ids, minlength=k).to(torch.float64)
    sums = data.new_zeros(k, data.shape[1]).index_add_(0, ids, data)
    return counts, sums / counts[:, None]
