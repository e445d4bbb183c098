"""Intrinsic clustering scores: Calinski-Harabasz, Davies-Bouldin, Dunn (data and labels, no ground truth).

* Calinski-Harabasz: ``CH = [B / (k - 1)] / [W / (N - k)]`` with between- and
  within-cluster dispersions ``B = sum_k n_k |c_k - c|^2`` and
  ``W = sum_k sum_{x in k} |x - c_k|^2``; 1.0 when ``W = 0`` (scikit-learn).
  With ``num_clusters`` given, the state is per-cluster counts, means and
  centred second moments (M2) in float64, merged by Chan's formula: O(K D)
  memory, no raw sums of squares (no cancellation on offset data). Without it,
  the points are kept and both dispersions are computed in two passes.
* Davies-Bouldin: ``DB = mean_i max_{j != i} (s_i + s_j) / |c_i - c_j|`` with
  ``s_i`` the mean distance of cluster i's points to its centroid. ``s_i`` needs
  the centroid first, so the points are kept (chunks).
* Dunn: ``min_{i<j} |c_i - c_j|_p / max_i max_{x in i} |x - c_i|_p``
  (torchmetrics' centroid form); the points are kept.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.clustering._points import (
    FINITE_RULE,
    PointState,
    centroids,
    check_finite,
    check_points,
    joined,
    nonfinite_rows,
    points_merge,
    points_update,
)
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["calinski_harabasz_score", "davies_bouldin_score", "dunn_index"]


class MomentState(NamedTuple):
    count: torch.Tensor  # int64 [K]
    mean: torch.Tensor   # float64 [K, D]: per-cluster mean (0 for an empty cluster)
    m2: torch.Tensor     # float64 [K]: per-cluster sum of squared distances to its mean
    invalid: validation.Invalid    # labels outside [0, K)
    nonfinite: validation.Invalid  # non-finite data entries (their rows count nowhere)


def _chan(count_a, mean_a, m2_a, count_b, delta, m2_b):
    """Count, mean and M2 of two groups from the second's mean offset ``delta`` (Chan et al.):
    ``mean = mean_a + delta n_b / n``, ``M2 = M2_a + M2_b + |delta|^2 n_a n_b / n``. No raw sums of squares,
    so offset data keeps its digits, and equal means give exactly the same mean and M2."""
    n = count_a + count_b
    scale = n.clamp(min=1)
    return (n, mean_a + delta * (count_b / scale)[:, None],
            m2_a + m2_b + (delta * delta).sum(1) * (count_a * count_b / scale))


def _batch_moments(k: int, x: torch.Tensor, labels: torch.Tensor, bad: torch.Tensor, state: "MomentState"):
    """This batch's per-cluster ``(count, batch mean - state mean, M2)``, computed about a reference point
    per cluster: the state's mean, or the cluster's first point in the batch where the state has none
    (identical points then give exactly zero spread). ``bad`` rows count nowhere."""
    ids = torch.where(bad, torch.zeros_like(labels), labels).to(torch.int64)
    n = x.shape[0]
    pos = torch.arange(n, device=x.device)
    first = torch.full((k,), n, dtype=torch.int64, device=x.device).scatter_reduce(
        0, ids, torch.where(bad, n, pos), "amin")
    seen = state.count > 0
    ref = torch.where(seen[:, None], state.mean, x[first.clamp(max=n - 1)])
    d = torch.where(bad[:, None], 0.0, x - ref[ids])
    count = torch.zeros(k, dtype=torch.float64, device=x.device).index_add(0, ids, (~bad).to(torch.float64))
    offset = d.new_zeros(k, x.shape[1]).index_add(0, ids, d) / count.clamp(min=1)[:, None]
    spread = torch.where(bad, 0.0, ((d - offset[ids]) ** 2).sum(1))
    m2 = torch.zeros(k, dtype=torch.float64, device=x.device).index_add(0, ids, spread)
    return count, offset + (ref - state.mean), m2  # ref - mean: exactly 0 where the state has the cluster


def _too_few_clusters(name: str, k: int) -> torch.Tensor:
    warnings.warn(f"{name}: needs at least 2 clusters, got {k}; the value is NaN", UserWarning, stacklevel=4)
    return torch.tensor(float("nan"), dtype=torch.float64)


def _points_family(name: str) -> Family:
    def check(data, labels):
        check_points(name, data, labels)
        check_finite(name, data)

    def shared(state: PointState):
        validation.invalid_report(name, FINITE_RULE, state.invalid)
        return joined(state)

    return Family(name=f"cluster_points_{name}", key=(), init=lambda: PointState((), (), validation.invalid_init()),
                  update=points_update(name), merge=points_merge, check=check,
                  reductions=PointState(data="cat", labels="cat", invalid=None), shared=shared)


def _ch_value(counts: torch.Tensor, means: torch.Tensor, within: torch.Tensor) -> torch.Tensor:
    present = counts > 0
    counts, means = counts[present], means[present]
    n, k = float(counts.sum()), int(counts.numel())
    if k < 2 or n <= k:
        warnings.warn(f"calinski_harabasz_score: needs 2 <= clusters < samples, got {k} clusters and {int(n)} "
                      "samples; the value is NaN", UserWarning, stacklevel=4)
        return torch.tensor(float("nan"), dtype=torch.float64)
    mean = (counts[:, None] * means).sum(0) / n
    between = float((counts * ((means - mean) ** 2).sum(1)).sum())
    w = float(within)
    if w == 0.0:
        return torch.tensor(1.0, dtype=torch.float64)
    return torch.tensor(between * (n - k) / (w * (k - 1.0)), dtype=torch.float64)


@factory
def calinski_harabasz_score(*, num_clusters: Optional[int] = None) -> Metric:
    """Calinski-Harabasz index: between- over within-cluster dispersion, scaled by degrees of freedom.

    Args:
      num_clusters: ``None`` (default) keeps the points (any integer labels);
        an int ``K`` keeps per-cluster counts, means and centred second moments
        (float64, merged by Chan's formula; labels must be in ``[0, K)``).

    Inputs:
      ``update(state, data, labels)``: points ``(N, D)`` float and their cluster labels ``(N,)`` integer.

    Returns:
      A float64 scalar >= 0 (NaN with a warning for fewer than 2 clusters).

    Example::

        >>> data = torch.tensor([[0., 0.], [0., 1.], [4., 0.], [4., 1.]])
        >>> fmetrics.calinski_harabasz_score()(data, torch.tensor([0, 0, 1, 1]))
        tensor(32., dtype=torch.float64)
    """
    name = "calinski_harabasz_score"
    if num_clusters is None:
        def finish(prepared):
            data, ids, k = prepared
            if k == 0:
                return _ch_value(torch.zeros(0, dtype=torch.float64), torch.zeros(0, 0, dtype=torch.float64), 0.0)
            counts, cents = centroids(data, ids, k)
            within = ((data - cents[ids]) ** 2).sum()
            return _ch_value(counts, cents, within)

        return _points_family(name).metric(name, finish, higher_is_better=True, bounds=(0.0, None))

    if isinstance(num_clusters, bool) or not isinstance(num_clusters, int) or num_clusters < 1:
        raise validation.fail(name, "num_clusters", "a positive int or None", repr(num_clusters))
    k = num_clusters

    def init():
        return MomentState(torch.zeros(k, dtype=torch.int64), torch.zeros(k, 0, dtype=torch.float64),
                           torch.zeros(k, dtype=torch.float64), validation.invalid_init(), validation.invalid_init())

    def update(state, data, labels):
        check_points(name, data, labels)
        x = data.detach().to(torch.float64)
        if state.mean.shape[1] != x.shape[1]:  # the first batch fixes D
            state = state._replace(mean=state.mean.new_zeros(k, x.shape[1]))
        off_range = (labels < 0) | (labels >= k)
        invalid = validation.invalid_flag(state.invalid, off_range, labels)
        nonfinite = validation.invalid_flag(state.nonfinite, ~torch.isfinite(x), x)
        if x.shape[0] == 0:
            return state._replace(invalid=invalid, nonfinite=nonfinite)
        count_b, delta, m2_b = _batch_moments(k, x, labels, off_range | nonfinite_rows(x), state)
        _, mean, m2 = _chan(state.count.to(torch.float64), state.mean, state.m2, count_b, delta, m2_b)
        return MomentState(state.count + count_b.to(torch.int64), mean, m2, invalid, nonfinite)

    def merge(a, b):
        ma = a.mean if a.mean.shape[1] else b.mean.new_zeros(b.mean.shape)
        mb = b.mean if b.mean.shape[1] else a.mean.new_zeros(a.mean.shape)
        _, mean, m2 = _chan(a.count.to(torch.float64), ma, a.m2, b.count.to(torch.float64), mb - ma, b.m2)
        return MomentState(a.count + b.count, mean, m2, validation.invalid_merge(a.invalid, b.invalid),
                           validation.invalid_merge(a.nonfinite, b.nonfinite))

    def check(data, labels):
        check_points(name, data, labels)
        bad = (labels < 0) | (labels >= k)
        if bool(bad.any()):
            raise ValueError(f"{name}: labels must be in [0, {k}) (num_clusters={k}); "
                             f"found {validation.quote(labels[bad])}")
        check_finite(name, data)

    def finish(s: MomentState):
        validation.invalid_report(name, f"labels in [0, {k})", s.invalid)
        validation.invalid_report(name, FINITE_RULE, s.nonfinite)
        counts = s.count.to(torch.float64)
        mean = s.mean if s.mean.shape[1] else torch.zeros(k, 1, dtype=torch.float64)
        return _ch_value(counts, mean, s.m2.sum())

    fam = Family(name="cluster_moments", key=(k,), init=init, update=update, merge=merge, check=check,
                 reductions=MomentState(count="sum", mean=None, m2=None, invalid=None, nonfinite=None))
    return fam.metric(name, finish, higher_is_better=True, bounds=(0.0, None))


@factory
def davies_bouldin_score() -> Metric:
    """Davies-Bouldin index: the mean over clusters of the worst similarity to another cluster (lower is better).

    ``DB = mean_i max_{j != i} (s_i + s_j) / |c_i - c_j|``; 0.0 when all
    clusters are points or all centroids coincide (scikit-learn).

    Args:
      none: the metric has no options (as torchmetrics' ``DaviesBouldinScore()``).

    Inputs:
      ``update(state, data, labels)``: points ``(N, D)`` float and cluster labels ``(N,)`` integer.

    Returns:
      A float64 scalar >= 0 (NaN with a warning for fewer than 2 clusters).

    Example::

        >>> data = torch.tensor([[0., 0.], [0., 2.], [4., 0.], [4., 2.]])
        >>> fmetrics.davies_bouldin_score()(data, torch.tensor([0, 0, 1, 1]))
        tensor(0.5000, dtype=torch.float64)
    """
    name = "davies_bouldin_score"

    def finish(prepared):
        data, ids, k = prepared
        if k < 2:
            return _too_few_clusters(name, k)
        counts, cents = centroids(data, ids, k)
        dist = torch.linalg.vector_norm(data - cents[ids], dim=1)
        intra = dist.new_zeros(k).index_add_(0, ids, dist) / counts
        between = torch.cdist(cents, cents, compute_mode="donot_use_mm_for_euclid_dist")  # exact on offset data
        if bool(torch.all(intra == 0)) or bool(torch.all(between == 0)):
            return torch.tensor(0.0, dtype=torch.float64)
        between = torch.where(between == 0, torch.full_like(between, float("inf")), between)
        score = (intra[:, None] + intra[None, :]) / between
        return score.max(dim=1).values.mean()

    return _points_family(name).metric(name, finish, higher_is_better=False, bounds=(0.0, None))


@factory
def dunn_index(*, p: float = 2) -> Metric:
    """Dunn index: smallest centroid separation over the largest point-to-centroid distance (higher is better).

    ``D = min_{i<j} |c_i - c_j|_p / max_i max_{x in i} |x - c_i|_p``
    (torchmetrics' form, with centroids).

    Args:
      p: the norm's order, >= 1 (default 2, Euclidean).

    Inputs:
      ``update(state, data, labels)``: points ``(N, D)`` float and cluster labels ``(N,)`` integer.

    Returns:
      A float64 scalar >= 0 (NaN with a warning for fewer than 2 clusters).

    Example::

        >>> data = torch.tensor([[0., 0.], [0., 2.], [4., 0.], [4., 2.]])
        >>> fmetrics.dunn_index()(data, torch.tensor([0, 0, 1, 1]))
        tensor(4., dtype=torch.float64)
    """
    name = "dunn_index"
    if isinstance(p, bool) or not isinstance(p, (int, float)) or p < 1:
        raise validation.fail(name, "p", "a number >= 1", repr(p))

    def finish(prepared):
        data, ids, k = prepared
        if k < 2:
            return _too_few_clusters(name, k)
        _, cents = centroids(data, ids, k)
        i, j = torch.triu_indices(k, k, 1)
        separation = torch.linalg.vector_norm(cents[i] - cents[j], ord=p, dim=1).min()
        spread = torch.linalg.vector_norm(data - cents[ids], ord=p, dim=1).max()
        return separation / spread

    return _points_family(name).metric(name, finish, higher_is_better=True, bounds=(0.0, None))
