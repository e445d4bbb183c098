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

from typing import NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _format
from fmetrics.classification._reduce import divide
from fmetrics.classification.stat_scores import binary_counts, positive
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, merge_fields
from fmetrics.recipe import factory

__all__ = ["binary_groups_stat_rates", "binary_fairness", "demographic_parity", "equal_opportunity"]

_GROUP_RULE = "groups must hold ids in [0, num_groups) (the samples were dropped)"


class GroupStatState(NamedTuple):
    counts: torch.Tensor  # int64 (G, 4): targets, predicted positives, true positives, entries per group
    invalid: torch.Tensor  # int64 (3,): dropped entries per rule of _format.RULES
    bad_groups: torch.Tensor  # int64 (): samples with a group id out of range


def _group_metric(name: str, num_groups, threshold, ignore_index, validate_args, value, with_target: bool
                  ) -> Metric:
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise validation.fail(name, "num_groups", "an integer >= 1", repr(num_groups))
    threshold = _format.check_threshold(name, threshold)
    ignore_index = _format.check_ignore_index(name, ignore_index)
    validate = bool(validate_args)

    def init():
        return GroupStatState(torch.zeros(num_groups, 4, dtype=torch.int64), torch.zeros(3, dtype=torch.int64),
                              torch.zeros((), dtype=torch.int64))

    def update(state, preds, *args):
        if with_target:
            target, groups = args
        else:
            (groups,) = args
            target = torch.zeros(preds.shape, dtype=torch.int64, device=preds.device)
        f = _format.binary_inputs(name, preds, target, ignore_index, validate=validate)
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
        return GroupStatState(counts, state.invalid + f.invalid, state.bad_groups + validation.count(~ok))

    def finalize(state):
        _format.report(name, state.invalid)
        validation.report(name, {_GROUP_RULE: state.bad_groups})
        tt, pp, tp, n = state.counts.to(accum_dtype(state.counts.device)).unbind(-1)
        return value(torch.stack([tp, pp - tp, n - pp - tt + tp, tt - tp], -1))  # tp, fp, tn, fn

    tags = GroupStatState(counts="sum", invalid="sum", bad_groups="sum")
    key = ("group_stat_scores", num_groups, threshold, ignore_index, validate, with_target)
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=key, reductions=tags)


def _rates(counts: torch.Tensor) -> dict:
    return {f"group_{g}": row / row.sum() for g, row in enumerate(counts)}


def _ratio(prefix: str, rates: torch.Tensor) -> dict:
    lo, hi = int(rates.argmin()), int(rates.argmax())
    return {f"{prefix}_{lo}_{hi}": divide(rates[lo], rates[hi])}


def _dp(counts: torch.Tensor) -> dict:
    tp, fp, tn, fn = counts.unbind(-1)
    return _ratio("DP", divide(tp + fp, tp + fp + tn + fn))


def _eo(counts: torch.Tensor) -> dict:
    tp, _, _, fn = counts.unbind(-1)
    return _ratio("EO", divide(tp, tp + fn))


@factory
def binary_groups_stat_rates(*, num_groups: int, threshold: float = 0.5, ignore_index: Optional[int] = None,
                             validate_args: bool = True) -> Metric:
    """``{"group_g": [tp, fp, tn, fn] / n_g}`` per group; ``update(state, preds, target, groups)``.

    Example::

        >>> m = fmetrics.binary_groups_stat_rates(2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.1]), torch.tensor([1, 1, 0, 0]), torch.tensor([0, 0, 1, 1]))
        {'group_0': tensor([0.5000, 0.0000, 0.0000, 0.5000], dtype=torch.float64),
         'group_1': tensor([0.0000, 0.5000, 0.5000, 0.0000], dtype=torch.float64)}
    """
    return _group_metric("binary_groups_stat_rates", num_groups, threshold, ignore_index, validate_args,
                         _rates, with_target=True)


@factory
def binary_fairness(*, num_groups: int, task: str = "all", threshold: float = 0.5, ignore_index: Optional[int] = None,
                    validate_args: bool = True) -> Metric:
    """Demographic parity and / or equal opportunity ratios (``task``: ``"demographic_parity"``,
    ``"equal_opportunity"`` or ``"all"``); ``update(state, preds, target, groups)``.

    Example::

        >>> m = fmetrics.binary_fairness(2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.1]), torch.tensor([1, 1, 0, 0]), torch.tensor([0, 0, 1, 1]))
        {'DP_0_0': tensor(1., dtype=torch.float64), 'EO_1_0': tensor(0., dtype=torch.float64)}
    """
    name = "binary_fairness"
    task = validation.check_policy(name, "task", task, ("demographic_parity", "equal_opportunity", "all"))
    value = {"demographic_parity": _dp, "equal_opportunity": _eo, "all": lambda c: {**_dp(c), **_eo(c)}}[task]
    return _group_metric(name, num_groups, threshold, ignore_index, validate_args, value, with_target=True)


@factory
def demographic_parity(*, num_groups: int, threshold: float = 0.5, ignore_index: Optional[int] = None,
                       validate_args: bool = True) -> Metric:
    """Smallest over largest per-group positive-prediction rate; ``update(state, preds, groups)``.

    Example::

        >>> m = fmetrics.demographic_parity(2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.7]), torch.tensor([0, 0, 1, 1]))
        {'DP_0_1': tensor(0.5000, dtype=torch.float64)}
    """
    return _group_metric("demographic_parity", num_groups, threshold, ignore_index, validate_args, _dp,
                         with_target=False)


@factory
def equal_opportunity(*, num_groups: int, threshold: float = 0.5, ignore_index: Optional[int] = None,
                      validate_args: bool = True) -> Metric:
    """Smallest over largest per-group true positive rate; ``update(state, preds, target, groups)``.

    Example::

        >>> m = fmetrics.equal_opportunity(2)
        >>> m(torch.tensor([0.9, 0.2, 0.8, 0.7]), torch.tensor([1, 1, 1, 1]), torch.tensor([0, 0, 1, 1]))
        {'EO_0_1': tensor(0.5000, dtype=torch.float64)}
    """
    return _group_metric("equal_opportunity", num_groups, threshold, ignore_index, validate_args, _eo,
                         with_target=True)
