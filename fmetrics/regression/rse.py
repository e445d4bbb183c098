"""`relative_squared_error`: ``RSS / TSS``, the squared error relative to predicting the mean."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _residual
from fmetrics.recipe import factory


@factory
def relative_squared_error(*, num_outputs: int = 1, squared: bool = True) -> Metric:
    """RSE ``sum (t - p)^2 / sum (t - mean t)^2`` per output (its root with
    ``squared=False``), averaged over outputs.

    Shares its state with `r2_score` (``RSE = 1 - R²``). A constant target
    makes it undefined: NaN and a warning (torchmetrics divides by float eps).

    Example::

        >>> fmetrics.relative_squared_error()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.0514, dtype=torch.float64)
    """
    name = "relative_squared_error"
    _inputs.check_bool(name, "squared", squared)

    def finalize(state):
        bad = _residual.undefined(name, state)
        rse = torch.where(bad, torch.nan, _residual.rss(state) / torch.where(bad, 1, state.m2[0]))
        return (rse if squared else torch.sqrt(rse)).mean()

    return _residual.residual_metric(name, num_outputs, finalize)
