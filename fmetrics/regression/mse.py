"""`mean_squared_error`: ``mean (preds - target)^2`` (``squared=False``: its square root, RMSE)."""
from __future__ import annotations

from typing import Literal

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _elementwise, _inputs


def squared_errors(num_outputs: int, nan_strategy: str, name: str, exact: bool = False):
    """The state of MSE / RMSE (and their NaN policies): one `Family` per ``num_outputs``."""
    return _elementwise.family("squared_error", lambda d, p, t: _inputs.square(d), num_outputs, nan_strategy,
                               name=name, exact=exact, host=True,  # direct: F.mse_loss's binding, no reduction
                               direct=lambda p, t: torch._C._nn.mse_loss(p, t, 0))


@factory
def mean_squared_error(*, squared: bool = True, num_outputs: int = 1,
                       nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error",
                       exact: bool = False) -> Metric:
    """Mean squared error ``MSE = 1/n sum_i (p_i - t_i)^2``, or ``RMSE = sqrt(MSE)`` with ``squared=False``.

    A batch's ``p - t``, squares and sum run in the inputs' dtype; the running
    sums are float64 (sums of non-negative terms: nothing cancels). MSE and RMSE of one
    ``num_outputs`` share a state in a collection.

    Args:
      squared: ``True`` (default) for MSE, ``False`` for its square root (RMSE).
      num_outputs: ``1`` (default): every element of the inputs is a sample
        and the value is 0-d; ``k > 1``: inputs are ``(N, k)`` and the value
        is one score per output, ``(k,)``.
      nan_strategy: NaN/inf in preds or target (docs/regression.md):
        ``"error"`` (default; raised at once on CPU, else by `finalize` with
        the count), ``"warn"`` (left out, with a warning), ``"ignore"`` (left
        out silently) or ``"disable"`` (no check: they propagate).
      exact: ``False`` (default): per batch in the inputs' float32 / float64
        dtype, running sums in float64 (~1e-8 relative error for float32).
        ``True``: residuals, squares and sums in float64 (docs/regression.md,
        "Precision").

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape (any shape
      when ``num_outputs == 1``, else ``(N, num_outputs)``), any float or
      integer dtype.

    Returns:
      float64 tensor, 0-d or ``(num_outputs,)``; NaN with a warning when no
      sample was seen. Differentiable through the one-shot call.

    Example::

        >>> fmetrics.mean_squared_error()(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 2.]))
        tensor(0.2500, dtype=torch.float64)
        >>> fmetrics.mean_squared_error(squared=False)(torch.tensor([0., 2.]), torch.tensor([1., 0.]))
        tensor(1.5811, dtype=torch.float64)
    """
    name = "mean_squared_error" if squared else "root_mean_squared_error"
    _inputs.check_bool(name, "squared", squared)
    _inputs.check_bool(name, "exact", exact)
    fam = squared_errors(num_outputs, nan_strategy, name, exact)
    return _elementwise.member(fam, name, num_outputs, nan_strategy, post=None if squared else torch.sqrt,
                               higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
