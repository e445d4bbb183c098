"""`symmetric_mean_absolute_percentage_error`: ``mean 2 |p - t| / max(|t| + |p|, eps)``."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.regression._elementwise import elementwise_mean
from fmetrics.regression.mape import EPSILON
from fmetrics.recipe import factory


@factory
def symmetric_mean_absolute_percentage_error(*, num_outputs: int = 1) -> Metric:
    """SMAPE ``2/n sum_i |p_i - t_i| / max(|t_i| + |p_i|, 1.17e-6)`` (in ``[0, 2]``).

    Example::

        >>> m = fmetrics.symmetric_mean_absolute_percentage_error()
        >>> m(torch.tensor([1., 10., 1e6]), torch.tensor([0.9, 15., 1.2e6]))
        tensor(0.2290, dtype=torch.float64)
    """

    def sape(d, p, t):
        return 2 * d.abs_() / torch.clamp(t.to(d.dtype).abs() + p.to(d.dtype).abs(), min=EPSILON)

    return elementwise_mean("symmetric_mean_absolute_percentage_error", sape, num_outputs,
                            key=("symmetric_absolute_percentage_error",))
