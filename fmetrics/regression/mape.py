"""`mean_absolute_percentage_error`: ``mean |preds - target| / max(|target|, eps)``."""
from __future__ import annotations

from typing import Literal

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _elementwise

EPSILON = 1.17e-06  # torchmetrics' lower bound for |target|


@factory
def mean_absolute_percentage_error(*, num_outputs: int = 1,
                                   nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """MAPE ``1/n sum_i |p_i - t_i| / max(|t_i|, 1.17e-6)``.

    A zero target is clamped to ``1.17e-6`` as in torchmetrics (scikit-learn
    clamps to float64 eps instead, so zero targets give other large values).

    Args:
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``, ``"ignore"`` (left out) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 tensor (a fraction, not percent), 0-d or ``(num_outputs,)``.

    Example::

        >>> fmetrics.mean_absolute_percentage_error()(torch.tensor([1., 10., 1e6]), torch.tensor([0.9, 15., 1.2e6]))
        tensor(0.2037, dtype=torch.float64)
    """
    name = "mean_absolute_percentage_error"

    def ape(d, p, t):
        return d.abs_().div_(torch.clamp(t.to(d.dtype).abs(), min=EPSILON))

    fam = _elementwise.family("absolute_percentage_error", ape, num_outputs, nan_strategy, name=name)
    return _elementwise.member(fam, name, num_outputs, nan_strategy, higher_is_better=False, is_differentiable=True,
                               bounds=(0.0, None))
