"""`explained_variance`: ``1 - Var(target - preds) / Var(target)``."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _residual
from fmetrics.recipe import factory


@factory
def explained_variance(*, multioutput: str = "uniform_average", num_outputs: int = 1) -> Metric:
    """Explained variance ``1 - Var(t - p) / Var(t)`` per output, then ``multioutput``.

    ``multioutput`` as in `r2_score` (``"variance_weighted"`` weights by
    ``Var(t)``). Both variances are Chan-merged float64 moments. A constant
    target makes the score undefined: NaN and a warning.

    Example::

        >>> fmetrics.explained_variance()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.9572, dtype=torch.float64)
    """
    name = "explained_variance"
    _inputs.check_choice(name, "multioutput", multioutput, _residual.MULTIOUTPUT)

    def finalize(state):
        bad = _residual.undefined(name, state)
        tss = state.m2[0]
        scores = torch.where(bad, torch.nan, 1 - state.m2[1] / torch.where(bad, 1, tss))
        return _residual.average(scores, tss, bad, multioutput, num_outputs)

    return _residual.residual_metric(name, num_outputs, finalize)
