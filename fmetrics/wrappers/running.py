"""`running`: the value over the last ``window`` updates."""
from __future__ import annotations

from typing import NamedTuple

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import device_of, fold


class RunningState(NamedTuple):
    recent: tuple  # the wrapped metric's states of the last <= window updates, oldest first


def running(metric: Metric, window: int = 5) -> Metric:
    """``metric`` over the last ``window`` calls to ``update`` (torchmetrics' ``Running``).

    Each update is kept as its own state; the tuple of the last ``window`` of
    them is the state (its length is static, so ``update`` stays traceable).
    ``finalize`` merges them. Merging two running states merges their updates
    slot by slot, most recent with most recent: across ranks, the value covers
    the last ``window`` steps of every rank. By design the value depends on the
    batch boundaries (it is not split-invariant).

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
        return RunningState(())

    def update(state, *inputs, **kwargs):
        step = metric.update(metric.init(device_of((inputs, kwargs))), *inputs, **kwargs)
        return RunningState((tuple(state.recent) + (step,))[-window:])

    def merge(a, b):
        n = max(len(a.recent), len(b.recent))
        a = (None,) * (n - len(a.recent)) + tuple(a.recent)  # align the most recent updates
        b = (None,) * (n - len(b.recent)) + tuple(b.recent)
        return RunningState(tuple(y if x is None else x if y is None else metric.merge(x, y)
                                  for x, y in zip(a, b)))

    def finalize(state):
        if not state.recent:
            return metric.finalize(metric.init())
        return metric.finalize(fold(metric.merge, state.recent))

    key = None if metric.state_key is None else (name, metric.state_key, window)
    return Metric(init=init, update=update, merge=merge, finalize=finalize,
                  name=f"{name}({metric.name})", state_key=key, reductions=RunningState(None))
