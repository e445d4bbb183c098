"""`concordance_corrcoef`: Lin's concordance correlation coefficient."""
from __future__ import annotations

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression.pearson import NanStrategy, centred, comoments, undefined


@factory
def concordance_corrcoef(*, num_outputs: int = 1, nan_strategy: NanStrategy = "error", exact: bool = False) -> Metric:
    """Lin's ``rho_c = 2 s_xy / (s_x^2 + s_y^2 + (mx - my)^2)``.

    ``s`` are the sample (``n - 1``) covariance and variances, as torchmetrics
    computes them. Shares the state of `pearson_corrcoef`;
    constant preds or target: NaN and a warning (as torchmetrics).

    Args:
      num_outputs: number of columns (default ``1``: inputs ``(N,)``).
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
      float64 tensor in ``[-1, 1]``, 0-d or ``(num_outputs,)``.

    Example::

        >>> fmetrics.concordance_corrcoef()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.9777, dtype=torch.float64)
    """
    name = "concordance_corrcoef"
    fam = comoments(num_outputs, nan_strategy, name, exact)

    def finish(state):
        state = centred(state)
        bad = undefined(name, state, nan_strategy)
        dof = torch.clamp(state.n - 1, min=1).to(state.c_xy.dtype)
        dm = state.mean[0] - state.mean[1]
        rho = 2 * state.c_xy / (state.m2[0] + state.m2[1] + dof * dm * dm)
        rho = torch.where(bad, torch.nan, rho)
        return rho[0] if num_outputs == 1 else rho

    return fam.metric(name, finish, higher_is_better=None, is_differentiable=True, bounds=(-1.0, 1.0))
