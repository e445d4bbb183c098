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

import warnings

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


# ---------------------------------------------------------------- NaN / inf (docs/regression.md, "Bad input")

NAN_STRATEGIES = ("error", "warn", "ignore", "disable")
NONFINITE_RULE = "preds and target must be finite (no NaN or inf)"


def check_nan_strategy(name: str, nan_strategy) -> str:
    return validation.check_policy(name, "nan_strategy", nan_strategy, NAN_STRATEGIES)


def finite_check(name: str, names=("preds", "target")):
    """The eager check of ``nan_strategy="error"``: raises quoting the first non-finite values (CPU, eager).

    A float32 sum is finite exactly when every entry is (barring overflow of
    huge values, which then takes the exact test): one cheap pass per input.
    """

    def check(*inputs, **kwargs):
        for arg, x in zip(names, inputs):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() \
                    and not bool(torch.isfinite(x.sum())):
                bad = x[~torch.isfinite(x)]
                if bad.numel():
                    raise ValueError(f"{name}: {arg} must be finite (nan_strategy='error'); found "
                                     f"{validation.quote(bad)}. Pass nan_strategy='ignore' or 'warn' to leave "
                                     f"such entries out, or 'disable' to let them propagate")

    return check


def finite_ones(z: torch.Tensor) -> torch.Tensor:
    """``1`` where ``z`` is finite, NaN where it is not (one arithmetic pass; bool passes cost ~10x on CPU)."""
    return torch.add(torch.ones((), dtype=z.dtype, device=z.device), z, alpha=0)


def nonfinite_columns(z: torch.Tensor) -> torch.Tensor:
    """int64 ``(K,)`` non-finite entries per column of float ``(N, K)`` ``z``."""
    return (z.shape[0] - torch.nansum(finite_ones(z), 0)).to(torch.int64)


def flag_nonfinite(inv: validation.Invalid, *zs: torch.Tensor) -> validation.Invalid:
    """Folds the non-finite entries of float ``(N, K)`` tensors ``zs`` (one update call) into ``inv``.

    No bool pass over the batch: counts per column from `finite_ones`; the
    first value is the first non-finite entry of the first column holding one.
    """
    n = torch.zeros((), dtype=torch.int64, device=inv.count.device)
    first = torch.full((), float("nan"), dtype=torch.float64, device=inv.count.device)
    found = torch.zeros((), dtype=torch.bool, device=inv.count.device)
    for z in zs:
        if not z.numel():
            continue
        ones = finite_ones(z)
        per_column = (z.shape[0] - torch.nansum(ones, 0)).to(torch.int64)
        j = torch.argmax((per_column > 0).to(torch.uint8))
        row = torch.argmax(torch.isnan(ones.index_select(1, j.reshape(1))[:, 0]).to(torch.uint8))
        here = per_column.sum()
        flat = (row * z.shape[1] + j).reshape(1)
        first = torch.where(found, first, z.reshape(-1).index_select(0, flat)[0].to(torch.float64))
        found = found | (here > 0)
        n = n + here
    seen = inv.count > 0
    call = torch.where(seen, inv.call, torch.where(n > 0, inv.calls + 1, torch.zeros_like(inv.call)))
    return validation.Invalid(inv.count + n, torch.where(seen, inv.first, first), call, inv.calls + 1)


def row_weights(z: torch.Tensor) -> torch.Tensor:
    """float ``(N,)``: 1 for rows of ``(N, ...)`` ``z`` without NaN/inf, 0 for the others."""
    return torch.nan_to_num(finite_ones(z.flatten(1).sum(1) if z.dim() > 1 else z), nan=0.0)


def report_count(name: str, policy: str, count: torch.Tensor) -> None:
    """`finalize`'s report of non-finite entries counted without a first value (sum-mergeable states)."""
    if policy in ("error", "warn"):
        validation.report(name, {f"{NONFINITE_RULE}; pass nan_strategy='ignore' to leave them out": count.sum()},
                          policy)


def report_invalid(name: str, policy: str, inv: validation.Invalid) -> None:
    if policy in ("error", "warn"):
        validation.invalid_report(name, NONFINITE_RULE, inv, policy)


def empty(name: str, n) -> bool:
    """Warns (and returns True) when no sample was seen: the value is then NaN (docs/conventions.md)."""
    if int(torch.as_tensor(n).min()) == 0:
        warnings.warn(f"{name}: no samples were seen (empty input); the value is undefined and set to NaN",
                      UserWarning, stacklevel=3)
        return True
    return False
