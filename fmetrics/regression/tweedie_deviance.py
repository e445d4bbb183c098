"""`tweedie_deviance_score`: mean Tweedie deviance for a given ``power``."""
from __future__ import annotations

from typing import Literal

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _elementwise, _inputs
from fmetrics.recipe import factory


def _deviance(power: float):
    """``f(d, p, t)`` for `_elementwise.family`: ``d = p - t`` (float64, may be overwritten)."""
    if power == 0:
        return lambda d, p, t: _inputs.square(d)

    def deviance(d, p, t):
        p, t = p.to(d.dtype), t.to(d.dtype)
        if power == 1:
            return 2 * (torch.xlogy(t, t / p) + p - t)
        if power == 2:
            return 2 * (torch.log(p / t) + t / p - 1)
        a = torch.clamp(t, min=0) ** (2 - power) / ((1 - power) * (2 - power))
        b = t * p ** (1 - power) / (1 - power)
        c = p ** (2 - power) / (2 - power)
        return 2 * (a - b + c)

    return deviance


def _rule(power: float):
    if power == 0:
        return None
    if power < 0:
        return "preds must be > 0", lambda p, t: ~(p <= 0)
    if power < 2:
        return "preds must be > 0 and target >= 0", lambda p, t: ~((p <= 0) | (t < 0))
    return "preds and target must be > 0", lambda p, t: ~((p <= 0) | (t <= 0))


@factory
def tweedie_deviance_score(*, power: float = 0.0, num_outputs: int = 1,
                           on_invalid: Literal["error", "warn", "ignore"] = "error",
                           nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """Mean deviance ``1/n sum_i d_power(t_i, p_i)`` of the Tweedie family.

    ``power``: 0 normal (squared error), 1 Poisson ``2(t log(t/p) + p - t)``,
    2 gamma ``2(log(p/t) + t/p - 1)``, otherwise
    ``2(max(t,0)^(2-k)/((1-k)(2-k)) - t p^(1-k)/(1-k) + p^(2-k)/(2-k))``.

    Args:
      power: a number ``<= 0`` or ``>= 1`` (``0 < power < 1`` is undefined);
        default ``0.0``.
      num_outputs: ``1`` (default): every element is a sample, 0-d value;
        ``k > 1``: inputs ``(N, k)``, one score per output.
      on_invalid: entries outside the power's domain (``power < 0``: preds
        ``> 0``; ``1 <= power < 2``: preds ``> 0``, target ``>= 0``;
        ``power >= 2``: both ``> 0``) are left out and counted: ``"error"``
        (default) raises in `finalize`, ``"warn"`` warns, ``"ignore"`` gives the
        value over the other entries.
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``, ``"ignore"`` (left out) or ``"disable"`` (propagate).

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 tensor, 0-d or ``(num_outputs,)``.

    Example::

        >>> fmetrics.tweedie_deviance_score(power=2.0)(torch.tensor([4., 3., 2., 1.]), torch.tensor([1., 2., 3., 1.]))
        tensor(0.4015, dtype=torch.float64)
    """
    name = "tweedie_deviance_score"
    if isinstance(power, bool) or not isinstance(power, (int, float)) or 0 < power < 1:
        raise validation.fail(name, "power", "a number <= 0 or >= 1", repr(power))
    power = float(power)
    rule = _rule(power)
    fam = _elementwise.family(f"tweedie_deviance_{power}", _deviance(power), num_outputs, nan_strategy, rule=rule,
                              name=name)
    return _elementwise.member(fam, name, num_outputs, nan_strategy, on_invalid=on_invalid, rule=rule,
                               higher_is_better=False, is_differentiable=True, bounds=(0.0, None))
