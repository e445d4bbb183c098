"""`kl_divergence`: ``KL(P || Q) = sum_j p_j log(p_j / q_j)`` per row."""
from __future__ import annotations

from typing import Literal, Optional

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
    """Rows that are not (log-)distributions, counted and left out."""
    if log_prob:
        return ("log-probabilities must be <= 0",
                lambda p, q: ((p <= 0) & (q <= 0)).all(-1))
    return ("probabilities must be >= 0 with a positive row sum",
            lambda p, q: ((p >= 0) & (q >= 0)).all(-1) & (p.sum(-1) > 0) & (q.sum(-1) > 0))


@factory
def kl_divergence(*, log_prob: bool = False, reduction: Optional[Literal["mean", "sum", "none"]] = "mean",
                  on_invalid: Literal["error", "warn", "ignore"] = "error",
                  nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """``D_KL(P || Q) = sum_j p_j log(p_j / q_j)`` per row of ``(N, D)`` ``p`` and ``q`` (natural log).

    Args:
      log_prob: ``False`` (default): inputs are non-negative weights,
        normalized per row to sum 1; ``True``: inputs are log-probabilities
        (``sum exp(p) (p - q)``, not normalized).
      reduction: ``"mean"`` (default), ``"sum"``, or ``"none"``/``None`` for
        the per-row values.
      on_invalid: rows with negative entries or a zero sum (log-probabilities
        ``> 0``) are left out and counted: ``"error"`` (default) raises in
        `finalize`, ``"warn"`` warns, ``"ignore"`` gives the value over the
        other rows.
      nan_strategy: NaN/inf entries: ``"error"`` (default), ``"warn"``/
        ``"ignore"`` (the row is left out) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, p, q)``: real tensors ``(N, D)``.

    Returns:
      float64 0-d tensor, or ``(N,)`` for ``"none"``.

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
                      on_invalid=on_invalid, nan_strategy=nan_strategy, higher_is_better=False,
                      is_differentiable=True, bounds=(0.0, None))
