"""The empty-input rule of the classification metrics (docs/conventions.md, "Empty input").

A value that is undefined on no data -- a stream in which no entry counted: no samples at all, or
every entry ``ignore_index`` -- is NaN (every floating tensor of the value; integer parts such as a
curve's thresholds stay), and ``finalize`` warns
``<metric>: no samples were seen (empty input); the value is undefined and set to NaN``.
Classes without support in a *non-empty* stream keep torchmetrics' ``zero_division`` value.

Example::

    >>> f = guard("binary_accuracy", lambda n: n.sum() == 0, lambda n: n / n.clamp_min(1))
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     f(torch.zeros(2))
    tensor([nan, nan])
    >>> str(w[0].message)
    'binary_accuracy: no samples were seen (empty input); the value is undefined and set to NaN'
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch
from torch.utils import _pytree

from fmetrics import validation

__all__ = ["warn", "nan_like", "guard"]


def warn(name: str, stacklevel: int = 3) -> None:
    validation.warn_empty(name, stacklevel=stacklevel)


def nan_like(value, keep: Callable[[int], bool] = lambda i: False):
    """``value`` (a tensor, or a tuple / list / dict of them) with every floating tensor set to NaN; the
    top-level tuple entries ``i`` with ``keep(i)`` (a curve's thresholds) stay as they are."""
    def nan(x):
        return torch.full_like(x, float("nan")) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    if isinstance(value, tuple):
        return type(value)(v if keep(i) else _pytree.tree_map(nan, v) for i, v in enumerate(value))
    return _pytree.tree_map(nan, value)


def guard(name: str, empty: Callable[..., object], value: Callable, keep: Callable[[int], bool] = lambda i: False):
    """``value`` as a finalizer that follows the rule: where ``empty(x)`` holds, it warns and returns
    `nan_like` of the value (computed with its own warnings silenced, for its shape)."""
    def finish(x):
        if not bool(empty(x)):
            return value(x)
        warn(name, stacklevel=4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return nan_like(value(x), keep)

    return finish
