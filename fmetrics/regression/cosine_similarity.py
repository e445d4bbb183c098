"""`cosine_similarity`: ``<p, t> / (|p| |t|)`` per row, reduced."""
from __future__ import annotations

from fmetrics.metric import Metric
from fmetrics.regression._rows import row_metric
from fmetrics.recipe import factory


@factory
def cosine_similarity(*, reduction: str = "sum") -> Metric:
    """Row-wise ``sum_j p_ij t_ij / (||p_i|| ||t_i||)`` over ``(N, D)`` inputs, then ``reduction``
    (``"sum"`` default, ``"mean"``, ``"none"``/``None`` for the per-row values).

    Example::

        >>> fmetrics.cosine_similarity()(torch.tensor([[1., 0.], [1., 1.]]), torch.tensor([[1., 0.], [1., 0.]]))
        tensor(1.7071, dtype=torch.float64)
    """

    def cos(p, t):
        return (p * t).sum(1) / (p.norm(dim=1) * t.norm(dim=1))

    return row_metric("cosine_similarity", cos, reduction, key=())
