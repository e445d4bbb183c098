"""Validation without host syncs.

Shapes, dtypes and configuration are metadata: `update` checks them eagerly
and raises `ValueError` before the state is touched. Value rules (labels out of
range, NaN, probabilities outside [0, 1]) are checked in one of two ways:

* **eager** -- where checking is free (CPU tensors, eager mode, no vmap), a
  metric's ``check(*inputs)`` runs before `update` and raises at once, quoting
  the offending values; the state is untouched, so nothing is lost;
* **deferred** -- on accelerators and under ``torch.compile`` / ``vmap``,
  `update` counts offending entries into an `Invalid` state field (with the
  first offending value and the update call it came from) and `finalize`
  raises (or warns) through `report`.

`mode` picks: ``"auto"`` (default: eager where free), ``"eager"`` or
``"deferred"``. The deferred counts are kept in every mode, so a compiled or
vmapped update still reports in `finalize`.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator, Mapping, NamedTuple, Optional

import torch

__all__ = ["fail", "warn_empty", "check_policy", "report", "count", "mode", "get_mode", "traced", "eager_check_applies",
           "check_device", "quote", "Invalid", "invalid_init", "invalid_flag", "invalid_merge", "invalid_report"]

MODES = ("auto", "eager", "deferred")
_MODE = ["auto"]


@contextlib.contextmanager
def mode(value: str) -> Iterator[None]:
    """Within the block, value checks run ``"eager"``, ``"deferred"`` or ``"auto"`` (eager where free).

    Example::

        >>> m = fmetrics.multiclass_accuracy(num_classes=3)
        >>> with fmetrics.validation.mode("deferred"):   # as on a GPU: counted, raised by finalize
        ...     s = m.update(m.init(), torch.tensor([0, 1]), torch.tensor([0, 7]))
        >>> m.finalize(s)
        Traceback (most recent call last):
        ...
        ValueError: multiclass_accuracy: 1 input entry broke the rule: ...
    """
    check_policy("validation.mode", "value", value, MODES)
    old = _MODE[0]
    _MODE[0] = value
    try:
        yield
    finally:
        _MODE[0] = old


def get_mode() -> str:
    return _MODE[0]


def _tensors(inputs, kwargs):
    for x in (*inputs, *kwargs.values()):
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, Mapping):
            yield from (v for v in x.values() if isinstance(v, torch.Tensor))


def traced() -> bool:
    """Inside ``torch.compile`` or a ``torch.func`` transform (vmap, grad): where a host read, a
    data-dependent shape or a Python loop over the data would break or unroll the trace.

    Example::

        >>> traced()
        False
    """
    return torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()


def eager_check_applies(inputs, kwargs) -> bool:
    """Whether a metric's eager value check runs now (see `mode`)."""
    return eager_check_applies_to(*_tensors(inputs, kwargs))


def eager_check_applies_to(*xs: torch.Tensor) -> bool:
    """`eager_check_applies` for the tensors ``xs`` themselves (the per-update hot paths: no input walk; the
    mode, then the trace (first: no graph break), then the devices, in few frames: after a large batch's
    passes each Python call costs ~1 µs)."""
    m = _MODE[0]
    if m != "auto":
        return m == "eager"
    if traced():
        return False
    for x in xs:
        if not x.is_cpu or torch._is_functional_tensor(x):
            return False
    return True


def check_device(metric: str, device: torch.device, inputs, kwargs) -> None:
    """Raises when an input tensor is on another device than the state."""
    for x in _tensors(inputs, kwargs):
        if x.device != device and not (x.dim() == 0 and x.device.type == "cpu"):
            raise ValueError(f"{metric}: an input is on {x.device} but the state is on {device}; "
                             f"move the inputs, or create the state with init(device={str(x.device)!r})")


def quote(values: torch.Tensor, limit: int = 3) -> str:
    """``"5 and 7 (3 entries)"``: the distinct offending values (a host read; eager checks only)."""
    flat = values.reshape(-1)
    distinct = torch.unique(flat)[:limit].tolist()
    shown = [repr(v) if isinstance(v, float) else str(v) for v in distinct]
    text = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    if flat.numel() > len(shown):
        text += f" ({flat.numel()} entries)"
    return text


class Invalid(NamedTuple):
    """Deferred record of entries that broke a value rule.

    ``count`` offending entries; ``first`` the first offending value;
    ``call`` the 1-based update call it came from (0: none); ``calls`` the
    number of updates folded in. Merge with `invalid_merge` (tag ``None``).
    """

    count: torch.Tensor
    first: torch.Tensor
    call: torch.Tensor
    calls: torch.Tensor


def invalid_init() -> Invalid:
    z = torch.zeros((), dtype=torch.int64)
    # three distinct tensors: fields that alias each other make a compiled update recompile after the first step
    # `first` starts at 0 (read only when count > 0): a NaN would make equal states compare unequal
    return Invalid(z, torch.zeros((), dtype=torch.float64), z.clone(), z.clone())


def invalid_flag(inv: Invalid, bad: torch.Tensor, values: torch.Tensor) -> Invalid:
    """Folds one update's offending entries (``bad`` mask over ``values``) into ``inv``; no host sync.

    A record with ``count == 0`` holds ``first == call == 0`` (`invalid_init`), and an update with no
    offending entry gives a candidate ``first`` of 0, so keeping the old fields or taking this
    update's is one ``where`` each.
    """
    bad = bad.reshape(-1)
    n = count(bad)
    if bad.numel():
        # by reductions (min offending position, masked sum), not a gather at an argmax: under vmap in a
        # compiled update (bootstrap / grouped one-row states) the gather specialized on the batch size
        pos = torch.arange(bad.shape[0], device=bad.device)
        k = torch.where(bad, pos, bad.shape[0]).amin()
        first = torch.where(pos == k, values.reshape(-1), 0).sum().to(torch.float64)
    else:
        first = torch.zeros_like(inv.first)
    seen = inv.count > 0
    calls = inv.calls + 1
    return Invalid(inv.count + n, torch.where(seen, inv.first, first),
                   torch.where(seen, inv.call, calls * (n > 0)), calls)


def invalid_merge(a: Invalid, b: Invalid) -> Invalid:
    seen = a.count > 0
    call = torch.where(seen, a.call, torch.where(b.count > 0, a.calls + b.call, torch.zeros_like(a.call)))
    return Invalid(a.count + b.count, torch.where(seen, a.first, b.first), call, a.calls + b.calls)


def invalid_report(metric: str, rule: str, inv: Invalid, policy: Optional[str] = None) -> None:
    """Raises (or warns) in `finalize` when ``inv`` holds offending entries; valid entries were all kept.

    ``policy`` is the metric's own policy option (``"error"``, ``"warn"``, ``"ignore"``); ``None`` for a
    metric without one (it raises, and the message does not suggest a policy).
    """
    remedy = "fix the input" if policy is None else "fix the input or use a policy that ignores it"
    policy = policy or "error"
    if policy == "ignore":
        return
    n = int(inv.count)
    if not n:
        return
    first = float(inv.first)
    shown = str(int(first)) if first.is_integer() else repr(first)
    msg = (f"{metric}: {n} input entr{'y' if n == 1 else 'ies'} broke the rule: {rule}; the first was {shown} "
           f"in update call {int(inv.call)}. The valid entries were counted; {remedy}")
    if policy == "error":
        raise ValueError(msg)
    warnings.warn(msg, UserWarning, stacklevel=3)

POLICIES = ("error", "warn", "ignore")


def warn_empty(metric: str, stacklevel: int = 2) -> None:
    """The one empty-input warning of ``finalize`` (docs/conventions.md): the value is NaN.

    ``stacklevel`` counts from the caller, as for `warnings.warn`.
    """
    warnings.warn(f"{metric}: no samples were seen (empty input); the value is undefined and set to NaN",
                  UserWarning, stacklevel=stacklevel + 1)


def fail(metric: str, arg: str, expected: str, got: Any = None) -> "ValueError":
    """The library's error for bad configuration or input, ready to raise."""
    msg = f"{metric}: argument `{arg}` expected {expected}"
    if got is not None:
        msg += f", got {got}"
    return ValueError(msg)


def check_policy(metric: str, arg: str, value: str, allowed=POLICIES) -> str:
    if value not in allowed:
        raise fail(metric, arg, f"one of {allowed}", repr(value))
    return value


def count(mask: torch.Tensor) -> torch.Tensor:
    """Number of ``True`` entries as an int64 0-d tensor (stays on device).

    ``count_nonzero`` measured ~1.3x faster than ``sum(dtype=int64)`` on 10^6 bools, ~2x on 16.
    """
    return torch.count_nonzero(mask)


def report(metric: str, counts: Mapping[str, torch.Tensor], policy: str = "error") -> None:
    """Raises or warns in `finalize` for each rule with a non-zero count.

    ``counts`` maps a rule ("labels in [0, num_classes)") to the number of
    entries that broke it. This is the one place a value check syncs.
    """
    if policy == "ignore":
        return
    for rule, n in counts.items():
        n = int(n)
        if n:
            msg = (f"{metric}: {n} input entr{'y' if n == 1 else 'ies'} broke the rule: {rule} "
                   "(the valid entries were counted)")
            if policy == "error":
                raise ValueError(msg)
            warnings.warn(msg, UserWarning, stacklevel=3)
