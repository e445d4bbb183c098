"""Input transformers: a metric over transformed inputs (torchmetrics' ``MetricInputTransformer`` family).

``update(state, preds, target, *rest)`` of the wrapper is the wrapped metric's
``update(state, transform_pred(preds), transform_target(target), *rest)``; the
state, merge and finalize are the wrapped metric's. A transform must be a pure
tensor function (no host sync) for the wrapper to keep the laws (vmap, compile).
The wrapper pickles by its recipe when its transforms are importable (named
module-level) functions; a lambda works everywhere but in pickling.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["metric_input_transformer", "lambda_input_transformer", "binary_target_transformer"]

Transform = Optional[Callable[[torch.Tensor], torch.Tensor]]


def _fn_key(fn) -> tuple:
    """A transform in the state key: its importable name; a lambda or a local function by ``("object", id)``
    (never shared with another; the distributed fingerprint drops the id, docs/wrappers.md)."""
    if fn is None:
        return ("identity",)
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return ("object", id(fn))
    return (module, qualname)


def _transformed(name: str, metric: Metric, transform_pred: Transform, transform_target: Transform,
                 key: tuple) -> Metric:
    """``metric`` with ``update`` fed ``(transform_pred(inputs[0]), transform_target(inputs[1]), *inputs[2:])``."""
    if not isinstance(metric, Metric):
        raise validation.fail(name, "metric", "a fmetrics.Metric", type(metric).__name__)
    for arg, fn in (("transform_pred", transform_pred), ("transform_target", transform_target)):
        if fn is not None and not callable(fn):
            raise validation.fail(name, arg, "a callable tensor -> tensor, or None (identity)", repr(fn))

    def update(state, *inputs, **kwargs):
        inputs = list(inputs)
        for i, (arg, fn) in enumerate((("transform_pred", transform_pred), ("transform_target", transform_target))):
            if fn is not None and len(inputs) > i:
                inputs[i] = _apply(name, metric, arg, fn, inputs[i])
        return metric.update(state, *inputs, **kwargs)

    inner = metric.state_key
    return metric.replace(update=update, check=None, inputs=None, name=f"{name}({metric.name})",
                          state_key=None if inner is None else (name, inner, key),
                          weigh_rows=None)


def _apply(name: str, metric: Metric, arg: str, fn, x):
    """``fn(x)``; a transform that fails on the input raises naming the wrapper, the transform and the input."""
    try:
        return fn(x)
    except (TypeError, ValueError, RuntimeError, AttributeError) as err:
        raise validation.fail(f"{name}({metric.name})", "inputs", f"inputs that {arg} accepts",
                              f"{type(x).__name__}, on which it raised {type(err).__name__}: {err}") from err


@factory
def metric_input_transformer(metric: Metric, *, transform_pred: Transform = None,
                             transform_target: Transform = None) -> Metric:
    """``metric`` over ``(transform_pred(preds), transform_target(target), *rest)``: ``MetricInputTransformer``.

    The base of the input transformers: each transform defaults to the identity
    (torchmetrics' subclass hooks ``transform_pred`` / ``transform_target``,
    given here as functions). With one input only ``transform_pred`` applies;
    inputs after the second (``indexes``, keywords) pass unchanged.

    Args:
      metric: the wrapped `fmetrics.Metric` or `fmetrics.collection` (positional).
      transform_pred: ``None`` (default: identity) or a function applied to the first input.
      transform_target: ``None`` (default: identity) or a function applied to the second input.

    Inputs:
      ``update(state, preds, target, *rest, **kwargs)``: the wrapped metric's inputs, before the transforms.

    Returns:
      The wrapped metric's value; its state and ``merge`` are the wrapped metric's.

    Example::

        >>> m = metric_input_transformer(fmetrics.mean_squared_error(), transform_target=torch.round)
        >>> m(torch.tensor([1., 2.]), torch.tensor([0.9, 2.6]))
        tensor(0.5000, dtype=torch.float64)
    """
    return _transformed("metric_input_transformer", metric, transform_pred, transform_target,
                        (_fn_key(transform_pred), _fn_key(transform_target)))


@factory
def lambda_input_transformer(metric: Metric, *, transform_pred: Transform = None,
                             transform_target: Transform = None) -> Metric:
    """``metric`` over user-transformed inputs: torchmetrics' ``LambdaInputTransformer``.

    As `metric_input_transformer`: ``transform_pred`` maps the first input,
    ``transform_target`` the second (each ``None`` = identity).

    Args:
      metric: the wrapped `fmetrics.Metric` (positional).
      transform_pred: ``None`` (default: identity) or a function applied to ``preds``.
      transform_target: ``None`` (default: identity) or a function applied to ``target``.

    Inputs:
      ``update(state, preds, target, *rest, **kwargs)``: the wrapped metric's inputs, before the transforms.

    Returns:
      The wrapped metric's value.

    Example::

        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5, 0.6, 0.7, 0.8, 0.5, 0.4])
        >>> target = torch.tensor([1, 0, 0, 0, 0, 1, 1, 0, 0, 0])
        >>> lambda_input_transformer(fmetrics.binary_accuracy(), transform_pred=lambda p: 1 - p)(preds, target)
        tensor(0.6000, dtype=torch.float64)
    """
    return _transformed("lambda_input_transformer", metric, transform_pred, transform_target,
                        (_fn_key(transform_pred), _fn_key(transform_target)))


@factory
def binary_target_transformer(metric: Metric, *, threshold: float = 0) -> Metric:
    """``metric`` over binarized targets ``target > threshold`` (the target's dtype kept): ``BinaryTargetTransformer``.

    Args:
      metric: the wrapped `fmetrics.Metric` (positional).
      threshold: a real number (default 0); a target ``t`` becomes ``1`` where ``t > threshold``, else ``0``.

    Inputs:
      ``update(state, preds, target, *rest, **kwargs)``: ``target`` of any real dtype (kept).

    Returns:
      The wrapped metric's value.

    Example::

        >>> preds = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5, 0.6, 0.7, 0.8, 0.5, 0.4])
        >>> target = torch.tensor([1, 0, 0, 0, 0, 2, 1, 0, 0, 0])
        >>> topics = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1, 1, 1])
        >>> binary_target_transformer(fmetrics.retrieval_reciprocal_rank())(preds, target, topics)
        tensor(0.7500, dtype=torch.float64)
    """
    name = "binary_target_transformer"
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold != threshold:
        raise validation.fail(name, "threshold", "a real number (int or float, not NaN)", repr(threshold))

    def binarize(target):
        if not isinstance(target, torch.Tensor):
            raise validation.fail(name, "target", "a tensor", type(target).__name__)
        return target.gt(threshold).to(target.dtype)

    return _transformed(name, metric, None, binarize, (float(threshold),))
