"""`classwise`: a per-class tensor value as a labeled dict."""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory


@factory
def classwise(
    metric: Metric,
    *,
    labels: Optional[Sequence[str]] = None,
    prefix: Optional[str] = None,
    postfix: Optional[str] = None,
) -> Metric:
    """``{prefix + label + postfix: value[i]}`` for a metric whose value has one entry per class.

    As torchmetrics' ``ClasswiseWrapper``: ``labels`` default to the class
    indices; ``prefix`` defaults to ``"<metric name>_"`` when neither
    ``prefix`` nor ``postfix`` is given. The state, update and merge are the
    wrapped metric's (equal ``state_key``), so a collection holding both the
    metric and its class-wise view keeps one state.

    Args:
      metric: a `fmetrics.Metric` whose value has one entry per class on dim 0 (positional).
      labels: ``None`` (default: the class indices) or one distinct name per class.
      prefix: key prefix (default ``None``: ``"<metric name>_"`` unless ``postfix`` is given).
      postfix: key postfix (default ``None``: none).

    Inputs:
      ``update(state, *inputs)``: the wrapped metric's inputs.

    Returns:
      ``{prefix + label + postfix: value[i]}``; metadata is the wrapped metric's.

    Example::

        >>> acc = fmetrics.multiclass_accuracy(num_classes=2, average=None)
        >>> classwise(acc, labels=["cat", "dog"])(torch.tensor([0, 1, 1]), torch.tensor([0, 1, 0]))
        {'multiclass_accuracy_cat': tensor(0.5000, dtype=torch.float64), \
'multiclass_accuracy_dog': tensor(1., dtype=torch.float64)}
    """
    name = "classwise"
    if not isinstance(metric, Metric):
        raise validation.fail(name, "metric", "a fmetrics.Metric", type(metric).__name__)
    if labels is not None:
        labels = [str(label) for label in labels]
        if len(set(labels)) != len(labels):
            raise validation.fail(name, "labels", "distinct labels", repr(labels))
    for arg, value in (("prefix", prefix), ("postfix", postfix)):
        if value is not None and not isinstance(value, str):
            raise validation.fail(name, arg, "a string or None", repr(value))
    if prefix is None and postfix is None:
        prefix = f"{metric.name}_"

    def finalize(state):
        value = torch.as_tensor(metric.finalize(state))
        if value.dim() == 0 or (labels is not None and value.shape[0] != len(labels)):
            want = f"a value with {len(labels)} classes on dim 0" if labels is not None else "a per-class value"
            raise validation.fail(name, "labels", want, f"a value of shape {tuple(value.shape)}")
        names = labels if labels is not None else [str(i) for i in range(value.shape[0])]
        return {f"{prefix or ''}{label}{postfix or ''}": v for label, v in zip(names, value.unbind(0))}

    return metric.replace(finalize=finalize, name=f"{name}({metric.name})")
