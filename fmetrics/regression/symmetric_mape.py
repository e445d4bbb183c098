"""`symmetric_mean_absolute_percentage_error`: ``mean 2 |p - t| / max(|t| + |p|, eps)``."""
from __future__ import annotations

from typing import Literal

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _elementwise
from fmetrics.regression.mape import EPSILON


@factory
def symmetric_mean_absolute_percentage_error(
        *, num_outputs: int = 1, nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """SMAPE ``2/n sum_i |p_i - t_i| / max(|t_i| + |p_i|, 1.17e-6)`` (in ``[0, 2]``).

    Args:
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``, ``"ignore"`` (left out) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 tensor in ``[0, 2]``, 0-d or ``(num_outputs,)``.

    Example::

        >>> m = fmetrics.symmetric_mean_absolute_percentage_error()
        >>> m(torch.tensor([1., 10., 1e6]), torch.tensor([0.9, 15., 1.2e6]))
        tensor(0.2290, dtype=torch.float64)
    """
    name = "symmetric_mean_absolute_percentage_error"

    def sape(d, p, t):
        return 2 * d.abs_() / torch.clamp(t.to(d.dtype).abs() + p.to(d.dtype).abs(), min=EPSILON)

    fam = _elementwise.family("symmetric_absolute_percentage_error", sape, num_outputs, nan_strategy, name=name)
    return _elementwise.member(fam, name, num_outputs, nan_strategy, higher_is_better=False, is_differentiable=True,
                               bounds=(0.0, 2.0))
