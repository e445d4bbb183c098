"""`cosine_similarity`: ``<p, t> / (|p| |t|)`` per row, reduced."""
from __future__ import annotations

from typing import Literal, Optional

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression._rows import row_metric


@factory
def cosine_similarity(*, reduction: Optional[Literal["sum", "mean", "none"]] = "sum",
                      nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """Row-wise ``sum_j p_ij t_ij / (||p_i|| ||t_i||)`` over ``(N, D)`` inputs, then ``reduction``.

    Args:
      reduction: ``"sum"`` (default, as torchmetrics), ``"mean"``, or
        ``"none"``/``None`` for the per-row values in arrival order.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``/``"ignore"`` (the row is left out; NaN in the ``"none"``
        output) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, preds, target)``: real tensors ``(N, D)``.

    Returns:
      float64 0-d tensor, or ``(N,)`` for ``"none"``.

    Example::

        >>> fmetrics.cosine_similarity()(torch.tensor([[1., 0.], [1., 1.]]), torch.tensor([[1., 0.], [1., 0.]]))
        tensor(1.7071, dtype=torch.float64)
    """

    def cos(p, t):
        return (p * t).sum(1) / (p.norm(dim=1) * t.norm(dim=1))

    bounds = (-1.0, 1.0) if reduction != "sum" else (None, None)
    return row_metric("cosine_similarity", cos, reduction, key=(), nan_strategy=nan_strategy,
                      higher_is_better=True, is_differentiable=True, bounds=bounds)
