"""`mean_squared_error`: ``mean (preds - target)^2`` (``squared=False``: its square root, RMSE)."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.regression._elementwise import elementwise_mean
from fmetrics.recipe import factory


@factory
def mean_squared_error(*, squared: bool = True, num_outputs: int = 1) -> Metric:
    """MSE ``1/n sum_i (p_i - t_i)^2``, or RMSE ``sqrt(MSE)`` with ``squared=False``.

    MSE and RMSE of one ``num_outputs`` share a state in a collection.

    Example::

        >>> fmetrics.mean_squared_error()(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 2.]))
        tensor(0.2500, dtype=torch.float64)
    """
    name = "mean_squared_error" if squared else "root_mean_squared_error"
    _inputs.check_bool(name, "squared", squared)

    def sq(d, p, t):
        return _inputs.square(d)

    return elementwise_mean(name, sq, num_outputs, key=("squared_error",), post=None if squared else torch.sqrt)
