"""`mean_absolute_error`: ``mean |preds - target|``."""
from __future__ import annotations

from fmetrics.metric import Metric
from fmetrics.regression._elementwise import elementwise_mean
from fmetrics.recipe import factory


@factory
def mean_absolute_error(*, num_outputs: int = 1) -> Metric:
    """MAE ``1/n sum_i |p_i - t_i|``.

    Example::

        >>> fmetrics.mean_absolute_error()(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 2.]))
        tensor(0.2500, dtype=torch.float64)
    """
    return elementwise_mean("mean_absolute_error", lambda d, p, t: d.abs_(), num_outputs, key=("absolute_error",))
