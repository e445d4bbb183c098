"""`r2_score`: the coefficient of determination ``1 - RSS / TSS``."""
from __future__ import annotations

import warnings
from typing import Literal

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.regression import _inputs, _residual

NanStrategy = Literal["error", "warn", "ignore", "disable"]
Multioutput = Literal["raw_values", "uniform_average", "variance_weighted"]


@factory
def r2_score(*, adjusted: int = 0, multioutput: Multioutput = "uniform_average", num_outputs: int = 1,
             nan_strategy: NanStrategy = "error", exact: bool = False) -> Metric:
    """R² ``1 - sum (t - p)^2 / sum (t - mean t)^2`` per output, then ``multioutput``.

    Sums of squares are float64 sums of values shifted near the data
    (`fmetrics.regression._shifted`), so offset data keep their precision. A constant target (or fewer than 2 samples) makes R² undefined:
    NaN and a warning (torchmetrics returns 0 or 1 there, scikit-learn 0 or 1
    unless ``force_finite=False``).

    Args:
      adjusted: ``0`` (default) for R²; ``k > 0`` for the adjusted
        ``1 - (1 - R²)(n - 1)/(n - k - 1)`` with ``k`` regressors (falls back to
        R² with a warning when ``k >= n - 1``).
      multioutput: ``"uniform_average"`` (default: the mean over outputs),
        ``"raw_values"`` (one score per output) or ``"variance_weighted"``
        (weights ``TSS``).
      num_outputs: number of output columns; inputs are ``(N,)`` or ``(N, 1)``
        for ``1`` (default), ``(N, num_outputs)`` otherwise.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``/``"ignore"`` (the row is left out) or ``"disable"``
        (propagate); see docs/regression.md.
      exact: ``False`` (default): a batch is shifted, squared and summed in
        the inputs' float32 / float64 dtype into float64 shifted sums (as
        fast as torchmetrics' raw sums; within 1e-6 relative of a float64
        reference on float32 data offset by 1e4). ``True``: float64
        arithmetic per element, within 1e-9 (docs/regression.md, "Precision").

    Inputs:
      ``update(state, preds, target)``: real tensors ``(N,)`` or
      ``(N, num_outputs)``.

    Returns:
      float64 0-d tensor (``(num_outputs,)`` for ``"raw_values"`` with
      ``num_outputs > 1``). Differentiable through the one-shot call.

    Example::

        >>> fmetrics.r2_score()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(0.9486, dtype=torch.float64)
    """
    name = "r2_score"
    if isinstance(adjusted, bool) or not isinstance(adjusted, int) or adjusted < 0:
        raise validation.fail(name, "adjusted", "an int >= 0", repr(adjusted))
    _inputs.check_choice(name, "multioutput", multioutput, _residual.MULTIOUTPUT)
    _inputs.check_bool(name, "exact", exact)
    fam = _residual.family(num_outputs, nan_strategy, name, exact, squares=True)

    def finish(state):
        state = _residual.centred(state)
        bad = _residual.undefined(name, state, nan_strategy)
        tss = state.m2[0]
        scores = torch.where(bad, torch.nan, 1 - _residual.rss(state) / torch.where(bad, 1, tss))
        r2 = _residual.average(scores, tss, bad, multioutput, num_outputs)
        if adjusted:
            n = int(state.n)
            if adjusted >= n - 1:
                warnings.warn(f"{name}: adjusted={adjusted} needs more than {adjusted + 1} samples, got {n}; "
                              "returning the unadjusted score", UserWarning, stacklevel=2)
            else:
                r2 = 1 - (1 - r2) * (n - 1) / (n - adjusted - 1)
        return r2

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=True, bounds=(None, 1.0))
