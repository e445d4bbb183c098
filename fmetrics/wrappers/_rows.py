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
(sum state) and AUROC (concatenating state) are all row-decomposable (the
weighted sum is one vmapped matmul).

A metric with a field only its ``merge`` knows (tag ``None``) is weighted
in closed form when it declares how (`fmetrics.Metric.weigh_rows`: Pearson,
R2 and their relatives provide the Chan-moment weighting), else by merges
(`merge_rows`): ``w_i``
copies of a row's state by binary doubling, then a pairwise fold over the
rows -- exact, about ``bits + 1`` vmapped merges per row and replicate, so
slower. Only a metric mixing ``cat`` with ``None`` fields has no weighting,
and the wrappers that need one reject it.

Bootstrap (Poisson / multinomial counts), `grouped` (one-hot group weights)
and `multioutput` (0/1 NaN-row weights) are this one mechanism.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, device_of, merge_fields, tree_map

DECOMPOSABLE = ("sum", "min", "max", "cat", "invalid")


def eager_check(metric: Metric) -> Callable[..., None]:
    """The wrapped metric's eager value checks (CPU, eager), run by a wrapper on the rows before it weights them.

    One eager update of a fresh state, its result dropped: it runs ``metric.check`` and the rules a metric
    checks inside its own update (classification's NaN scores, regression's ``nan_strategy="error"``), which
    the vmapped per-row updates only count. It raises with the wrapper's state untouched, quoting the values
    as given (not their resampled copies).
    """
    return lambda *inputs, **kwargs: metric.update(metric.init(), *inputs, **kwargs) and None


def init_on(metric: Metric, device: Optional[torch.device]):
    """``metric.init(device)`` without a host-to-device copy on CUDA (a copy synchronizes there).

    ``init()`` builds its leaves on the host; a constant leaf (zeros, an identity like +inf) is rebuilt
    with ``torch.full`` on the device, an empty one with ``torch.empty``; anything else is copied.
    On the CPU (the meta device stands in for a GPU), and in a traced update, this is ``metric.init(device)``.
    """
    if device is None or device.type == "cpu" or torch.compiler.is_compiling():
        return metric.init(device)
    return constants_on(metric.init(), device)


def constants_on(tree, device: torch.device):
    """``tree``'s host tensors on ``device``: constant ones built there (``torch.full`` / ``torch.empty``),
    others copied."""

    def leaf(x):
        if not isinstance(x, torch.Tensor) or x.device == device:
            return x
        if x.device.type == "cpu" and not x.is_complex():
            if x.numel() == 0:
                return torch.empty(x.shape, dtype=x.dtype, device=device)
            with torch._C.DisableTorchFunction():  # reads a fresh host constant: no device sync to report
                first = x.reshape(-1)[0].item()
                same = bool(x.isnan().all() if first != first else torch.eq(x, first).all())
            if same:
                return torch.full(x.shape, first, dtype=x.dtype, device=device)
        return x.to(device)

    return tree_map(leaf, tree)


def walk(fn: Callable[..., Any], tags, *trees):
    """``fn(tag, *fields)`` for every tagged field of same-layout ``trees``; rebuilds the first tree's layout."""
    if tags is None or isinstance(tags, str):
        return fn(tags, *trees)
    if isinstance(tags, dict):
        return {k: walk(fn, tags[k], *(t[k] for t in trees)) for k in tags}
    parts = [walk(fn, t, *xs) for t, *xs in zip(tags, *trees)]
    first = trees[0]
    return type(first)(*parts) if hasattr(first, "_fields") else type(first)(parts)


def _with_invalid(tags, state):
    """``tags`` with ``None`` replaced by ``"invalid"`` where the field is a `fmetrics.validation.Invalid` record.

    The deferred record of bad input merges by its own rule (`validation.invalid_merge`)
    and is weighted like a count (`weigh_invalid`), so it does not make a metric merge-only.
    """
    if tags is None:
        return "invalid" if isinstance(state, validation.Invalid) else None
    if isinstance(tags, str):
        return tags
    if isinstance(tags, dict):
        return {k: _with_invalid(tags[k], state[k]) for k in tags}
    parts = [_with_invalid(t, x) for t, x in zip(tags, state)]
    return type(tags)(*parts) if hasattr(tags, "_fields") else type(tags)(parts)


def decomposable_tags(wrapper: str, metric: Metric):
    """The metric's reduction tags if it is row-decomposable, else ``None`` (rows are then weighted by merges).

    A `validation.Invalid` field (tag ``None``) is weighted by its own rule and
    tagged ``"invalid"`` in the returned tags. Raises `ValueError` for a metric
    that is neither: one with a ``cat`` field next to a field only ``merge`` knows.
    """
    if not isinstance(metric, Metric):
        raise validation.fail(wrapper, "metric", "a fmetrics.Metric", type(metric).__name__)
    tags = metric.reductions
    found = []
    if tags is not None:
        tags = _with_invalid(tags, metric.init())
        walk(lambda tag, _: found.append(tag), tags, metric.init())
    if tags is not None and all(t in DECOMPOSABLE for t in found):
        return tags
    if "cat" in found:
        raise validation.fail(
            wrapper, "metric", f"a metric whose `reductions` tag every field one of {DECOMPOSABLE[:4]}, or that has "
            "no 'cat' field (its rows are then weighted by repeated merges)", f"{metric.name!r} tags {tags}")
    return None


def weigh_invalid(rows: validation.Invalid, counts: torch.Tensor) -> validation.Invalid:
    """Deferred records of ``B`` one-row states for replicates holding ``counts`` ``(R,)`` offending entries
    (``weights @ rows.count``, which the caller folds into its matmul of the sum fields): per replicate, one
    update call. Its first offending value is the batch's first (``rows`` in batch order), the same for
    every replicate: O(rows) once, not a scan of every replicate's weights. Counts, calls and the values
    that finalize computes are exact; only the quoted value may come from a row a replicate did not draw.
    """
    pos = torch.arange(rows.count.shape[0], device=rows.count.device)
    k = torch.where(rows.count > 0, pos, rows.count.shape[0]).amin() if pos.numel() else 0
    first = torch.where(pos == k, rows.first, 0).sum()  # masked sum, not a gather (as `invalid_flag`)
    count = counts.round().to(torch.int64) if counts.is_floating_point() else counts.to(torch.int64)
    bad = count > 0
    one = torch.ones_like(count)
    return validation.Invalid(count, torch.where(bad, first, torch.nan), torch.where(bad, one, 0 * one), one)


def has_cat(tags, state) -> bool:
    if tags is None:
        return False
    found = []
    walk(lambda tag, _: found.append(tag == "cat"), tags, state)
    return any(found)


def num_rows(wrapper: str, inputs: tuple, kwargs: Optional[dict] = None) -> int:
    """The batch's number of rows; raises naming the input whose first dim differs from the others'."""
    named = [(f"inputs[{i}]", x) for i, x in enumerate(inputs)] + [(k, x) for k, x in (kwargs or {}).items()]
    rows = [(name, x.shape[0]) for name, x in named if isinstance(x, torch.Tensor) and x.dim() >= 1]
    if not rows:
        raise validation.fail(wrapper, "inputs", "at least one tensor with a sample axis")
    first_name, n = rows[0]
    for name, m in rows[1:]:
        if m != n:
            raise validation.fail(wrapper, name, f"{n} rows on dim 0 (as {first_name})", f"{m} rows")
    return n


def row_states(metric: Metric, inputs: tuple, kwargs: dict):
    """The plain one-row states of a batch, stacked on a leading row axis."""
    init = init_on(metric, device_of(inputs))
    dims = tuple(0 if isinstance(x, torch.Tensor) and x.dim() >= 1 else None for x in inputs)
    rows = tuple(x.unsqueeze(1) if d == 0 else x for x, d in zip(inputs, dims))
    return torch.func.vmap(lambda *r: metric.update(init, *r, **kwargs), in_dims=dims)(*rows)


def per_row(metric: Metric, tags, inputs: tuple, kwargs: dict):
    """One-row states of a batch, every field with a leading row axis ``(B, ...)``.

    Sum fields hold each row's increment, min/max fields each row's state and
    cat fields each row's chunk ``(B, k, ...)`` (``k`` entries per row).
    """
    one, init = row_states(metric, inputs, kwargs), init_on(metric, device_of(inputs))

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
        if tag == "invalid":
            one = weigh_invalid(d, torch.tensordot(weight.to(d.count.dtype), d.count, dims=1).unsqueeze(0))
            return validation.invalid_merge(s, tree_map(lambda x: x[0], one))
        if tag == "sum":
            acc = accum_dtype(d.device)
            total = torch.tensordot(weight.to(acc), d.to(acc), dims=1)
            return s + (total.round() if not s.is_floating_point() else total).to(s.dtype)
        present = (weight > 0).reshape(-1, *([1] * (d.dim() - 1)))
        if tag == "min":
            return torch.minimum(s, torch.where(present, d, s.expand_as(d)).amin(0))
        return torch.maximum(s, torch.where(present, d, s.expand_as(d)).amax(0))

    return walk(leaf, tags, state, rows)


def _where(cond: torch.Tensor, a, b):
    return tree_map(lambda x, y: torch.where(cond.reshape(-1, *([1] * (x.dim() - 1))), x, y), a, b)


def merge_rows(metric: Metric, stacked, rows, weights: torch.Tensor, bits: int):
    """Each replicate of ``stacked`` merged with row ``i``'s one-row state ``weights[r, i]`` times.

    The row-weighting path for metrics whose fields only ``merge`` knows
    (e.g. Chan-merged moments): ``weights`` ``(R, B)`` are integers below
    ``2**bits``; the ``2**j`` copies of every row are built once by doubling,
    picked per replicate by the bits of its weight, then folded pairwise over
    the rows -- all as vmapped merges over a flat ``R * B`` axis. ``merge``
    must be vmap-able and have ``init()`` as its identity (both laws).
    """
    merge = torch.func.vmap(metric.merge)
    r, n = weights.shape[-2], weights.shape[-1]

    def flat(tree, *lead):
        return tree_map(lambda x: x.reshape(*lead, *x.shape[2:]), tree)

    count = weights.to(torch.int64).reshape(r * n)
    empty = tree_map(lambda x: x.expand(r * n, *x.shape).clone(), init_on(metric, device_of(rows)))
    total, power = empty, rows
    for j in range(bits):
        wide = tree_map(lambda x: x.expand(r, *x.shape).reshape(r * n, *x.shape[1:]), power)
        total = _where((count >> j) & 1 == 1, merge(total, wide), total)
        if j + 1 < bits:
            power = merge(power, power)
    total = tree_map(lambda x: x.reshape(r, n, *x.shape[1:]), total)
    while n > 1:
        if n % 2:
            total = tree_map(lambda x, e: torch.cat([x, e[:r].unsqueeze(1)], dim=1), total, empty)
            n += 1
        n //= 2
        pairs = merge(flat(tree_map(lambda x: x[:, 0::2], total), r * n),
                      flat(tree_map(lambda x: x[:, 1::2], total), r * n))
        total = tree_map(lambda x: x.reshape(r, n, *x.shape[1:]), pairs)
    return merge(stacked, tree_map(lambda x: x[:, 0], total))


def without_cat(tags, tree):
    return walk(lambda tag, x: None if tag == "cat" else x, tags, tree)


def add_rows_stacked(tags, stacked, rows, weights: torch.Tensor):
    """`add_rows` for every replicate of a stacked state at once (``weights`` ``(R, B)``); cat fields untouched.

    All sum fields go through ONE matmul ``[d_1 | d_2 | ...]^T weights^T``
    (``(S, B) x (B, R)``, ``S`` the numbers of all sum fields together, plus one
    column per `validation.Invalid` record: its offending count) in the
    accumulation dtype, instead of a vmapped product per field. That order is
    the fast one for a few sums and many replicates (~4x for ``S = 2``,
    ``R = 200``), and reads the ``(R, B)`` transposed view of `poisson1_counts`
    in memory order.
    """
    acc = accum_dtype(weights.device)
    found = []  # the sum fields' columns and the invalid records' counts, in walk order
    walk(lambda tag, d: found.append(d.reshape(d.shape[0], -1).to(acc)) if tag == "sum" else
         found.append(d.count.reshape(-1, 1).to(acc)) if tag == "invalid" else None, tags, rows)
    totals = iter(())
    if found:
        flat = (found[0] if len(found) == 1 else torch.cat(found, dim=1)).mT @ weights.mT.to(acc)  # (S, R)
        totals = iter(flat.mT.split([d.shape[1] for d in found], dim=1))

    def leaf(tag, s, d):
        if tag == "cat":
            return s
        if tag == "invalid":  # elementwise ops: the stacked records merge replicate by replicate
            return validation.invalid_merge(s, weigh_invalid(d, next(totals).reshape(-1)))
        if tag == "sum":
            total = next(totals).reshape(s.shape)
            return s + (total.round() if not s.is_floating_point() else total).to(s.dtype)
        mask = (weights > 0).reshape(*weights.shape, *([1] * (d.dim() - 1)))
        pick = torch.where(mask, d.unsqueeze(0), s.unsqueeze(1))  # (R, B, ...)
        return torch.minimum(s, pick.amin(1)) if tag == "min" else torch.maximum(s, pick.amax(1))

    return walk(leaf, tags, stacked, rows)


def merge_weighted(metric: Metric, stacked, rows, weights: torch.Tensor, bits: int):
    """A merge-only metric's stacked state with one-row states ``rows`` added ``weights`` ``(R, B)`` times.

    The metric's own closed-form weighting (`fmetrics.Metric.weigh_rows`, e.g.
    the Chan moments of Pearson and R²) when it declares one, else `merge_rows`
    (weights below ``2**bits``).
    """
    if metric.weigh_rows is not None:
        return torch.func.vmap(metric.merge)(stacked, metric.weigh_rows(rows, weights))
    return merge_rows(metric, stacked, rows, weights, bits)


def add_rows_shared(metric: Metric, tags, stacked, inputs: tuple, kwargs: dict, weights: torch.Tensor, bits: int):
    """Adds a batch's rows to every replicate of a stacked state, with integer weights ``weights`` ``(R, B)``.

    Row-decomposable metrics (``tags`` given): cat fields are not replicated,
    the rows are appended once, shared by all replicates (the caller keeps
    their per-replicate counts). Otherwise (``tags`` ``None``) each
    replicate's rows are merged in (`merge_weighted`, weights below ``2**bits``).
    """
    if tags is None:
        return merge_weighted(metric, stacked, row_states(metric, inputs, kwargs), weights, bits)
    rows = per_row(metric, tags, inputs, kwargs)
    new = add_rows_stacked(tags, stacked, rows, weights)
    return walk(lambda tag, s, n, d: (tuple(s) + ((d,) if d is not None else ())) if tag == "cat" else n,
                tags, stacked, new, rows)


def stack_init(metric: Metric, tags, n: int):
    """``n`` stacked copies of ``init()``; cat fields stay ``()`` (shared rows)."""
    if tags is None:
        return tree_map(lambda x: x.expand(n, *x.shape).clone(), metric.init())
    return walk(lambda tag, x: x if tag == "cat" else tree_map(lambda v: v.expand(n, *v.shape).clone(), x), tags,
                metric.init())


def stacked_merge(metric: Metric, tags):
    """Merge of two stacked states, replicate by replicate."""
    if tags is None:
        return torch.func.vmap(metric.merge)
    plain = merge_fields(walk(lambda tag, _: "sum" if tag == "invalid" else tag, tags, metric.init()))

    def merge(a, b):
        merged = plain(a, b)  # "invalid" fields (elementwise record ops) are replaced below
        return walk(lambda tag, m, x, y: validation.invalid_merge(x, y) if tag == "invalid" else m,
                    tags, merged, a, b)

    return merge


def cat_rows(chunks: tuple, dim: int = 0) -> Optional[torch.Tensor]:
    return None if not chunks else (chunks[0] if len(chunks) == 1 else torch.cat(tuple(chunks), dim=dim))


def select(tags, stacked, index: int, counts: Optional[torch.Tensor], rows_stacked: bool = False):
    """The plain state of replicate ``index``: cat rows repeated ``counts`` times, as one chunk.

    ``rows_stacked``: cat chunks carry the replicate axis first (``(R, B, k, ...)``).
    """
    if tags is None:
        return tree_map(lambda x: x[index], stacked)

    def leaf(tag, s):
        if tag == "invalid":
            return tree_map(lambda x: x[index], s)
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
