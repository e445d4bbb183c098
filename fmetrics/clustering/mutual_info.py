"""Mutual information scores: MI, normalized MI, adjusted MI.

Over the contingency table ``n_ij`` with row sums ``a_i`` (target labels),
column sums ``b_j`` (predicted clusters) and ``N`` samples::

    MI  = sum_ij n_ij / N * log(N n_ij / (a_i b_j))
    NMI = MI / mean(H(target), H(preds))              (mean: average_method)
    AMI = (MI - E[MI]) / (mean(H(target), H(preds)) - E[MI])

``E[MI]`` is the expected mutual information under the hypergeometric model
of random labelings with the same cluster sizes (Vinh, Epps and Bailey, 2010),
computed in float64 with every term vectorized: for each pair (i, j) only the
window of ``n_ij`` within ``10 sigma + 34`` of the hypergeometric mean is
summed: by a Chernoff bound (Poisson-like tails for small means included) the
weights left out are below ``exp(-50)``, far under float64 resolution of the
sum. Log-factorials come from one table
``lgamma(0..N + 1)`` gathered per term. Special cases follow scikit-learn.
"""
from __future__ import annotations

import math
from typing import Literal, Optional

import torch

from fmetrics import validation
from fmetrics.clustering._contingency import contingency_family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["mutual_info_score", "normalized_mutual_info_score", "adjusted_mutual_info_score"]

AverageMethod = Literal["min", "geometric", "arithmetic", "max"]
_EPS = torch.finfo(torch.float64).eps


def mutual_info(t: torch.Tensor) -> float:
    """MI of a float64 table (scikit-learn's formula and clipping)."""
    if t.shape[0] <= 1 or t.shape[1] <= 1:
        return 0.0
    n = t.sum()
    a, b = t.sum(1), t.sum(0)
    i, j = torch.nonzero(t, as_tuple=True)
    nz = t[i, j]
    c_nm = nz / n
    outer = a[i] * b[j]
    log_outer = -torch.log(outer) + math.log(float(a.sum())) + math.log(float(b.sum()))
    mi = c_nm * (torch.log(nz) - torch.log(n)) + c_nm * log_outer
    mi = torch.where(mi.abs() < _EPS, torch.zeros_like(mi), mi)
    return max(float(mi.sum()), 0.0)


def entropy(sizes: torch.Tensor) -> float:
    """Entropy of a labeling from its label sizes (scikit-learn's conventions: empty -> 1, one label -> 0)."""
    if sizes.numel() == 0:
        return 1.0
    pi = sizes[sizes > 0]
    if pi.numel() == 1:
        return 0.0
    s = pi.sum()
    return float(-((pi / s) * (torch.log(pi) - torch.log(s))).sum())


def _average(u: float, v: float, method: str) -> float:
    if method == "min":
        return min(u, v)
    if method == "max":
        return max(u, v)
    if method == "geometric":
        return math.sqrt(u * v)
    return (u + v) / 2


def expected_mutual_info(t: torch.Tensor, chunk: int = 1 << 22) -> float:
    """E[MI] under the hypergeometric model of labelings with the table's margins, in float64."""
    return expected_mutual_info_terms(t.sum(1), t.sum(0), float(t.sum()), chunk)


def expected_mutual_info_terms(a: torch.Tensor, b: torch.Tensor, n: float, chunk: int = 1 << 22,
                               counts: Optional[tuple[torch.Tensor, torch.Tensor]] = None) -> float:
    """``sum_i sum_j f(a_i, b_j, n)``: E[MI]'s terms of the row sums ``a`` and column sums ``b`` of a table of
    ``n`` samples, in float64. With every row, E[MI]; with a subset of the rows (a rank's), their part of it.
    ``counts``: how many rows (columns) have each size of ``a`` (``b``); a pair's term is weighted by both.

    Example::

        >>> expected_mutual_info_terms(torch.tensor([2, 2]), torch.tensor([2, 2]), 4.0)  # E[MI] of [[1, 1], [1, 1]]
        0.23104906...
    """
    a, b = a.to(torch.float64), b.to(torch.float64)
    ai = a[:, None].expand(-1, b.numel()).reshape(-1)
    bj = b[None, :].expand(a.numel(), -1).reshape(-1)
    lo = torch.clamp(ai + bj - n, min=1.0)
    hi = torch.minimum(ai, bj)
    mean = ai * bj / n
    var = ai * bj * (n - ai) * (n - bj) / (n * n * max(n - 1.0, 1.0))
    reach = 10.0 * var.sqrt() + 34.0
    lo = torch.maximum(lo, torch.floor(mean - reach))
    hi = torch.minimum(hi, torch.ceil(mean + reach))
    width = (hi - lo + 1).clamp(min=0).to(torch.int64)
    keep = width > 0
    ai, bj, lo, width = ai[keep], bj[keep], lo[keep], width[keep]
    weight = None if counts is None else torch.outer(*(c.to(torch.float64) for c in counts)).reshape(-1)[keep]
    if ai.numel() == 0:
        return 0.0
    log_fact = torch.lgamma(torch.arange(int(n) + 2, dtype=torch.float64, device=a.device) + 1)  # log(x!), x = 0..N+1

    def log_factorial(x):  # integer-valued float tensor -> log(x!)
        return log_fact[x.to(torch.int64)]

    const = (log_factorial(ai) + log_factorial(bj) + log_factorial(n - ai) + log_factorial(n - bj)
             - math.lgamma(n + 1))
    log_ab = torch.log(ai) + torch.log(bj)
    ends = torch.cumsum(width, 0)
    total = 0.0
    first = 0
    while first < width.numel():  # the ragged terms of consecutive pairs, about `chunk` at a time
        base = int(ends[first - 1]) if first else 0
        last = int(torch.searchsorted(ends, base + chunk, right=True))
        last = max(last, first + 1)
        w = width[first:last]
        pair = torch.repeat_interleave(torch.arange(first, last, device=a.device), w)
        k = lo[pair] + (torch.arange(int(w.sum()), dtype=torch.float64, device=a.device)
                        - (torch.cumsum(w, 0) - w).repeat_interleave(w).to(torch.float64))
        aa, bb = ai[pair], bj[pair]
        log_p = (const[pair] - log_factorial(k) - log_factorial(aa - k) - log_factorial(bb - k)
                 - log_factorial(n - aa - bb + k))
        terms = (k / n) * (math.log(n) + torch.log(k) - log_ab[pair]) * torch.exp(log_p)
        total += float((terms if weight is None else terms * weight[pair]).sum())
        first = last
    return float(total)


def _mi(t: torch.Tensor) -> torch.Tensor:
    return torch.tensor(mutual_info(t), dtype=torch.float64)


def _nmi(method: str):
    def value(t: torch.Tensor) -> torch.Tensor:
        r, c = t.shape
        if r == c == 1 or r == c == 0:
            return torch.tensor(1.0, dtype=torch.float64)
        mi = mutual_info(t)
        if mi == 0:
            return torch.tensor(0.0, dtype=torch.float64)
        return torch.tensor(mi / _average(entropy(t.sum(1)), entropy(t.sum(0)), method), dtype=torch.float64)

    return value


def _ami(method: str):
    def value(t: torch.Tensor) -> torch.Tensor:
        r, c = t.shape
        if r == c == 1 or r == c == 0:
            return torch.tensor(1.0, dtype=torch.float64)
        if r == 1 or c == 1:
            return torch.tensor(0.0, dtype=torch.float64)
        mi = mutual_info(t)
        emi = expected_mutual_info(t)
        normalizer = _average(entropy(t.sum(1)), entropy(t.sum(0)), method)
        den = normalizer - emi
        den = min(den, -_EPS) if den < 0 else max(den, _EPS)
        num = mi - emi
        num = min(num, -_EPS) if num < 0 else max(num, _EPS)
        return torch.tensor(num / den, dtype=torch.float64)

    return value


def _check_method(name: str, average_method: str) -> str:
    return validation.check_policy(name, "average_method", average_method, ("min", "geometric", "arithmetic", "max"))


@factory
def mutual_info_score(*, num_clusters: Optional[int] = None) -> Metric:
    """Mutual information (in nats) between predicted clusters and true classes.

    ``MI = sum_ij n_ij / N * log(N n_ij / (a_i b_j))``.

    Args:
      num_clusters: ``None`` (default) keeps the labels (any integer ids); an
        int ``K`` keeps a dense ``K x K`` int64 table (labels in ``[0, K)``).

    Inputs:
      ``update(state, preds, target)``: 1-D integer label tensors of one shape.

    Returns:
      A float64 scalar >= 0.

    Example::

        >>> fmetrics.mutual_info_score()(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 1]))
        tensor(0.6931, dtype=torch.float64)
    """
    return contingency_family("mutual_info_score", num_clusters).metric(
        "mutual_info_score", _mi, higher_is_better=True, bounds=(0.0, None))


@factory
def normalized_mutual_info_score(*, average_method: AverageMethod = "arithmetic",
                                 num_clusters: Optional[int] = None) -> Metric:
    """Normalized mutual information: ``MI / mean(H(target), H(preds))``.

    Args:
      average_method: how the two entropies are averaged: ``"arithmetic"``
        (default), ``"geometric"``, ``"min"`` or ``"max"``.
      num_clusters: see `mutual_info_score`.

    Inputs:
      ``update(state, preds, target)``: 1-D integer label tensors of one shape.

    Returns:
      A float64 scalar in [0, 1]; 1.0 when both labelings have a single label.

    Example::

        >>> fmetrics.normalized_mutual_info_score()(torch.tensor([1, 1, 0, 0]), torch.tensor([0, 0, 1, 1]))
        tensor(1., dtype=torch.float64)
    """
    _check_method("normalized_mutual_info_score", average_method)
    return contingency_family("normalized_mutual_info_score", num_clusters).metric(
        "normalized_mutual_info_score", _nmi(average_method), higher_is_better=True, bounds=(0.0, 1.0))


@factory
def adjusted_mutual_info_score(*, average_method: AverageMethod = "arithmetic",
                               num_clusters: Optional[int] = None) -> Metric:
    """Adjusted mutual information: MI corrected for chance.

    ``AMI = (MI - E[MI]) / (mean(H(target), H(preds)) - E[MI])`` with the
    expected MI under random labelings of the same cluster sizes.

    Args:
      average_method: ``"arithmetic"`` (default), ``"geometric"``, ``"min"`` or ``"max"``.
      num_clusters: see `mutual_info_score`.

    Inputs:
      ``update(state, preds, target)``: 1-D integer label tensors of one shape.

    Returns:
      A float64 scalar <= 1 (about 0 for random labels).

    Example::

        >>> fmetrics.adjusted_mutual_info_score()(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 0, 1, 1]))
        tensor(1., dtype=torch.float64)
    """
    _check_method("adjusted_mutual_info_score", average_method)
    return contingency_family("adjusted_mutual_info_score", num_clusters).metric(
        "adjusted_mutual_info_score", _ami(average_method), higher_is_better=True, bounds=(None, 1.0))
