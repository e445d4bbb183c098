"""`mean_squared_log_error`: ``mean (log(1 + preds) - log(1 + target))^2``."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.regression._elementwise import elementwise_mean
from fmetrics.recipe import factory


@factory
def mean_squared_log_error(*, num_outputs: int = 1, on_invalid: str = "error") -> Metric:
    """MSLE ``1/n sum_i (log1p(p_i) - log1p(t_i))^2``.

    Negative preds or targets are dropped and counted; `finalize` raises a
    ``ValueError`` with the count (``on_invalid="warn"``/``"ignore"``: the value
    over the kept entries).

    Example::

        >>> fmetrics.mean_squared_log_error()(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 2.]))
        tensor(0.0207, dtype=torch.float64)
    """

    def sq_log(d, p, t):
        d = torch.log1p(p.to(d.dtype)) - torch.log1p(t.to(d.dtype))
        return _inputs.square(d)

    rule = ("preds and target must be >= 0", lambda p, t: ~((p < 0) | (t < 0)))
    return elementwise_mean("mean_squared_log_error", sq_log, num_outputs, key=("squared_log_error",),
                            rule=rule, on_invalid=on_invalid)
