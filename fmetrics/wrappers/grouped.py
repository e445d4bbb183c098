"""`grouped`: one metric per group (subgroup, dataset, language, protected attribute) in one pass."""
from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import cat_chunks
from fmetrics.wrappers import _rows
from fmetrics.recipe import factory


class GroupedState(NamedTuple):
    groups: Any  # the wrapped state; sum/min/max fields stacked (num_groups, ...), cat fields hold rows once
    rows: tuple  # int64 chunks: the group index of every stored row (cat metrics only)
    out_of_range: torch.Tensor  # int64: rows whose group index is outside [0, num_groups)


@factory
def grouped(metric: Metric, *, num_groups: int, labels: Optional[Sequence[str]] = None) -> Metric:
    """``metric`` evaluated separately on each group of rows: ``update(state, group, *inputs)``.

    ``group`` is an integer tensor ``(B,)`` with each row's group index in
    ``[0, num_groups)``. The group states are one stacked state updated in a
    single pass (one-hot row weights, see `fmetrics.wrappers._rows`). Rows with
    an index out of range are skipped, counted, and reported by `finalize`.

    The value is stacked per group, ``(num_groups, ...)`` (a dict value gives a
    dict of stacked values), or ``{label: value}`` when ``labels`` are given.
    A group with no rows gets the metric's value on no data.

    Args:
      metric: the `fmetrics.Metric` to evaluate per group (positional).
      num_groups: number of groups, an int ``>= 1`` (required).
      labels: ``None`` (default) for a stacked value, or ``num_groups``
        distinct names for a dict value.

    Inputs:
      ``update(state, group, *inputs)``: ``group`` an integer tensor ``(B,)``,
      then the wrapped metric's inputs with ``B`` rows on dim 0. A length
      mismatch raises naming the short argument.

    Returns:
      the wrapped metric's values stacked ``(num_groups, ...)``, or
      ``{label: value}``. Metadata is the wrapped metric's.

    Example (fairness: positive-prediction rate per protected group)::

        >>> rate = grouped(fmetrics.mean(), num_groups=2, labels=["a", "b"])
        >>> rate(torch.tensor([0, 0, 1, 1]), torch.tensor([1., 0., 1., 1.]))
        {'a': tensor(0.5000, dtype=torch.float64), 'b': tensor(1., dtype=torch.float64)}
    """
    name = "grouped"
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise validation.fail(name, "num_groups", "an integer >= 1", repr(num_groups))
    if labels is not None:
        labels = [str(label) for label in labels]
        if len(labels) != num_groups or len(set(labels)) != num_groups:
            raise validation.fail(name, "labels", f"{num_groups} distinct labels", repr(labels))
    tags = _rows.decomposable_tags(name, metric)
    keeps_rows = _rows.has_cat(tags, metric.init())

    who = f"{name}({metric.name})"  # input errors name the wrapped metric too
    def init():
        return GroupedState(_rows.stack_init(metric, tags, num_groups), (), torch.zeros((), dtype=torch.int64))

    def update(state, group, *inputs, **kwargs):
        n = _rows.num_rows(who, inputs, kwargs)
        if not isinstance(group, torch.Tensor) or group.is_floating_point() or group.is_complex() \
                or group.dtype == torch.bool or tuple(group.shape) != (n,):
            raise validation.fail(who, "group", f"an integer tensor of shape ({n},), one group per row of the "
                                  "other inputs",
                                  f"{type(group).__name__} {getattr(group, 'dtype', '')} "
                                  f"{tuple(getattr(group, 'shape', ()))}")
        group = group.to(torch.int64)
        ids = torch.arange(num_groups, dtype=torch.int64, device=group.device)
        weights = (group.unsqueeze(-2) == ids.unsqueeze(-1)).to(torch.int64)  # (G, B) one-hot
        bad = validation.count((group < 0) | (group >= num_groups))
        if n == 0:  # static shape: nothing to add (vmap cannot run the metric on zero rows)
            return state
        stored = state.rows + (group,) if keeps_rows else state.rows
        return GroupedState(_rows.add_rows_shared(metric, tags, state.groups, inputs, kwargs, weights, 1), stored,
                            state.out_of_range + bad)

    def finalize(state):
        validation.report(who, {f"argument `group` in [0, {num_groups})": state.out_of_range})
        group = cat_chunks(state.rows, torch.empty(0, dtype=torch.int64))
        values = [metric.finalize(_rows.select(tags, state.groups, g, (group == g).to(torch.int64)))
                  for g in range(num_groups)]
        return dict(zip(labels, values)) if labels is not None else _rows.stack_values(name, values)

    inner_check = _rows.eager_check(metric)

    def check(group, *inputs, **kwargs):  # eager (CPU): bad group indices and the wrapped metric's rules
        _rows.num_rows(who, inputs, kwargs)
        if isinstance(group, torch.Tensor) and not group.is_floating_point():
            bad = (group < 0) | (group >= num_groups)
            if bool(bad.any()):
                raise validation.fail(who, "group", f"indices in [0, {num_groups})", validation.quote(group[bad]))
        inner_check(*inputs, **kwargs)

    merge_groups = _rows.stacked_merge(metric, tags)

    def merge(a, b):
        return GroupedState(merge_groups(a.groups, b.groups), tuple(a.rows) + tuple(b.rows),
                            a.out_of_range + b.out_of_range)

    reductions = GroupedState(groups=metric.reductions, rows="cat", out_of_range="sum")
    key = None if metric.state_key is None else (name, metric.state_key, num_groups)
    return Metric(init=init, update=update, merge=merge, finalize=finalize,
                  name=f"{name}({metric.name})", state_key=key, reductions=reductions, check=check,
                  higher_is_better=metric.higher_is_better, is_differentiable=False, bounds=metric.bounds)
