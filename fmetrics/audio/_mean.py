"""Builder for the audio metrics: the stream mean of a per-example value, and the audio bad-input rules.

Every audio metric computes one value per example (per signal, per
``(..., time)`` row): SNR, SI-SDR, SDR, STOI, PESQ, ... The metric is the mean
of those values over the stream (torchmetrics' classes do the same), kept as a
float64 ``total`` and an int64 ``count`` (sums) beside the deferred record of
non-finite input (`fmetrics.validation.Invalid`). With ``per_example=True``
the state instead keeps the values themselves (a concatenating field) and
`finalize` returns them, concatenated along the first axis: the per-example
output of torchmetrics' functional form.

Bad input (docs/audio.md, "Bad input"): a zero-length signal is a shape error
(`signal_pair`); NaN / inf follow ``nan_strategy`` (``"error"`` by default:
raised at once on CPU in eager mode, quoting the values, else counted and
raised by `finalize`; ``"warn"`` / ``"ignore"`` leave the example out;
``"disable"`` lets it propagate); no example at all gives NaN and a warning.
"""
from __future__ import annotations

import math
from typing import Callable, Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks

NanStrategy = Literal["error", "warn", "ignore", "disable"]
NAN_STRATEGIES = ("error", "warn", "ignore", "disable")
NONFINITE_RULE = "preds and target must be finite (no NaN or inf)"


class MeanState(NamedTuple):
    total: torch.Tensor  # float64 (): sum of the per-example values
    count: torch.Tensor  # int64 (): number of examples
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


class ValuesState(NamedTuple):
    values: tuple  # chunks of float64 per-example values, concatenated along dim 0 (NaN: left out)
    invalid: validation.Invalid  # non-finite input entries (nan_strategy)


def merge_mean(a: MeanState, b: MeanState) -> MeanState:
    return MeanState(a.total + b.total, a.count + b.count, validation.invalid_merge(a.invalid, b.invalid))


def merge_values(a: ValuesState, b: ValuesState) -> ValuesState:
    return ValuesState(tuple(a.values) + tuple(b.values), validation.invalid_merge(a.invalid, b.invalid))


def check_bool(name: str, arg: str, value) -> bool:
    if not isinstance(value, bool):
        raise validation.fail(name, arg, "a bool", repr(value))
    return value


def check_choice(name: str, arg: str, value, allowed: tuple):
    if value not in allowed:
        raise validation.fail(name, arg, f"one of {allowed}", repr(value))
    return value


def nonempty(name: str, arg: str, x: torch.Tensor, what: str, axes: int = 1) -> None:
    """Raises when one of the last ``axes`` axes of ``x`` (time; speakers, frequency) has length 0."""
    if 0 in x.shape[x.dim() - axes:]:
        raise validation.fail(name, arg, f"signals of shape {what} with at least one sample (a zero-length "
                              "signal has no value)", f"shape {tuple(x.shape)}")


def signal_pair(name: str, preds, target, min_dim: int = 1, what: str = "(..., time)"):
    """Two real floating tensors of one shape with at least ``min_dim`` dims whose last ``min_dim`` axes
    are not empty (metadata checks only)."""
    for arg, x in (("preds", preds), ("target", target)):
        if not isinstance(x, torch.Tensor):
            raise validation.fail(name, arg, "a tensor", type(x).__name__)
        if not x.is_floating_point():
            raise validation.fail(name, arg, "a real floating-point tensor", f"dtype {x.dtype}")
        if x.dim() < min_dim:
            raise validation.fail(name, arg, f"a tensor of shape {what}", f"shape {tuple(x.shape)}")
    if preds.shape != target.shape:
        raise validation.fail(name, "target", f"the shape of preds {tuple(preds.shape)}", tuple(target.shape))
    nonempty(name, "preds", preds, what, min_dim)
    return preds, target


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float32 for half inputs, else the input's dtype (float32 / float64)."""
    return x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32


# ---------------------------------------------------------------- NaN / inf (nan_strategy)

def check_nan_strategy(name: str, nan_strategy) -> str:
    return validation.check_policy(name, "nan_strategy", nan_strategy, NAN_STRATEGIES)


def _real(x: torch.Tensor) -> torch.Tensor:
    return torch.view_as_real(x) if x.is_complex() else x


def finite_check(name: str):
    """The eager check of ``nan_strategy="error"``: raises quoting the non-finite values (CPU, eager).

    One sum per input: a sum is finite when every entry is; only a non-finite
    sum (or one that overflowed) looks for the values to quote.
    """

    def check(*inputs, **kwargs):
        for arg, x in zip(("preds", "target"), inputs):
            if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
                x = _real(x.detach())
                if not math.isfinite(float(x.sum())):
                    bad = x[~torch.isfinite(x)]
                    if bad.numel():
                        raise ValueError(f"{name}: {arg} must be finite (nan_strategy='error'); found "
                                         f"{validation.quote(bad)}. Pass nan_strategy='ignore' or 'warn' to "
                                         "leave such examples out, or 'disable' to let them propagate")

    return check


def screens(nan_strategy: str, *xs: torch.Tensor) -> bool:
    """Whether ``update`` looks for non-finite entries itself: with ``"warn"`` / ``"ignore"``, and with
    ``"error"`` where the eager check did not run (accelerators, compile, vmap: `validation.mode`). A
    branch on the policy, mode and devices, never on data: the update stays traceable."""
    if nan_strategy == "error":
        return not validation.eager_check_applies_to(*xs)
    return nan_strategy != "disable"


def _nonfinite_rows(dims: int, x: torch.Tensor):
    """``(count, total)`` per example (the leading ``dims`` axes of ``x``): int64 non-finite entries and the
    sum of its entries (NaN or +-inf where there is one).

    Arithmetic passes only (a bool ``isfinite`` pass measured ~15x slower than a sum on CPU):
    ``0.0 * x + 1`` is 1 where ``x`` is finite and NaN where not, so its NaN-skipping sum counts the finite
    entries (exactly: in float32 below 2^24 entries an example, float64 above). The factor is the float
    ``0.0``: inductor folds a product by the int ``0`` to zeros.
    """
    x = _real(x.detach()).flatten(dims)
    ones = torch.mul(x, 0.0).add_(1)
    exact = torch.float64 if x.shape[-1] >= 2 ** 24 else compute_dtype(x)
    count = (x.shape[-1] - torch.nansum(ones, -1, dtype=exact)).to(torch.int64)
    return count, x.sum(-1, dtype=compute_dtype(x))


def nonfinite(inv: validation.Invalid, dims: int, preds: torch.Tensor, target: torch.Tensor):
    """``(kept, invalid)`` of one update call: bool per example (the leading ``dims`` axes), True where
    ``preds`` and ``target`` have no NaN / inf entry, and ``inv`` with the call's non-finite entries folded
    in (no host sync). The first offender recorded is the sum of the first bad example's preds (or target)
    entries: its NaN / inf value, NaN where it mixes them."""
    (cp, sp), (ct, st) = _nonfinite_rows(dims, preds), _nonfinite_rows(dims, target)
    counts = torch.stack([cp.reshape(-1), ct.reshape(-1)], -1).reshape(-1)  # example by example, preds first
    sums = torch.stack([sp.reshape(-1), st.reshape(-1)], -1).reshape(-1)
    flagged = validation.invalid_flag(inv, counts > 0, sums)
    return (cp + ct) == 0, flagged._replace(count=inv.count + counts.sum())


def unflagged(inv: validation.Invalid) -> validation.Invalid:
    """``inv`` after an update call that did not look (eager-checked or ``"disable"``): the same record as
    `nonfinite` keeps for a clean batch."""
    return inv._replace(calls=inv.calls + 1)


def report(name: str, nan_strategy: str, inv: validation.Invalid, count=None) -> None:
    """`finalize`'s report: non-finite input per ``nan_strategy``, then (``count``) the empty-input warning.

    Skipped inside a trace (`validation.traced`): `permutation_invariant_training` scores each example by
    the inner metric's ``finalize`` inside its own update, and reports bad input itself.
    """
    if validation.traced():
        return
    if nan_strategy in ("error", "warn"):
        validation.invalid_report(name, NONFINITE_RULE, inv, nan_strategy)
    if count is not None and int(count) == 0:
        validation.warn_empty(name, stacklevel=3)


# ---------------------------------------------------------------- the builder

def per_example_mean(name: str, values: Callable[..., torch.Tensor], per_example: bool, key: tuple,
                     nan_strategy: str = "error", **metadata) -> Metric:
    """The stream mean (or, with ``per_example``, the list) of ``values(*inputs)``.

    ``values`` checks its inputs and returns one float value per example,
    shape ``(...,)``: the leading axes of ``preds`` (it may carry autograd
    history: the one-shot call stays differentiable). ``key`` names the state
    (equal keys share one state). Examples with a non-finite entry are left
    out (NaN among the per-example values) unless ``nan_strategy="disable"``.
    """
    check_bool(name, "per_example", per_example)
    check_nan_strategy(name, nan_strategy)

    def screened(state, inputs):
        """``(values, kept, invalid)`` of one batch: ``kept`` None when every example is kept."""
        v = values(*inputs)
        if not screens(nan_strategy, *inputs[:2]):
            return v, None, unflagged(state.invalid)
        pair = inputs[:2] if len(inputs) > 1 else (inputs[0], inputs[0].new_zeros((*inputs[0].shape[:-1], 1)))
        return (v, *nonfinite(state.invalid, v.dim(), *pair))

    if per_example:
        def init():
            return ValuesState((), validation.invalid_init())

        def update(state, *inputs):
            v, kept, invalid = screened(state, inputs)
            v = v.to(accum_dtype(inputs[0].device))
            if kept is not None:
                v = torch.where(kept, v, torch.nan)
            return ValuesState((v.reshape(1) if v.dim() == 0 else v,), invalid)

        def finalize(state):
            report(name, nan_strategy, state.invalid)
            return cat_chunks(state.values, torch.zeros(0, dtype=accum_dtype()))

        tags, merge = ValuesState(values="cat", invalid=None), merge_values
    else:
        def init():
            return MeanState(torch.zeros((), dtype=accum_dtype()), torch.zeros((), dtype=torch.int64),
                             validation.invalid_init())

        def update(state, *inputs):
            v, kept, invalid = screened(state, inputs)
            if kept is None:
                return MeanState(state.total + v.sum(dtype=state.total.dtype), state.count + v.numel(), invalid)
            total = torch.where(kept, v, 0).sum(dtype=state.total.dtype)
            return MeanState(state.total + total, state.count + validation.count(kept), invalid)

        def finalize(state):
            report(name, nan_strategy, state.invalid, state.count)
            return state.total / state.count

        tags, merge = MeanState(total="sum", count="sum", invalid=None), merge_mean
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=name,
                  state_key=("audio", *key, nan_strategy, per_example), reductions=tags,
                  check=finite_check(name) if nan_strategy == "error" else None, **metadata)
