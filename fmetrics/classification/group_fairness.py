"""Group fairness of binary predictions: per-group stat rates, demographic parity, equal opportunity.

``update(state, preds, target, groups)``; ``groups`` ``(N,)`` holds each
sample's group id in ``[0, num_groups)`` (ids outside are counted, dropped and
raised at ``finalize``). The state is one row of counts per group.

* group stat rates: ``{"group_g": [tp, fp, tn, fn] / total_g}``.
* demographic parity: the smallest over the largest positive-prediction rate
  ``(tp + fp) / total``, keyed ``"DP_{argmin}_{argmax}"``.
* equal opportunity: the same for the true positive rate ``tp / (tp + fn)``,
  keyed ``"EO_{argmin}_{argmax}"``.
"""
from __future__ import annotations

import warnings
from typing import Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification._reduce import divide
from fmetrics.classification._docs import documented
from fmetrics.classification.stat_scores import binary_counts, counting, positive
from fmetrics.metric import Metric
from fmetrics.family import Family
from fmetrics.state import accum_dtype
from fmetrics.recipe import factory

__all__ = ["binary_groups_stat_rates", "binary_fairness", "demographic_parity", "equal_opportunity"]

_GROUP_RULE = "groups must hold ids in [0, num_groups)"


class GroupStatState(NamedTuple):
    counts: torch.Tensor  # int64 (G, 4): targets, predicted positives, true positives, entries per group
    invalid: validation.Invalid  # deferred record of preds / target entries that broke the value rule
    bad_groups: validation.Invalid  # deferred record of samples with a group id out of range


def _check_groups(name: str, num_groups: int, groups) -> None:
    if isinstance(groups, torch.Tensor) and not groups.is_floating_point() and not groups.is_complex() \
            and groups.numel():
        lo, hi = torch.aminmax(groups)
        if lo < 0 or hi >= num_groups:
            bad = (groups < 0) | (groups >= num_groups)
            raise ValueError(f"{name}: groups values must be in [0, {num_groups}); "
                             f"found {validation.quote(groups[bad])}")


def _group_metric(name: str, num_groups, threshold, ignore_index, validate_args, value, with_target: bool,
                  **metadata) -> Metric:
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise validation.fail(name, "num_groups", "an integer >= 1", repr(num_groups))
    threshold = _format.check_threshold(name, threshold)
    ignore_index = _format.check_ignore_index(name, ignore_index)
    validate = bool(validate_args)
    check_values = _format.checker(name, "binary", 2, ignore_index) if validate else None

    def init():
        return GroupStatState(torch.zeros(num_groups, 4, dtype=torch.int64), validation.invalid_init(),
                              validation.invalid_init())

    def split(preds, args):
        if with_target:
            target, groups = args
        else:
            (groups,) = args
            preds = _format._as_tensor(name, "preds", preds)
            target = torch.zeros(preds.shape, dtype=torch.int64, device=preds.device)
        return target, groups

    def check(preds, *args):
        target, groups = split(preds, args)
        if check_values is not None:
            check_values(preds, target)
        _check_groups(name, num_groups, groups)

    def update(state, preds, *args):
        target, groups = split(preds, args)
        count = counting(validate, (preds, target, groups))
        f = _format.binary_inputs(name, preds, target, ignore_index, validate=count)
        if not isinstance(groups, torch.Tensor) or groups.is_floating_point() or groups.is_complex():
            raise validation.fail(name, "groups", "an integer tensor of group ids",
                                  getattr(groups, "dtype", type(groups).__name__))
        if groups.dim() == 2 and groups.shape[1] == 1:
            groups = groups.squeeze(1)
        if groups.shape != f.preds.shape[:1]:
            raise validation.fail(name, "groups", f"one id per sample, shape ({f.preds.shape[0]},)",
                                  tuple(groups.shape))
        groups = groups.long()
        ok = (groups >= 0) & (groups < num_groups)
        per_sample = binary_counts(positive(f.preds, threshold).unsqueeze(1), f.target.unsqueeze(1),
                                   f.keep.unsqueeze(1), samplewise=True)[..., 0]  # (N, 4)
        per_sample = per_sample * ok.unsqueeze(1)
        counts = state.counts.scatter_add(0, torch.where(ok, groups, 0).unsqueeze(1).expand_as(per_sample), per_sample)
        return GroupStatState(counts, _format.flag(state.invalid, f),
                              validation.invalid_flag(state.bad_groups, ~ok, groups))

    def merge(a, b):
        return GroupStatState(a.counts + b.counts, validation.invalid_merge(a.invalid, b.invalid),
                              validation.invalid_merge(a.bad_groups, b.bad_groups))

    def finalize(state):
        _format.report(name, state.invalid)
        validation.invalid_report(name, _GROUP_RULE, state.bad_groups)
        tt, pp, tp, n = state.counts.to(accum_dtype(state.counts.device)).unbind(-1)
        return finish(torch.stack([tp, pp - tp, n - pp - tt + tp, tt - tp], -1))  # tp, fp, tn, fn

    finish = _empty.guard(name, lambda counts: not bool(counts.any()), lambda counts: value(counts, name))

    tags = GroupStatState(counts="sum", invalid=None, bad_groups=None)
    key = (num_groups, threshold, ignore_index, validate, with_target)
    fam = Family(name="group_stat_scores", key=key, init=init, update=update, reductions=tags, merge=merge,
                 check=check)
    return fam.metric(name, finalize, is_differentiable=False, **metadata)


def _rates(counts: torch.Tensor, name: str) -> dict:
    return {f"group_{g}": row / row.sum() for g, row in enumerate(counts)}


def _ratio(prefix: str, num: torch.Tensor, den: torch.Tensor, name: str, what: str) -> dict:
    """``{prefix_lo_hi: min rate / max rate}``; a group whose rate is 0 / 0 makes the ratio undefined: NaN."""
    rates = torch.where(den != 0, num / torch.where(den != 0, den, 1), float("nan"))
    undefined = torch.isnan(rates)
    if bool(undefined.all()):
        warnings.warn(f"{name}: no group has {what}; every rate is undefined and the ratio is NaN",
                      UserWarning, stacklevel=4)
        return {f"{prefix}_0_0": rates[0]}
    hi = int(torch.where(undefined, -torch.inf, rates).argmax())
    if bool(undefined.any()):
        missing = torch.nonzero(undefined).reshape(-1).tolist()
        warnings.warn(f"{name}: group{'s' if len(missing) > 1 else ''} {missing} ha{'ve' if len(missing) > 1 else 's'} "
                      f"no {what}; {'their rates are' if len(missing) > 1 else 'its rate is'} undefined, so the ratio "
                      "is NaN", UserWarning, stacklevel=4)
        return {f"{prefix}_{missing[0]}_{hi}": rates.new_tensor(float("nan"))}
    lo = int(rates.argmin())
    return {f"{prefix}_{lo}_{hi}": divide(rates[lo], rates[hi])}


def _dp(counts: torch.Tensor, name: str) -> dict:
    tp, fp, tn, fn = counts.unbind(-1)
    return _ratio("DP", tp + fp, tp + fp + tn + fn, name, "samples")


def _eo(counts: torch.Tensor, name: str) -> dict:
    tp, _, _, fn = counts.unbind(-1)
    return _ratio("EO", tp, tp + fn, name, "positive targets")


_INPUTS = ("preds: float (N,) probabilities or logits (sigmoid when any value is outside [0, 1]) or int 0/1 "
           "labels; target: int (N,) 0/1 (or ignore_index); groups: int (N,) group ids in [0, num_groups).")
_DP_INPUTS = ("preds: float (N,) probabilities or logits, or int 0/1 labels; groups: int (N,) group ids in "
              "[0, num_groups).")


@factory
@documented(returns="``{'group_g': float64 (4,) [tp, fp, tn, fn] / n_g}`` for each group (NaN for a group "
                    "without samples).", inputs=_INPUTS, call="preds, target, groups")
def binary_groups_stat_rates(*, num_groups: int, threshold: float = 0.5, ignore_index: Optional[int] = None,
                             validate_args: bool = True) -> Metric:
    """``{"group_g": [tp, fp, tn, fn] / n_g}`` per group; ``update(state, preds, target, groups)``.

    Example::

        >>> m = fmetrics.binary_groups_stat_rates(num_groups=2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.1]), torch.tensor([1, 1, 0, 0]), torch.tensor([0, 0, 1, 1]))
        {'group_0': tensor([0.5000, 0.0000, 0.0000, 0.5000], dtype=torch.float64),
         'group_1': tensor([0.0000, 0.5000, 0.5000, 0.0000], dtype=torch.float64)}
    """
    return _group_metric("binary_groups_stat_rates", num_groups, threshold, ignore_index, validate_args,
                         _rates, with_target=True,
                         higher_is_better=None, bounds=(0.0, 1.0))


@factory
@documented(returns="``{'DP_lo_hi': ratio, 'EO_lo_hi': ratio}`` (the entries ``task`` asks for), float64 0-d; "
                    "``lo`` / ``hi`` are the groups of the smallest / largest rate. A group whose rate is 0 / 0 "
                    "(no samples; for EO no positive targets) makes the ratio NaN, with a warning naming it.",
            inputs=_INPUTS, call="preds, target, groups",
            task="which ratios: 'demographic_parity', 'equal_opportunity' or 'all' (both).")
def binary_fairness(*, num_groups: int, task: Literal["demographic_parity", "equal_opportunity", "all"] = "all", threshold: float = 0.5, ignore_index: Optional[int] = None,
                    validate_args: bool = True) -> Metric:
    """Demographic parity and / or equal opportunity ratios (``task``: ``"demographic_parity"``,
    ``"equal_opportunity"`` or ``"all"``); ``update(state, preds, target, groups)``.

    Example::

        >>> m = fmetrics.binary_fairness(num_groups=2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.1]), torch.tensor([1, 1, 1, 0]), torch.tensor([0, 0, 1, 1]))
        {'DP_0_0': tensor(1., dtype=torch.float64), 'EO_0_1': tensor(0.5000, dtype=torch.float64)}
    """
    name = "binary_fairness"
    task = validation.check_policy(name, "task", task, ("demographic_parity", "equal_opportunity", "all"))
    value = {"demographic_parity": _dp, "equal_opportunity": _eo, "all": lambda c, n: {**_dp(c, n), **_eo(c, n)}}[task]
    return _group_metric(name, num_groups, threshold, ignore_index, validate_args, value, with_target=True, higher_is_better=True,
                         bounds=(0.0, 1.0))


@factory
@documented(returns="``{'DP_lo_hi': ratio}``, float64 0-d (NaN with a warning when a group has no samples).",
            inputs=_DP_INPUTS, call="preds, groups")
def demographic_parity(*, num_groups: int, threshold: float = 0.5, ignore_index: Optional[int] = None,
                       validate_args: bool = True) -> Metric:
    """Smallest over largest per-group positive-prediction rate; ``update(state, preds, groups)``.

    Example::

        >>> m = fmetrics.demographic_parity(num_groups=2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.7]), torch.tensor([0, 0, 1, 1]))
        {'DP_0_1': tensor(0.5000, dtype=torch.float64)}
    """
    return _group_metric("demographic_parity", num_groups, threshold, ignore_index, validate_args, _dp,
                         with_target=False, higher_is_better=True, bounds=(0.0, 1.0))


@factory
@documented(returns="``{'EO_lo_hi': ratio}``, float64 0-d (NaN with a warning when a group has no positive "
                    "targets).", inputs=_INPUTS, call="preds, target, groups")
def equal_opportunity(*, num_groups: int, threshold: float = 0.5, ignore_index: Optional[int] = None,
                      validate_args: bool = True) -> Metric:
    """Smallest over largest per-group true positive rate; ``update(state, preds, target, groups)``.

    Example::

        >>> m = fmetrics.equal_opportunity(num_groups=2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.7]), torch.tensor([1, 1, 1, 1]), torch.tensor([0, 0, 1, 1]))
        {'EO_0_1': tensor(0.5000, dtype=torch.float64)}
    """
    return _group_metric("equal_opportunity", num_groups, threshold, ignore_index, validate_args, _eo,
                         with_target=True, higher_is_better=True, bounds=(0.0, 1.0))
