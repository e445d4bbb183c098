"""Row weighting: the protocol by which wrappers pass sample weights to a metric.

A metric is *row-decomposable* when its `reductions` tag every state field
``"sum"``, ``"min"``, ``"max"`` or ``"cat"``. Split invariance then makes a
batch's state the merge of its one-row states, so the state of a batch in
which row ``i`` counts ``w_i`` times (``w_i`` a non-negative integer) is::

    sum field      init + sum_i w_i * (update(init, row_i) - init)
    min/max field  min / max over the rows with w_i > 0
    cat field      the row chunks, each kept once, repeated w_i times in finalize

The one-row states come from ``torch.func.vmap`` of the metric's own
``update`` over the rows (each call sees a batch of one row), so no metric
needs a weighted update of its own. Accuracy (count state), mean squared error
(sum state) and AUROC (concatenating state) are all row-decomposable; a metric
with a field only its ``merge`` knows (tag ``None``, e.g. a Chan-merged
variance) is not, and the wrappers that need weights reject it.

Bootstrap (Poisson / multinomial counts), `grouped` (one-hot group weights)
and `multioutput` (0/1 NaN-row weights) are this one mechanism.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, device_of

DECOMPOSABLE = ("sum", "min", "max", "cat")


def walk(fn: Callable[..., Any], tags, *trees):
    """``fn(tag, *fields)`` for every tagged field of same-layout ``trees``; rebuilds the first tree's layout."""
    if tags is None or isinstance(tags, str):
        return fn(tags, *trees)
    if isinstance(tags, dict):
        return {k: walk(fn, tags[k], *(t[k] for t in trees)) for k in tags}
    parts = [walk(fn, t, *xs) for t, *xs in zip(tags, *trees)]
    first = trees[0]
    return type(first)(*parts) if hasattr(first, "_fields") else type(first)(parts)


def decomposable_tags(wrapper: str, metric: Metric, why: str):
    """The metric's reduction tags, or a `ValueError` if it is not row-decomposable."""
    if not isinstance(metric, Metric):
        raise validation.fail(wrapper, "metric", "a fmetrics.Metric", type(metric).__name__)
    tags = metric.reductions
    bad = []

    def check(tag, _):
        if tag not in DECOMPOSABLE:
            bad.append(tag)

    if tags is None:
        bad.append(None)
    else:
        walk(check, tags, metric.init())
    if bad:
        raise validation.fail(
            wrapper, "metric",
            f"a row-decomposable metric ({why}): `reductions` tagging every state field one of {DECOMPOSABLE}",
            f"{metric.name!r} with field tag(s) {bad}")
    return tags


def has_cat(tags, state) -> bool:
    found = []
    walk(lambda tag, _: found.append(tag == "cat"), tags, state)
    return any(found)


def num_rows(wrapper: str, inputs: tuple) -> int:
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dim() >= 1:
            return x.shape[0]
    raise validation.fail(wrapper, "inputs", "at least one tensor with a sample axis")


def per_row(metric: Metric, tags, inputs: tuple, kwargs: dict):
    """One-row states of a batch, every field with a leading row axis ``(B, ...)``.

    Sum fields hold each row's increment, min/max fields each row's state and
    cat fields each row's chunk ``(B, k, ...)`` (``k`` entries per row).
    """
    init = metric.init(device_of(inputs))
    dims = tuple(0 if isinstance(x, torch.Tensor) and x.dim() >= 1 else None for x in inputs)
    rows = tuple(x.unsqueeze(1) if d == 0 else x for x, d in zip(inputs, dims))
    one = torch.func.vmap(lambda *r: metric.update(init, *r, **kwargs), in_dims=dims)(*rows)

    def leaf(tag, x, x0):
        if tag == "cat":  # None when the update appends no chunk (e.g. a wrapper's unused row field)
            new = tuple(x)[len(x0):]
            return None if not new else new[0] if len(new) == 1 else torch.cat(new, dim=1)
        return x - x0 if tag == "sum" else x

    return walk(leaf, tags, one, init)


def add_rows(tags, state, rows, weight: torch.Tensor):
    """One replicate's state after adding ``rows`` (from `per_row`) with integer weights ``weight`` ``(B,)``.

    Cat fields get the unweighted rows appended (pass ``None`` fields to skip them).
    """

    def leaf(tag, s, d):
        if tag == "cat":
            return None if s is None else tuple(s) + ((d,) if d is not None else ())
        if tag == "sum":
            acc = accum_dtype(d.device)
            total = torch.tensordot(weight.to(acc), d.to(acc), dims=1)
            return s + (total.round() if not s.is_floating_point() else total).to(s.dtype)
        if d.shape[0] == 0:
            return s
        present = (weight > 0).reshape(-1, *([1] * (d.dim() - 1)))
        if tag == "min":
            return torch.minimum(s, torch.where(present, d, s.expand_as(d)).amin(0))
        return torch.maximum(s, torch.where(present, d, s.expand_as(d)).amax(0))

    return walk(leaf, tags, state, rows)


def without_cat(tags, tree):
    return walk(lambda tag, x: None if tag == "cat" else x, tags, tree)


def add_rows_shared(tags, stacked, rows, weights: torch.Tensor):
    """Adds rows to every replicate of a stacked state: ``torch.func.vmap`` over ``weights`` ``(R, B)``.

    Cat fields are not replicated: the rows are appended once, shared by all
    replicates (their per-replicate counts are kept by the caller).
    """
    dims = walk(lambda tag, _: None if tag == "cat" else 0, tags, stacked)
    fixed = without_cat(tags, rows)
    new = torch.func.vmap(lambda s, w: add_rows(tags, s, fixed, w), in_dims=(dims, 0), out_dims=dims)(
        without_cat(tags, stacked), weights)
    return walk(lambda tag, s, n, d: (tuple(s) + ((d,) if d is not None else ())) if tag == "cat" else n,
                tags, stacked, new, rows)


def stack_init(metric: Metric, tags, n: int):
    """``n`` stacked copies of ``init()`` for non-cat fields; cat fields stay ``()`` (shared rows)."""
    return walk(lambda tag, x: x if tag == "cat" else x.expand(n, *x.shape).clone(), tags, metric.init())


def cat_rows(chunks: tuple, dim: int = 0) -> Optional[torch.Tensor]:
    return None if not chunks else (chunks[0] if len(chunks) == 1 else torch.cat(tuple(chunks), dim=dim))


def select(tags, stacked, index: int, counts: Optional[torch.Tensor], rows_stacked: bool = False):
    """The plain state of replicate ``index``: cat rows repeated ``counts`` times, as one chunk.

    ``rows_stacked``: cat chunks carry the replicate axis first (``(R, B, k, ...)``).
    """

    def leaf(tag, s):
        if tag != "cat":
            return s[index]
        rows = cat_rows(s, dim=1 if rows_stacked else 0)
        if rows is None:
            return ()
        if rows_stacked:
            rows = rows[index]
        return (torch.repeat_interleave(rows, counts, dim=0).flatten(0, 1),)

    return walk(leaf, tags, stacked)


def stack_values(wrapper: str, values: list):
    """Stacks finalized values (tensors, or dicts of tensors) along a new leading axis."""
    first = values[0]
    if isinstance(first, dict):
        return {k: stack_values(wrapper, [v[k] for v in values]) for k in first}
    try:
        return torch.stack([torch.as_tensor(v) for v in values])
    except RuntimeError as err:
        raise ValueError(f"{wrapper}: the wrapped metric's values cannot be stacked: {err}") from None
