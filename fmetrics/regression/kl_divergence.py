"""`kl_divergence`: ``KL(P || Q) = sum_j p_j log(p_j / q_j)`` per row."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.regression._rows import row_metric
from fmetrics.recipe import factory


def xlogy_ratio(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``p log(p / q)`` with ``0 log(0 / q) = 0``."""
    return torch.where(p == 0, 0, p * torch.log(p / q))


def normalized(p: torch.Tensor) -> torch.Tensor:
    return p / p.sum(-1, keepdim=True)


def distribution_rule(log_prob: bool):
    """Rows that are not (log-)distributions, counted and dropped."""
    if log_prob:
        return ("log-probabilities must be <= 0 (and not NaN)",
                lambda p, q: ((p <= 0) & (q <= 0)).all(-1))
    return ("probabilities must be >= 0 (and not NaN) with a positive row sum",
            lambda p, q: ((p >= 0) & (q >= 0)).all(-1) & (p.sum(-1) > 0) & (q.sum(-1) > 0))


@factory
def kl_divergence(*, log_prob: bool = False, reduction: str = "mean", on_invalid: str = "error") -> Metric:
    """``D_KL(P || Q) = sum_j p_j log(p_j / q_j)`` per row of ``(N, D)`` ``p`` and ``q``.

    Rows are normalized to sum 1 (``log_prob=True``: inputs are log-probabilities,
    ``sum exp(p) (p - q)``, not normalized). ``reduction``: ``"mean"``,
    ``"sum"``, ``"none"``/``None``. Rows with negative entries or a zero sum
    (log-probabilities > 0) are dropped and counted; `finalize` raises with
    the count (``on_invalid="warn"``/``"ignore"``: the value over kept rows).

    Example::

        >>> fmetrics.kl_divergence()(torch.tensor([[0.36, 0.48, 0.16]]), torch.tensor([[1/3, 1/3, 1/3]]))
        tensor(0.0853, dtype=torch.float64)
    """
    name = "kl_divergence"
    _inputs.check_bool(name, "log_prob", log_prob)

    def kl(p, q):
        if log_prob:
            return (p.exp() * (p - q)).sum(-1)
        return xlogy_ratio(normalized(p), normalized(q)).sum(-1)

    return row_metric(name, kl, reduction, key=(log_prob,), names=("p", "q"), rule=distribution_rule(log_prob),
                      on_invalid=on_invalid)
