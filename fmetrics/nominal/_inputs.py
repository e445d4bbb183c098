"""Nominal inputs: category labels (or one-hot / probability rows) with a NaN rule."""
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

    def labels(x: torch.Tensor) -> torch.Tensor:
        return x.argmax(1) if x.dim() == 2 else x

    def run(preds: torch.Tensor, target: torch.Tensor):
        p, t = labels(preds), labels(target)
        if not (p.is_floating_point() or t.is_floating_point()):
            return p, t, None
        if nan_strategy == "replace":
            return torch.nan_to_num(p, nan=float(nan_replace_value)), torch.nan_to_num(t, nan=float(nan_replace_value)), None
        return p, t, ~(p.isnan() | t.isnan())

    return run
