"""Homogeneity, completeness and V-measure (Rosenberg and Hirschberg, 2007).

With class entropy ``H(C)`` (target), cluster entropy ``H(K)`` (preds) and
their mutual information ``MI``::

    homogeneity  h = MI / H(C)      (1 when H(C) = 0)
    completeness c = MI / H(K)      (1 when H(K) = 0)
    V_beta         = (1 + beta) h c / (beta h + c)
"""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics import validation
from fmetrics.clustering._contingency import contingency_family
from fmetrics.clustering.mutual_info import entropy, mutual_info
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["homogeneity_score", "completeness_score", "v_measure_score"]


def _scores(t: torch.Tensor, beta: float = 1.0) -> tuple[float, float, float]:
    if t.sum() == 0:
        return 1.0, 1.0, 1.0
    h_c, h_k = entropy(t.sum(1)), entropy(t.sum(0))
    mi = mutual_info(t)
    h = mi / h_c if h_c else 1.0
    c = mi / h_k if h_k else 1.0
    v = 0.0 if h + c == 0.0 else (1 + beta) * h * c / (beta * h + c)
    return h, c, v


def _pick(i: int, beta: float = 1.0):
    return lambda t: torch.tensor(_scores(t, beta)[i], dtype=torch.float64)



@factory
def homogeneity_score(*, num_clusters: Optional[int] = None) -> Metric:
    """Homogeneity: each cluster holds members of a single class (``MI / H(target)``).

    Args:
      num_clusters: ``None`` (default) keeps the labels (any integer ids); an
        int ``K`` keeps a dense ``K x K`` int64 table (labels in ``[0, K)``).

    Inputs:
      ``update(state, preds, target)``: predicted cluster labels and class labels, 1-D integer tensors.

    Returns:
      A float64 scalar in [0, 1].

    Example::

        >>> fmetrics.homogeneity_score()(torch.tensor([0, 0, 1, 2]), torch.tensor([0, 0, 1, 1]))  # MI = H(target)
        tensor(1.0000, dtype=torch.float64)
    """
    return contingency_family("homogeneity_score", num_clusters).metric(
        "homogeneity_score", _pick(0), higher_is_better=True, bounds=(0.0, 1.0))


@factory
def completeness_score(*, num_clusters: Optional[int] = None) -> Metric:
    """Completeness: all members of a class are in one cluster (``MI / H(preds)``).

    Args:
      num_clusters: ``None`` (default) keeps the labels (any integer ids); an
        int ``K`` keeps a dense ``K x K`` int64 table (labels in ``[0, K)``).

    Inputs:
      ``update(state, preds, target)``: 1-D integer label tensors of one shape.

    Returns:
      A float64 scalar in [0, 1].

    Example::

        >>> fmetrics.completeness_score()(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 2]))  # MI = H(preds)
        tensor(1.0000, dtype=torch.float64)
    """
    return contingency_family("completeness_score", num_clusters).metric(
        "completeness_score", _pick(1), higher_is_better=True, bounds=(0.0, 1.0))


@factory
def v_measure_score(*, beta: float = 1.0, num_clusters: Optional[int] = None) -> Metric:
    """V-measure: the weighted harmonic mean of homogeneity and completeness.

    ``V = (1 + beta) h c / (beta h + c)``.

    Args:
      beta: weight of homogeneity against completeness, >= 0 (default 1.0;
        above 1 favours completeness).
      num_clusters: ``None`` (default) keeps the labels (any integer ids); an
        int ``K`` keeps a dense ``K x K`` int64 table (labels in ``[0, K)``).

    Inputs:
      ``update(state, preds, target)``: 1-D integer label tensors of one shape.

    Returns:
      A float64 scalar in [0, 1].

    Example::

        >>> fmetrics.v_measure_score()(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 1]))
        tensor(1., dtype=torch.float64)
    """
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0:
        raise validation.fail("v_measure_score", "beta", "a number >= 0", repr(beta))
    return contingency_family("v_measure_score", num_clusters).metric(
        "v_measure_score", _pick(2, float(beta)), higher_is_better=True, bounds=(0.0, 1.0))
