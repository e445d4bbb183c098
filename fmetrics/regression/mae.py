"""`mean_absolute_error`: ``mean |preds - target|``."""
from __future__ import annotations

from typing import Literal


from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _elementwise, _inputs


@factory
def mean_absolute_error(*, num_outputs: int = 1,
                        nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error",
                        exact: bool = False) -> Metric:
    """Mean absolute error ``MAE = 1/n sum_i |p_i - t_i|`` (float64 running sums).

    Args:
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``, ``"ignore"`` (left out) or ``"disable"`` (propagate); see
        docs/regression.md.
      exact: ``False`` (default): per batch in the inputs' float32 / float64
        dtype, running sums in float64. ``True``: residuals and sums in
        float64 (docs/regression.md, "Precision").

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape
      (``(N, num_outputs)`` when ``num_outputs > 1``).

    Returns:
      float64 tensor, 0-d or ``(num_outputs,)``; NaN with a warning on no data.

    Example::

        >>> fmetrics.mean_absolute_error()(torch.tensor([0., 1., 2., 3.]), torch.tensor([0., 1., 2., 2.]))
        tensor(0.2500, dtype=torch.float64)
    """
    name = "mean_absolute_error"
    _inputs.check_bool(name, "exact", exact)
    fam = _elementwise.family("absolute_error", lambda d, p, t: d.abs_(), num_outputs, nan_strategy, name=name,
                              exact=exact, host=True)
    return _elementwise.member(fam, name, num_outputs, nan_strategy, higher_is_better=False, is_differentiable=True,
                               bounds=(0.0, None))
