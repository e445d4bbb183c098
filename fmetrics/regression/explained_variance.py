"""`explained_variance`: ``1 - Var(target - preds) / Var(target)``."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _inputs, _residual
from fmetrics.regression.r2 import Multioutput, NanStrategy


@factory
def explained_variance(*, multioutput: Multioutput = "uniform_average", num_outputs: int = 1,
                       nan_strategy: NanStrategy = "error", exact: bool = False) -> Metric:
    """Explained variance ``1 - Var(t - p) / Var(t)`` per output, then ``multioutput``.

    Both variances come from float64 shifted sums (the state of `r2_score`).
    A constant target makes the score undefined: NaN and a warning.

    Args:
      multioutput: ``"uniform_average"`` (default), ``"raw_values"`` or
        ``"variance_weighted"`` (weights ``Var(t)``), as in `r2_score`.
      num_outputs: number of output columns (default ``1``: inputs ``(N,)``).
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
      float64 0-d tensor, or ``(num_outputs,)`` for ``"raw_values"``.

    Example::

        >>> fmetrics.explained_variance()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.9572, dtype=torch.float64)
    """
    name = "explained_variance"
    _inputs.check_choice(name, "multioutput", multioutput, _residual.MULTIOUTPUT)
    _inputs.check_bool(name, "exact", exact)
    fam = _residual.family(num_outputs, nan_strategy, name, exact)

    def finish(state):
        state = _residual.centred(state)
        bad = _residual.undefined(name, state, nan_strategy)
        tss = state.m2[0]
        scores = torch.where(bad, torch.nan, 1 - state.m2[1] / torch.where(bad, 1, tss))
        return _residual.average(scores, tss, bad, multioutput, num_outputs)

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=True, bounds=(None, 1.0))
