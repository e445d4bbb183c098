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

import math

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
    if torch.is_grad_enabled() and (x.requires_grad or any(y.requires_grad for y in partners)):
        return x * x
    return x.mul_(x)


def difference(a: torch.Tensor, b: torch.Tensor, like: torch.Tensor, exact: bool = True) -> torch.Tensor:
    """``a - b`` computed in the accumulator dtype of ``like``, in a fresh buffer the caller may overwrite.

    Few, short-lived temporaries: on CPU a batch's buffers then stay under
    glibc's trim threshold, so large batches do not page-fault on every update.
    ``exact=False``: in the inputs' own dtype when they are float32 / float64 of one dtype (`work_dtype`).
    """
    dtype = work_dtype(like.dtype, a, b, exact)
    if dtype != like.dtype:
        return torch.sub(a, b)
    return a.to(dtype, copy=True).sub_(b.to(dtype))


def work_dtype(acc: torch.dtype, a: torch.Tensor, b: torch.Tensor, exact: bool) -> torch.dtype:
    """The dtype of a batch's arithmetic: the accumulator's, or with ``exact=False`` the inputs' own when
    both are float32 / float64 of one dtype (half-precision and integer inputs stay exact: their sums
    would overflow or wrap)."""
    if exact or a.dtype != b.dtype or a.dtype not in (torch.float32, torch.float64):
        return acc
    return a.dtype


# ---------------------------------------------------------------- NaN / inf (docs/regression.md, "Bad input")

NAN_STRATEGIES = ("error", "warn", "ignore", "disable")
NONFINITE_RULE = "preds and target must be finite (no NaN or inf)"


def check_nan_strategy(name: str, nan_strategy) -> str:
    return validation.check_policy(name, "nan_strategy", nan_strategy, NAN_STRATEGIES)


def nan_mode(nan_strategy: str) -> str:
    """The update ``mode`` of a checked ``nan_strategy`` (`_shifted`, `_moments`): ``"off"`` for ``"disable"``,
    ``"count"`` for ``"error"``, ``"drop"`` for ``"warn"`` / ``"ignore"``."""
    return {"disable": "off", "error": "count"}.get(nan_strategy, "drop")


def raise_nonfinite(name: str, names, *inputs) -> None:
    """Raises quoting the non-finite values of ``inputs`` (a host read: eager CPU only); returns if there are none."""
    for arg, x in zip(names, inputs):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            bad = x[~torch.isfinite(x)]
            if bad.numel():
                raise ValueError(f"{name}: {arg} must be finite (nan_strategy='error'); found "
                                 f"{validation.quote(bad)}. Pass nan_strategy='ignore' or 'warn' to leave such "
                                 f"entries out, or 'disable' to let them propagate")


def check_sum(name: str, names, total, *inputs) -> None:
    """The eager check inside an ``update`` that sums its inputs anyway: a non-finite ``total`` (batch sums
    the update computed: a CPU tensor or a numpy array, summed as Python floats, faster than a numpy or torch
    call for a few values) means a non-finite input; the state is untouched since nothing is returned."""
    values = total.tolist()  # a view's ravel costs as much again after a large batch's passes
    if not math.isfinite(sum(map(sum, values)) if total.ndim == 2 else sum(values)):
        raise_nonfinite(name, names, *inputs)


def finite_check(name: str, names=("preds", "target")):
    """The eager check of ``nan_strategy="error"`` (``check=``): raises quoting the non-finite values (CPU, eager).

    A sum is finite when every entry is; only a non-finite sum (or one that
    overflowed) looks for the values to quote.
    """

    def check(*inputs, **kwargs):
        total = 0.0
        for x in inputs[:len(names)]:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                total += float(x.sum())  # native-dtype sum: fast; an overflow only costs the exact look below
        if not math.isfinite(total):
            raise_nonfinite(name, names, *inputs)

    return check


def deferred(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Whether ``update`` must count non-finite entries itself (``nan_strategy="error"``).

    Not where checking is free (CPU tensors, eager mode: `validation.mode`),
    where the update checks its own batch sums and raises at once; always
    under compile, vmap, on accelerators and in ``validation.mode("deferred")``.
    A branch on the mode and devices, never on data, so the update stays
    traceable.
    """
    return not validation.eager_check_applies_to(x, y)


def finite_ones(z: torch.Tensor) -> torch.Tensor:
    """``1`` where ``z`` is finite, NaN where it is not (one arithmetic pass; bool passes cost ~10x on CPU)."""
    return torch.add(torch.ones((), dtype=z.dtype, device=z.device), z, alpha=0)


def nonfinite_columns(z: torch.Tensor) -> torch.Tensor:
    """int64 ``(K,)`` non-finite entries per column of float ``(N, K)`` ``z``."""
    return (z.shape[0] - torch.nansum(finite_ones(z), 0)).to(torch.int64)


def flag_nonfinite(inv: validation.Invalid, *zs: torch.Tensor) -> validation.Invalid:
    """Folds the non-finite entries of float tensors ``zs`` (one update call) into ``inv``.

    The deferred path only (accelerators, compile, vmap, ``validation.mode("deferred")``).
    The first value is picked by reductions (``min`` of the offending positions,
    then a masked sum), not by gathering at an ``argmax``: under ``vmap`` in a
    compiled update (bootstrap's one-row states) a gather specializes on the
    batch size and recompiles every step.
    """
    values = zs[0].reshape(-1) if len(zs) == 1 else torch.cat([z.reshape(-1) for z in zs])
    bad = torch.isnan(finite_ones(values))
    n = validation.count(bad)
    pos = torch.arange(values.shape[0], device=values.device)
    k = torch.where(bad, pos, values.shape[0]).amin() if values.numel() else pos.sum()
    first = torch.where(pos == k, values, 0).sum().to(torch.float64)
    seen = inv.count > 0
    call = torch.where(seen, inv.call, torch.where(n > 0, inv.calls + 1, torch.zeros_like(inv.call)))
    return validation.Invalid(inv.count + n, torch.where(seen | (n == 0), inv.first, first), call, inv.calls + 1)


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
        validation.warn_empty(name, stacklevel=3)
        return True
    return False
