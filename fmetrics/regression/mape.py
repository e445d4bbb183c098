"""`mean_absolute_percentage_error`: ``mean |preds - target| / max(|target|, eps)``."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.regression._elementwise import elementwise_mean
from fmetrics.recipe import factory

EPSILON = 1.17e-06  # torchmetrics' lower bound for |target|


@factory
def mean_absolute_percentage_error(*, num_outputs: int = 1) -> Metric:
    """MAPE ``1/n sum_i |p_i - t_i| / max(|t_i|, 1.17e-6)``.

    A zero target is clamped to ``1.17e-6`` as in torchmetrics (scikit-learn
    clamps to float64 eps instead, so zero targets give other large values).

    Example::

        >>> fmetrics.mean_absolute_percentage_error()(torch.tensor([1., 10., 1e6]), torch.tensor([0.9, 15., 1.2e6]))
        tensor(0.2667, dtype=torch.float64)
    """

    def ape(d, p, t):
        return d.abs_().div_(torch.clamp(t.to(d.dtype).abs(), min=EPSILON))

    return elementwise_mean("mean_absolute_percentage_error", ape, num_outputs, key=("absolute_percentage_error",))
