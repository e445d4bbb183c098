"""`running`: the value over the last ``window`` updates."""
from __future__ import annotations

from typing import NamedTuple

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import device_of, fold
from fmetrics.wrappers._rows import init_on
from fmetrics.recipe import factory


class RunningState(NamedTuple):
    slots: tuple  # ``window`` wrapped states, one per recent update, oldest first (init() until filled)


@factory
def running(metric: Metric, *, window: int = 5) -> Metric:
    """``metric`` over the last ``window`` calls to ``update`` (torchmetrics' ``Running``).

    The state is a fixed tuple of ``window`` wrapped states, one per recent
    update (``init()``, the merge identity, until filled); ``update`` shifts the
    tuple and appends the batch's own state, so its layout never changes and
    it stays traceable. ``finalize`` merges the slots. Two running states merge
    slot by slot, most recent with most recent: across ranks the value covers
    the last ``window`` steps of every rank. By design the value depends on the
    batch boundaries (it is not split-invariant).

    Args:
      metric: the `fmetrics.Metric` to evaluate over the window (positional).
      window: number of recent updates covered, an int ``>= 1`` (default 5).

    Inputs:
      ``update(state, *inputs)``: the wrapped metric's inputs.

    Returns:
      the wrapped metric's value over the last ``window`` updates; metadata is
      the wrapped metric's.

    Example::

        >>> m = running(fmetrics.sum(), window=2)
        >>> s = m.init()
        >>> for x in (1., 2., 3.):
        ...     s = m.update(s, torch.tensor([x]))
        >>> m.finalize(s)
        tensor(5., dtype=torch.float64)
    """
    name = "running"
    if not isinstance(metric, Metric):
        raise validation.fail(name, "metric", "a fmetrics.Metric", type(metric).__name__)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise validation.fail(name, "window", "an integer >= 1", repr(window))

    def init():
        return RunningState(tuple(metric.init() for _ in range(window)))

    def update(state, *inputs, **kwargs):
        step = metric.update(init_on(metric, device_of((inputs, kwargs))), *inputs, **kwargs)
        return RunningState(tuple(state.slots[1:]) + (step,))

    def merge(a, b):
        return RunningState(tuple(metric.merge(x, y) for x, y in zip(a.slots, b.slots)))

    def finalize(state):
        return metric.finalize(fold(metric.merge, state.slots))

    key = None if metric.state_key is None else (name, metric.state_key, window)
    # the slots move on every update, so chunk fields are not "cat" here: the wrapped update appends its own
    # chunks to a fresh state, and the reducer gathers the slots and merges them
    tags = _without_cat(metric.reductions)
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=f"{name}({metric.name})",
                  state_key=key, reductions=RunningState(tuple(tags for _ in range(window))),
                  higher_is_better=metric.higher_is_better, is_differentiable=metric.is_differentiable,
                  bounds=metric.bounds)


def _without_cat(tags):
    """The tags with every ``"cat"`` (appended by `Metric.update` in place) turned into ``None`` (merged)."""
    if isinstance(tags, str):
        return None if tags == "cat" else tags
    if tags is None:
        return None
    if isinstance(tags, dict):
        return {k: _without_cat(v) for k, v in tags.items()}
    parts = [_without_cat(t) for t in tags]
    return type(tags)(*parts) if hasattr(tags, "_fields") else type(tags)(parts)
