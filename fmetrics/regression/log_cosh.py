"""`log_cosh_error`: ``mean log(cosh(preds - target))``."""
from __future__ import annotations

import math
from typing import Literal

import torch.nn.functional as F

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _elementwise


@factory
def log_cosh_error(*, num_outputs: int = 1,
                   nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """LogCosh ``1/n sum_i log(cosh(p_i - t_i))``.

    Evaluated as ``|d| + log1p(exp(-2|d|)) - log 2``, which does not overflow
    for large errors (torchmetrics' ``exp(d)`` does beyond ``|d| ~ 88`` in float32).

    Args:
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``, ``"ignore"`` (left out) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 tensor, 0-d or ``(num_outputs,)``.

    Example::

        >>> fmetrics.log_cosh_error()(torch.tensor([3., 5., 2.5, 7.]), torch.tensor([2.5, 5., 4., 8.]))
        tensor(0.3523, dtype=torch.float64)
    """
    name = "log_cosh_error"

    def log_cosh(d, p, t):
        d = d.abs_()
        return d + F.softplus(-2 * d) - math.log(2.0)

    fam = _elementwise.family("log_cosh_error", log_cosh, num_outputs, nan_strategy, name=name)
    return _elementwise.member(fam, name, num_outputs, nan_strategy, higher_is_better=False, is_differentiable=True,
                               bounds=(0.0, None))
