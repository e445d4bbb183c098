"""NaN policy and fast sums shared by the aggregation metrics (torchmetrics' ``nan_strategy``).

* ``"error"``   -- NaNs are left out and counted; `finalize` raises with the count.
* ``"warn"``    -- NaNs are left out and counted; `finalize` warns with the count.
* ``"ignore"``  -- NaNs are left out silently.
* ``"disable"`` -- no check: NaNs propagate into the result.
* a float       -- NaNs are replaced by that value (their weight becomes 1).

``update`` never syncs: leaving out is ``nansum`` / a mask, and the count lives in
the state. torchmetrics raises ``"error"`` inside ``update``; fmetrics raises
in ``finalize`` so that the device is never synced per batch.

On CPU in eager mode an update first computes its one reduction (the sum,
or the extremum) and reads that scalar: a NaN in the input makes it NaN, so
when it is not, the batch has no NaN and the counting passes are skipped
(`unscreened`). Elsewhere (accelerators, compile, vmap) the update takes the
branch-free path and never syncs.

Precision: sums reduce straight into float64 (``sum(dtype=float64)`` casts
inside the reduction, with no float64 copy of the batch), so results do not
depend on how the stream was batched, and long streams do not drift.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from fmetrics import validation

POLICIES = ("error", "warn", "ignore", "disable")
_EXACT_F32_COUNT = 2**24  # float32 counts integers exactly up to here
LARGE, CHUNK = 2**22, 2**16  # `total`: from LARGE entries a CPU input is summed CHUNK entries at a time


def check(metric: str, nan_strategy) -> None:
    if isinstance(nan_strategy, bool) or not (
        nan_strategy in POLICIES or isinstance(nan_strategy, (int, float))
    ):
        raise validation.fail(metric, "nan_strategy", f"one of {POLICIES} or a float", repr(nan_strategy))


def drops(nan_strategy) -> bool:
    """The policy drops NaNs (``error``, ``warn``, ``ignore``)."""
    return isinstance(nan_strategy, str) and nan_strategy != "disable"


def as_tensor(metric: str, arg: str, x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise validation.fail(metric, arg, "a real tensor", f"dtype {x.dtype}")
        return x
    if isinstance(x, (bool, int, float)):
        return torch.as_tensor(x, dtype=torch.float64)
    raise validation.fail(metric, arg, "a tensor or a number", type(x).__name__)


def _floating(x: torch.Tensor) -> torch.Tensor:
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def total(x: torch.Tensor, skip_nan: bool = False) -> torch.Tensor:
    """float64 0-d sum of ``x`` (NaNs skipped with ``skip_nan``).

    On the CPU in eager mode a non-float64 ``x`` of `LARGE` entries or more is
    summed `CHUNK` entries at a time: torch's ``sum(dtype=float64)`` first casts
    the whole input to a float64 copy, and glibc maps a copy of 32 MiB or more
    afresh on every call (page faults: 19 ms for 2^22 float32 entries, whose
    float32 sum takes 0.9 ms; in chunks, 2-3 ms). Only the float64 rounding of
    the partial sums changes.
    """
    if x.numel() >= LARGE and x.dtype != torch.float64 and x.is_cpu and not validation.traced():
        return torch.stack([total(c, skip_nan) for c in x.reshape(-1).split(CHUNK)]).sum()
    if skip_nan and x.is_floating_point():
        return torch.nansum(x, dtype=torch.float64)
    return x.sum(dtype=torch.float64)


def unscreened(x: torch.Tensor, reduce) -> Optional[torch.Tensor]:
    """``reduce(x)`` when it shows that float ``x`` has no NaN (CPU, eager: one host read), else ``None``.

    A NaN entry makes a sum or an extremum NaN (so does ``inf - inf``, which
    merely takes the counting path). ``None`` also where reading the scalar
    would sync or break a trace (`validation.eager_check_applies`), and for
    non-float ``x`` (no NaN to count: the plain path is already one pass).
    """
    if not x.is_floating_point() or not validation.eager_check_applies_to(x):
        return None
    value = reduce(x)
    return None if math.isnan(value) else value


def nan_count(x: torch.Tensor) -> torch.Tensor:
    """int64 0-d number of NaNs in ``x`` without a boolean pass.

    ``clamp(x, 1, 1)`` is 1 for every number (infinities included) and NaN for
    NaN, so ``numel - nansum(clamp(x, 1, 1))`` counts the NaNs in two cheap
    passes (a boolean ``isnan(x).sum()`` costs several times more on CPU).
    """
    if not x.is_floating_point():
        return torch.zeros((), dtype=torch.int64, device=x.device)
    ones = torch.clamp(_floating(x), 1, 1)
    if ones.numel() >= _EXACT_F32_COUNT:
        ones = ones.double()
    return (x.numel() - torch.nansum(ones)).to(torch.int64)


def replace(nan_strategy, x: torch.Tensor) -> torch.Tensor:
    """``x`` with NaNs replaced by the float policy's value (infinities kept)."""
    return torch.nan_to_num(x, nan=float(nan_strategy), posinf=torch.inf, neginf=-torch.inf)


def clean(nan_strategy, value: torch.Tensor, weight: torch.Tensor):
    """Returns ``(value, weight, nan_count)`` with NaNs in either handled per the policy.

    Left-out entries get value 0 and weight 0, so sums ignore them without a
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
        validation.report(metric, {"values must not be NaN; pass nan_strategy='ignore' to leave them out "
                                   "silently": nan_count}, nan_strategy)
