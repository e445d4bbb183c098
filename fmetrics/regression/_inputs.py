"""Input checks shared by the regression metrics (eager: metadata only, no host sync).

* `pair(name, preds, target)` -- two real tensors of the same shape.
* `columns(name, x, num_outputs, flatten)` -- the ``(N, D)`` view the metric
  reduces over: with ``num_outputs == 1`` either every element is a sample
  (``flatten=True``, as torchmetrics' MSE/MAE) or ``(N,)`` / ``(N, 1)`` is
  required (correlations); with ``num_outputs > 1`` the data must be
  ``(N, num_outputs)``.
* `check_num_outputs`, `check_choice`, `check_policy`: configuration checks.
"""
from __future__ import annotations

import torch

from fmetrics import validation

POLICIES = ("error", "warn", "ignore")


def check_num_outputs(name: str, num_outputs) -> int:
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 1:
        raise validation.fail(name, "num_outputs", "a positive int", repr(num_outputs))
    return num_outputs


def check_choice(name: str, arg: str, value, allowed: tuple):
    if value not in allowed:
        raise validation.fail(name, arg, f"one of {allowed}", repr(value))
    return value


def check_bool(name: str, arg: str, value) -> bool:
    if not isinstance(value, bool):
        raise validation.fail(name, arg, "a bool", repr(value))
    return value


def check_policy(name: str, on_invalid: str) -> str:
    return validation.check_policy(name, "on_invalid", on_invalid, POLICIES)


def real(name: str, arg: str, x) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise validation.fail(name, arg, "a tensor", type(x).__name__)
    if x.is_complex():
        raise validation.fail(name, arg, "a real tensor", f"dtype {x.dtype}")
    return x


def pair(name: str, preds, target, names=("preds", "target")):
    preds, target = real(name, names[0], preds), real(name, names[1], target)
    if preds.shape != target.shape:
        raise validation.fail(name, names[1], f"the shape of {names[0]} {tuple(preds.shape)}", tuple(target.shape))
    return preds, target


def columns(name: str, x: torch.Tensor, num_outputs: int, flatten: bool) -> torch.Tensor:
    """``x`` as ``(N, num_outputs)`` (see the module docstring)."""
    if num_outputs == 1:
        if flatten:
            return x.reshape(-1, 1)
        if x.dim() == 1 or (x.dim() == 2 and x.shape[1] == 1):
            return x.reshape(-1, 1)
        raise validation.fail(name, "num_outputs", f"1 to match data of shape (N,) or (N, 1), got data of shape "
                              f"{tuple(x.shape)}; set num_outputs", "1")
    if x.dim() != 2 or x.shape[1] != num_outputs:
        raise validation.fail(name, "preds", f"shape (N, num_outputs={num_outputs})", tuple(x.shape))
    return x


def as_acc(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``x`` in the accumulator dtype of the state field ``like``."""
    return x.to(like.dtype)


def square(x: torch.Tensor, *partners: torch.Tensor) -> torch.Tensor:
    """``x * x``, in place (no new buffer) unless autograd tracks ``x`` or a ``partner`` whose
    gradient needs ``x``'s value: the metrics stay differentiable."""
    tracked = torch.is_grad_enabled() and any(y.requires_grad for y in (x, *partners))
    return x * x if tracked else x.mul_(x)


def difference(a: torch.Tensor, b: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``a - b`` computed in the accumulator dtype of ``like``, in a fresh buffer the caller may overwrite.

    Few, short-lived temporaries: on CPU a batch's buffers then stay under
    glibc's trim threshold, so large batches do not page-fault on every update.
    """
    return a.to(like.dtype, copy=True).sub_(b.to(like.dtype))
