"""NaN policy shared by the aggregation metrics (torchmetrics' ``nan_strategy``).

* ``"error"``   -- NaNs are dropped and counted; `finalize` raises with the count.
* ``"warn"``    -- NaNs are dropped and counted; `finalize` warns with the count.
* ``"ignore"``  -- NaNs are dropped silently.
* ``"disable"`` -- no check: NaNs propagate into the result.
* a float       -- NaNs are replaced by that value (their weight becomes 1).

``update`` never syncs: dropping is a mask, and the count lives in the state.
torchmetrics raises ``"error"`` inside ``update``; fmetrics raises in
``finalize`` so that the device is never synced per batch.
"""
from __future__ import annotations

import torch

from fmetrics import validation

POLICIES = ("error", "warn", "ignore", "disable")


def check(metric: str, nan_strategy) -> None:
    if isinstance(nan_strategy, bool) or not (
        nan_strategy in POLICIES or isinstance(nan_strategy, (int, float))
    ):
        raise validation.fail(metric, "nan_strategy", f"one of {POLICIES} or a float", repr(nan_strategy))


def as_tensor(metric: str, arg: str, x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise validation.fail(metric, arg, "a real tensor", f"dtype {x.dtype}")
        return x
    if isinstance(x, (bool, int, float)):
        return torch.as_tensor(x, dtype=torch.float64)
    raise validation.fail(metric, arg, "a tensor or a number", type(x).__name__)


def clean(nan_strategy, value: torch.Tensor, weight: torch.Tensor):
    """Returns ``(value, weight, nan_count)`` with NaNs handled per the policy.

    Dropped entries get value 0 and weight 0, so sums ignore them without a
    data-dependent shape.
    """
    if nan_strategy == "disable":
        return value, weight, torch.zeros((), dtype=torch.int64, device=value.device)
    nans = torch.isnan(value) | torch.isnan(weight)
    n = validation.count(nans)
    if isinstance(nan_strategy, str):
        return value.masked_fill(nans, 0), weight.masked_fill(nans, 0), n
    return value.masked_fill(nans, float(nan_strategy)), weight.masked_fill(nans, 1), n


def report(metric: str, nan_strategy, nan_count: torch.Tensor) -> None:
    if nan_strategy in ("error", "warn"):
        validation.report(metric, {"values must not be NaN (they were dropped)": nan_count}, nan_strategy)
