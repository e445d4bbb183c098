"""Pair-counting scores: Rand index, adjusted Rand index, Fowlkes-Mallows index.

Over the contingency table ``n_ij`` (rows: target labels, columns: predicted
labels) with ``N`` samples, the pairs of samples fall into four counts
(sklearn's ``pair_confusion_matrix``): both in one cluster and one class
(``tp = sum n_ij^2 - N``), and the three disagreements. All are exact
integers; the adjusted Rand index is formed from them with Python integers.
"""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.clustering._contingency import contingency_family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["rand_score", "adjusted_rand_score", "fowlkes_mallows_index"]


def _pairs(t: torch.Tensor) -> tuple[int, int, int, int]:
    """``(tn, fp, fn, tp)`` as Python ints (sklearn's pair confusion matrix)."""
    n = int(t.sum())
    a = t.sum(1)  # target label sizes
    b = t.sum(0)  # predicted cluster sizes
    sum_sq = int((t * t).sum())
    fp = int((t * b[None, :]).sum()) - sum_sq
    fn = int((t * a[:, None]).sum()) - sum_sq
    tp = sum_sq - n
    tn = n * n - fp - fn - sum_sq
    return tn, fp, fn, tp


def _rand(t: torch.Tensor) -> torch.Tensor:
    tn, fp, fn, tp = _pairs(t)
    num, den = tn + tp, tn + fp + fn + tp
    value = 1.0 if num == den or den == 0 else num / den
    return torch.tensor(value, dtype=torch.float64)


def _adjusted_rand(t: torch.Tensor) -> torch.Tensor:
    tn, fp, fn, tp = _pairs(t)
    if fn == 0 and fp == 0:
        return torch.tensor(1.0, dtype=torch.float64)
    return torch.tensor(2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)),
                        dtype=torch.float64)


def _fowlkes_mallows(t: torch.Tensor) -> torch.Tensor:
    n = int(t.sum())
    tk = int((t * t).sum()) - n
    pk = int((t.sum(0) ** 2).sum()) - n
    qk = int((t.sum(1) ** 2).sum()) - n
    if tk == 0:
        return torch.tensor(0.0, dtype=torch.float64)
    return torch.tensor((tk / pk) ** 0.5 * (tk / qk) ** 0.5, dtype=torch.float64)


@factory
def rand_score(*, num_clusters: Optional[int] = None) -> Metric:
    """Rand index: the fraction of sample pairs on which the clustering and the classes agree.

    ``RI = (tn + tp) / (N (N - 1))`` over ordered pairs; 1.0 when there is no
    pair to disagree on.

    Args:
      num_clusters: ``None`` (default) keeps the labels (any integer ids) and
        builds the table in `finalize`; an int ``K`` keeps a dense ``K x K``
        int64 table (labels must be in ``[0, K)``): sum-mergeable, O(K²) memory.

    Inputs:
      ``update(state, preds, target)``: predicted cluster labels and true class
      labels, 1-D integer tensors of one shape.

    Returns:
      A float64 scalar in [0, 1].

    Example::

        >>> fmetrics.rand_score()(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 2]))
        tensor(0.8333, dtype=torch.float64)
    """
    return contingency_family("rand_score", num_clusters).metric(
        "rand_score", _rand, higher_is_better=True, bounds=(0.0, 1.0))


@factory
def adjusted_rand_score(*, num_clusters: Optional[int] = None) -> Metric:
    """Adjusted Rand index: the Rand index corrected for chance (Hubert and Arabie).

    ``ARI = 2 (tp tn - fn fp) / ((tp + fn)(fn + tn) + (tp + fp)(fp + tn))``;
    1.0 for identical partitions, about 0 for random labels, negative below chance.

    Args:
      num_clusters: see `rand_score`.

    Inputs:
      ``update(state, preds, target)``: 1-D integer label tensors of one shape.

    Returns:
      A float64 scalar in [-0.5, 1].

    Example::

        >>> fmetrics.adjusted_rand_score()(torch.tensor([0, 0, 1, 2]), torch.tensor([0, 0, 1, 1]))
        tensor(0.5714, dtype=torch.float64)
    """
    return contingency_family("adjusted_rand_score", num_clusters).metric(
        "adjusted_rand_score", _adjusted_rand, higher_is_better=True, bounds=(-0.5, 1.0))


@factory
def fowlkes_mallows_index(*, num_clusters: Optional[int] = None) -> Metric:
    """Fowlkes-Mallows index: the geometric mean of pairwise precision and recall.

    ``FMI = tp / sqrt((tp + fp)(tp + fn))`` over unordered pairs; 0 when no pair
    shares a cluster and a class.

    Args:
      num_clusters: see `rand_score`.

    Inputs:
      ``update(state, preds, target)``: 1-D integer label tensors of one shape.

    Returns:
      A float64 scalar in [0, 1].

    Example::

        >>> fmetrics.fowlkes_mallows_index()(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 2]))
        tensor(0.7071, dtype=torch.float64)
    """
    return contingency_family("fowlkes_mallows_index", num_clusters).metric(
        "fowlkes_mallows_index", _fowlkes_mallows, higher_is_better=True, bounds=(0.0, 1.0))
