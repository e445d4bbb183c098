"""`jensen_shannon_divergence`: ``(KL(P || M) + KL(Q || M)) / 2`` with ``M = (P + Q) / 2``."""
from __future__ import annotations

import math
from typing import Literal, Optional

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.regression._rows import row_metric
from fmetrics.regression.kl_divergence import distribution_rule, normalized, xlogy_ratio
from fmetrics.recipe import factory


@factory
def jensen_shannon_divergence(*, log_prob: bool = False,
                              reduction: Optional[Literal["mean", "sum", "none"]] = "mean",
                              on_invalid: Literal["error", "warn", "ignore"] = "error",
                              nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """``JS(P, Q) = KL(P || M)/2 + KL(Q || M)/2``, ``M = (P + Q)/2``, per row (natural log, in ``[0, log 2]``).

    Args:
      log_prob: ``False`` (default): rows are normalized weights; ``True``:
        log-probabilities.
      reduction: ``"mean"`` (default), ``"sum"``, or ``"none"``/``None``.
      on_invalid: rows that are not distributions (as `kl_divergence`):
        ``"error"`` (default), ``"warn"`` or ``"ignore"``.
      nan_strategy: NaN/inf entries: ``"error"`` (default), ``"warn"``/
        ``"ignore"`` (the row is left out) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, p, q)``: real tensors ``(N, D)``.

    Returns:
      float64 0-d tensor, or ``(N,)`` for ``"none"``.

    Example::

        >>> m = fmetrics.jensen_shannon_divergence()
        >>> m(torch.tensor([[0.36, 0.48, 0.16]]), torch.tensor([[1/3, 1/3, 1/3]]))
        tensor(0.0225, dtype=torch.float64)
    """
    name = "jensen_shannon_divergence"
    _inputs.check_bool(name, "log_prob", log_prob)

    def js(p, q):
        if log_prob:
            m = torch.logsumexp(torch.stack([p, q]), dim=0) - math.log(2.0)
            return 0.5 * (p.exp() * (p - m)).sum(-1) + 0.5 * (q.exp() * (q - m)).sum(-1)
        p, q = normalized(p), normalized(q)
        m = (p + q) / 2
        return 0.5 * xlogy_ratio(p, m).sum(-1) + 0.5 * xlogy_ratio(q, m).sum(-1)

    return row_metric(name, js, reduction, key=(log_prob,), names=("p", "q"), rule=distribution_rule(log_prob),
                      on_invalid=on_invalid, nan_strategy=nan_strategy, higher_is_better=False,
                      is_differentiable=True, bounds=(0.0, math.log(2.0)))
