"""`relative_squared_error`: ``RSS / TSS``, the squared error relative to predicting the mean."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _inputs, _residual
from fmetrics.regression.r2 import NanStrategy


@factory
def relative_squared_error(*, num_outputs: int = 1, squared: bool = True,
                           nan_strategy: NanStrategy = "error", exact: bool = False) -> Metric:
    """RSE ``sum (t - p)^2 / sum (t - mean t)^2`` per output (its root with ``squared=False``), averaged over outputs.

    Shares its state with `r2_score` (``RSE = 1 - R²``). A constant target
    makes it undefined: NaN and a warning (torchmetrics divides by float eps).

    Args:
      num_outputs: number of output columns (default ``1``: inputs ``(N,)``).
      squared: ``True`` (default) for RSE, ``False`` for its square root.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``/``"ignore"`` (row left out) or ``"disable"`` (propagate).
      exact: ``False`` (default): a batch is shifted, squared and summed in
        the inputs' float32 / float64 dtype into float64 shifted sums (as
        fast as torchmetrics' raw sums; within 1e-6 relative of a float64
        reference on float32 data offset by 1e4). ``True``: float64
        arithmetic per element, within 1e-9 (docs/regression.md, "Precision").

    Inputs:
      ``update(state, preds, target)``: real tensors ``(N,)`` or ``(N, num_outputs)``.

    Returns:
      float64 0-d tensor (the mean over outputs).

    Example::

        >>> fmetrics.relative_squared_error()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.0514, dtype=torch.float64)
    """
    name = "relative_squared_error"
    _inputs.check_bool(name, "squared", squared)
    _inputs.check_bool(name, "exact", exact)
    fam = _residual.family(num_outputs, nan_strategy, name, exact, squares=True)

    def finish(state):
        state = _residual.centred(state)
        bad = _residual.undefined(name, state, nan_strategy)
        rse = torch.where(bad, torch.nan, _residual.rss(state) / torch.where(bad, 1, state.m2[0]))
        return (rse if squared else torch.sqrt(rse)).mean()

    return fam.metric(name, finish, higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
