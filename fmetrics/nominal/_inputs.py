"""Nominal inputs: category labels (or one-hot / probability rows) with a NaN rule.

NaN follows ``nan_strategy``: ``"replace"`` makes it ``nan_replace_value``,
``"drop"`` leaves the observation out. In 2-D rows (one-hot / probabilities,
reduced to their argmax) a NaN score is replaced before the argmax, or drops
the row. An infinite category is no category: the contingency family rejects it.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch

from fmetrics import validation

__all__ = ["NanStrategy", "check_nan_options", "prepare"]

NanStrategy = Literal["replace", "drop"]


def check_nan_options(name: str, nan_strategy: str, nan_replace_value) -> None:
    validation.check_policy(name, "nan_strategy", nan_strategy, ("replace", "drop"))
    if nan_strategy == "replace" and (isinstance(nan_replace_value, bool)
                                      or not isinstance(nan_replace_value, (int, float))):
        raise validation.fail(name, "nan_replace_value", "a number when nan_strategy='replace'",
                              repr(nan_replace_value))


def prepare(nan_strategy: str, nan_replace_value: Optional[float]):
    """``(preds, target) -> (preds, target, keep)``: 2-D rows become their argmax; NaN replaced or masked out."""
    replace = nan_strategy == "replace"

    def labels(x: torch.Tensor) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        """``(labels, NaN mask or None)``; under "replace" no NaN is left."""
        if not x.is_floating_point():
            return (x.argmax(1) if x.dim() == 2 else x), None
        nan = x.isnan()
        if replace:
            x = torch.where(nan, float(nan_replace_value), x)
        if x.dim() == 2:
            x, nan = x.argmax(1), nan.any(1)
        return x, (None if replace else nan)

    def run(preds: torch.Tensor, target: torch.Tensor):
        (p, nan_p), (t, nan_t) = labels(preds), labels(target)
        if nan_p is None and nan_t is None:
            return p, t, None
        drop = nan_p if nan_t is None else (nan_t if nan_p is None else nan_p | nan_t)
        return p, t, ~drop

    return run
