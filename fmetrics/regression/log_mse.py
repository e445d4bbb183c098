"""`mean_squared_log_error`: ``mean (log(1 + preds) - log(1 + target))^2``."""
from __future__ import annotations

from typing import Literal

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _elementwise, _inputs

RULE = ("preds and target must be >= 0", lambda p, t: ~((p < 0) | (t < 0)))


@factory
def mean_squared_log_error(*, num_outputs: int = 1, on_invalid: Literal["error", "warn", "ignore"] = "error",
                           nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """MSLE ``1/n sum_i (log1p(p_i) - log1p(t_i))^2``.

    Args:
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      on_invalid: negative preds or targets are left out and counted;
        ``"error"`` (default) raises in `finalize` with the count, ``"warn"``
        warns, ``"ignore"`` gives the value over the other entries.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``, ``"ignore"`` (left out) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape, ``>= 0``.

    Returns:
      float64 tensor, 0-d or ``(num_outputs,)``.

    Example::

        >>> fmetrics.mean_squared_log_error()(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 2.]))
        tensor(0.0207, dtype=torch.float64)
    """
    name = "mean_squared_log_error"

    def sq_log(d, p, t):
        d = torch.log1p(p.to(d.dtype)) - torch.log1p(t.to(d.dtype))
        return _inputs.square(d)

    fam = _elementwise.family("squared_log_error", sq_log, num_outputs, nan_strategy, rule=RULE, name=name)
    return _elementwise.member(fam, name, num_outputs, nan_strategy, on_invalid=on_invalid, rule=RULE,
                               higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
