"""NaN / inf in image inputs: one rule, ``nan_strategy``, as the regression metrics (docs/image.md, "Bad input").

* ``"error"`` (default): on CPU tensors in eager mode `eager_check` raises before the update, quoting the
  values, so the caller's state is untouched. On accelerators, under ``torch.compile`` / ``vmap`` and in
  ``validation.mode("deferred")`` the update leaves the offending images out, counts their non-finite
  entries (a summed int64 ``nonfinite`` field: states still all-reduce) and `report` raises in ``finalize``.
* ``"warn"`` / ``"ignore"``: images with a non-finite entry are left out; ``finalize`` warns with the
  count / says nothing.
* ``"disable"``: no check, the fastest path; NaN propagates.

An image is one row along the batch axis, which all of a metric's inputs share.

Example::

    >>> ok, n = screen("ignore", torch.tensor([[[[1.0, float("nan")]]], [[[2.0, 3.0]]]]))
    >>> ok, n
    (tensor([False,  True]), tensor(1))
"""
from __future__ import annotations

import math
from typing import Literal, Optional

import torch

from fmetrics import validation

NanStrategy = Literal["error", "warn", "ignore", "disable"]
STRATEGIES = ("error", "warn", "ignore", "disable")
RULE = "images must be finite (no NaN or inf); pass nan_strategy='ignore' to leave such images out"


def check_strategy(name: str, nan_strategy) -> str:
    return validation.check_policy(name, "nan_strategy", nan_strategy, STRATEGIES)


def eager_check(name: str, names: tuple, nan_strategy: str):
    """The metric's ``check=`` for ``nan_strategy="error"`` (``None`` otherwise): raises quoting the non-finite
    values of the inputs ``names`` (CPU, eager). A finite sum means finite entries; only a non-finite sum (or
    one that overflowed) looks for the values."""
    if nan_strategy != "error":
        return None

    def check(*inputs, **kwargs):
        for arg, x in (*zip(names, inputs), *kwargs.items()):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and not math.isfinite(float(x.sum())):
                bad = x[~torch.isfinite(x)]
                if bad.numel():
                    raise ValueError(f"{name}: {arg} must be finite (nan_strategy='error'); found "
                                     f"{validation.quote(bad)}. Pass nan_strategy='ignore' or 'warn' to leave such "
                                     f"images out, or 'disable' to let NaN propagate")

    return check


def screen(nan_strategy: str, *xs: Optional[torch.Tensor]):
    """``(ok, n)`` for one update, or ``None`` where nothing is screened (``"disable"``; ``"error"`` where
    `eager_check` already ran; integer inputs). ``ok``: ``(N,)`` bool, True for the images whose entries are
    finite in every ``xs``; ``n``: int64 count of the non-finite entries. No host sync."""
    floats = [x for x in xs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    if not active(nan_strategy, *floats):
        return None
    per_image = sum((~torch.isfinite(x)).flatten(1).sum(1) for x in floats)
    return per_image == 0, per_image.sum()


def active(nan_strategy: str, *floats: torch.Tensor) -> bool:
    """Whether an update screens its float inputs ``floats`` (a branch on the policy, mode and devices, never
    on data: traceable)."""
    if nan_strategy == "disable" or not floats:
        return False
    return not (nan_strategy == "error" and validation.eager_check_applies_to(*floats))


def keep(ok: Optional[torch.Tensor], v: torch.Tensor) -> torch.Tensor:
    """``v`` (batch first) with the rows of the images that are not ``ok`` set to 0; ``v`` when ``ok`` is None."""
    if ok is None:
        return v
    return torch.where(ok.reshape(-1, *([1] * (v.dim() - 1))), v, 0)


def kept(ok: Optional[torch.Tensor], n: int):
    """The number of images kept of ``n`` (a tensor when screened)."""
    return n if ok is None else validation.count(ok)


def flags(ok: Optional[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """``ok``, or all True for the ``like.shape[0]`` images of an unscreened update (a chunk field)."""
    return torch.ones(like.shape[0], dtype=torch.bool, device=like.device) if ok is None else ok


def counted(total: torch.Tensor, screened) -> torch.Tensor:
    """``total`` plus this update's non-finite entries."""
    return total if screened is None else total + screened[1]


def report(name: str, nan_strategy: str, nonfinite: torch.Tensor) -> None:
    """``finalize``'s report: raises (``"error"``) or warns (``"warn"``) when non-finite entries were counted."""
    if nan_strategy in ("error", "warn"):
        validation.report(name, {RULE: nonfinite}, nan_strategy)
