"""`log_cosh_error`: ``mean log(cosh(preds - target))``."""
from __future__ import annotations

import math

import torch.nn.functional as F

from fmetrics.metric import Metric
from fmetrics.regression._elementwise import elementwise_mean
from fmetrics.recipe import factory


@factory
def log_cosh_error(*, num_outputs: int = 1) -> Metric:
    """LogCosh ``1/n sum_i log(cosh(p_i - t_i))``.

    Evaluated as ``|d| + log1p(exp(-2|d|)) - log 2``, which does not overflow
    for large errors (torchmetrics' ``exp(d)`` does beyond ``|d| ~ 88`` in float32).

    Example::

        >>> fmetrics.log_cosh_error()(torch.tensor([3., 5., 2.5, 7.]), torch.tensor([2.5, 5., 4., 8.]))
        tensor(0.3523, dtype=torch.float64)
    """

    def log_cosh(d, p, t):
        d = d.abs_()
        return d + F.softplus(-2 * d) - math.log(2.0)

    return elementwise_mean("log_cosh_error", log_cosh, num_outputs, key=("log_cosh_error",))
