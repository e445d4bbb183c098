"""A state that no update was counted in, finalized: most often a forgotten reassignment.

States are values: ``m.update(s, x)`` returns the new state and leaves ``s`` as it was, so a loop that
calls it without ``s = ...`` finalizes the empty state. States that carry a `validation.Invalid` record
count their updates (``calls``); `Metric.finalize` warns once when every count is 0 (the metric's own
warning about its value on no data, where it gives one, is that warning)::

    s = m.init()
    m.update(s, preds, target)   # the new state is dropped
    m.finalize(s)                # UserWarning: ... finalize got a state that no update was counted in ...
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterator

import torch

from fmetrics import validation

_DEPTH = [0]  # finalize calls in progress: a collection's or a wrapper's members are not checked again


def _counts(state: Any) -> Iterator:
    if isinstance(state, validation.Invalid):
        yield state.calls
    elif isinstance(state, dict):
        for v in state.values():
            yield from _counts(v)
    elif isinstance(state, (tuple, list)):
        for v in state:
            yield from _counts(v)


def never_updated(state: Any, init: Callable[[], Any]) -> bool:
    """Whether ``state`` counts its updates, none was counted, and it equals ``init()``: what a dropped
    ``m.update(state, ...)`` leaves (the count alone is not enough: a policy's path may not tick it)."""
    calls = list(_counts(state))
    if not calls or any(c.is_meta for c in calls) or any(bool(c.any()) for c in calls):
        return False
    return _equal(state, init())


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool((a == b.to(a.device)).all())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b)


@contextlib.contextmanager
def checked(name: str, state: Any, init: Callable[[], Any]) -> Iterator[None]:
    """Around `Metric.finalize`'s call: for a never-updated state (outermost eager call only) one warning, `HINT`,
    unless the metric gave its own (NaN: no samples were seen, fewer than 2, ...), which is that one."""
    unupdated = not _DEPTH[0] and not validation.traced() and never_updated(state, init)
    _DEPTH[0] += 1
    try:
        with warnings.catch_warnings(record=True) if unupdated else contextlib.nullcontext() as caught:
            if unupdated:
                warnings.simplefilter("always")
            yield
    finally:
        _DEPTH[0] -= 1
    if not unupdated:
        return
    for w in caught:  # as they came
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if not any(issubclass(w.category, UserWarning) for w in caught):  # its own word on the value of no data
        # stacklevel: this generator, contextlib's __exit__, Metric.finalize, its caller
        warnings.warn(f"{name}: {HINT}", UserWarning, stacklevel=4)


HINT = ("finalize got a state that no update was counted in. A state is a value: `state = m.update(state, ...)` "
        "returns the new state and leaves its argument as it was; keep what it returns")
