"""Two systems scored on the same samples, resampled together: the engine of `paired_bootstrap` and
`permutation_test`.

Every update feeds ``preds_a, preds_b, *rest`` (``rest`` shared: targets, query ids, ...). The state
holds each system's plain state and ``R`` stacked replicate states. Replicate ``r`` of system A holds
A's row ``i`` ``own[r, i]`` times and B's row ``i`` ``swap[r, i]`` times (B symmetrically), the rows
weighted by the `fmetrics.wrappers._rows` protocol:

* paired bootstrap: ``own = c ~ Poisson(1)``, no swap -- both systems see the same resample;
* approximate randomization: ``own = 1 - s``, ``swap = s`` with ``s ~ Bernoulli(1/2)``.

The draws are counter-based hashes of the row key (`fmetrics.wrappers._draws`): with ``sample_ids``
the key is the row's id, so the replicates do not depend on batching, sharding or rank count.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks, tree_map
from fmetrics.wrappers import _draws, _rows
from fmetrics.wrappers.bootstrap import _stream_id

_GOLDEN = _draws._GOLDEN


class PairedState(NamedTuple):
    a: Any  # the wrapped metric's state of system A (all rows once)
    b: Any  # ... of system B
    reps_a: Any  # A's replicates: sum/min/max fields stacked (R, ...); cat fields hold each batch's rows once
    reps_b: Any  # B's replicates (cat chunks: B's rows; a permutation test's replicate joins A's in finalize)
    rows: tuple  # cat metrics: each batch's (B,) draw keys, in chunk order
    seen: torch.Tensor  # int64 rows seen: the offsets that key draws without sample ids


def swap_bits(keys: torch.Tensor, num: int, dtype: torch.dtype, first: int = 0) -> torch.Tensor:
    """``(R, B)`` fair 0/1 draws (replicates ``first .. first + R``, ``first`` a multiple of 64): 64 per hash."""
    groups = -(-(first % 64 + num) // 64)
    salt = _draws.mix((torch.arange(groups, dtype=torch.int64, device=keys.device) + 1 + first // 64) * _GOLDEN
                      + 0x5A5A)
    h = _draws.mix(keys.unsqueeze(-1) ^ salt)  # (B, groups)
    shifts = torch.arange(64, dtype=torch.int64, device=keys.device)
    bits = (h.unsqueeze(-1) >> shifts).bitwise_and_(1)  # (B, groups, 64)
    return bits.flatten(-2)[..., :num].to(dtype).transpose(-1, -2)


def by_query(metric: Metric) -> bool:
    """Retrieval metrics (a mean over queries) are resampled by whole queries, keyed by their query ids."""
    return metric.recipe is not None and metric.recipe.module.startswith("fmetrics.retrieval")


def _query_copies(state, counts: torch.Tensor):
    """A retrieval replicate whose query ``q`` was drawn ``c`` times: copy ``j`` of its rows becomes query
    ``8 q + j`` (counts are at most 7), so each copy is ranked as a query of its own."""
    starts = torch.cumsum(counts, 0) - counts
    copy = torch.arange(int(counts.sum()), device=counts.device) - torch.repeat_interleave(starts, counts)
    indexes = state.indexes[0] if state.indexes else torch.zeros(0, dtype=torch.int64)
    return state._replace(indexes=(indexes * 8 + copy,))


def _weights(swap: bool, num: int) -> Callable[..., tuple]:
    """``weights(keys, first, count) -> (own, other)`` ``(count, B)``: Poisson counts and ``None``, or the swaps
    ``1 - s, s``."""
    def weights(keys, first=0, count=num):
        dtype = accum_dtype(keys.device)
        if swap:
            s = swap_bits(keys, count, dtype, first)
            return 1 - s, s
        return _draws.poisson1_counts(keys, count, dtype, first), None

    return weights


def two_systems(name: str, metric: Metric, *, num: int, seed: int, sample_ids: bool, swap: bool,
                summary: Callable[[Any, Any, Any, Any], dict]) -> Metric:
    """The paired `Metric`: ``summary(value_a, value_b, replicates_a, replicates_b)`` makes its value."""
    if metric.recipe is not None and metric.recipe.module.startswith("fmetrics.detection"):
        from fmetrics.wrappers import _segments  # per-image segments of chunk fields (lists of dicts)

        return _segments.two_systems(name, metric, num=num, seed=seed, sample_ids=sample_ids,
                                     weights=_weights(swap, num), summary=summary)
    queries = by_query(metric)
    if queries and sample_ids:
        raise validation.fail(name, "sample_ids", "False for a retrieval metric (whole queries are resampled, "
                              "keyed by the query ids of `indexes`)", "True")
    args = metric.recipe.arguments if queries else {}
    # a mean over queries: replicates weigh the per-query values once computed (no replicate states)
    per_query = metric.recipe.call(aggregation="none") if queries and args.get("aggregation") == "mean" \
        and args.get("ignore_index") is None else None
    tags = _rows.decomposable_tags(name, metric)
    keeps_rows = _rows.has_cat(tags, metric.init())
    host_sums = metric.host_input and tags is not None and not keeps_rows  # BLEU, chrF, TER, WER, ...
    bits = 1 if swap else 3  # the largest weight: 1 (a swap) or 7 (the Poisson table)

    weights = _weights(swap, num)

    def one_row_states(inputs, n):
        if not metric.host_input:
            return _rows.row_states(metric, inputs, {})
        if metric.host_rows is not None:  # the metric's per-row statistics of the whole batch (BLEU)
            return metric.host_rows(*inputs)
        init = metric.init()  # host data (strings): one update per row, the states stacked
        states = [metric.update(init, *(x[i:i + 1] if _has_rows(x) else x for x in inputs)) for i in range(n)]
        return tree_map(lambda *xs: torch.stack(xs), *states)

    def rows_of(inputs, n):
        """The batch's one-row states (merge-only metrics) or row increments (`_rows.per_row`)."""
        if tags is None:
            return one_row_states(inputs, n)
        if metric.host_input:
            return _rows.walk(lambda tag, x, x0: x - x0 if tag == "sum" else x, tags, one_row_states(inputs, n),
                              metric.init())
        return _rows.per_row(metric, tags, inputs, {})

    def both_rows(in_a, in_b, n):
        """Both systems' row increments: one `host_rows` call over the two batches end to end where the metric has
        one (what they share, BLEU's references, is processed once); on bad input each system's own call raises
        its own message."""
        both = None
        if metric.host_rows is not None:
            try:
                joined = tuple(map(_joined, in_a, in_b))
                both = None if any(x is None for x in joined) else rows_of(joined, 2 * n)
            except Exception:  # bad input: the calls below raise, each naming the row of its own system
                both = None
        if both is None:
            return rows_of(in_a, n), rows_of(in_b, n)
        return tree_map(lambda x: x[:n], both), tree_map(lambda x: x[n:], both)

    def add(reps, rows, w, append=True):
        """Both systems' replicates ``reps`` with ``rows`` added ``w`` times: one matmul for both. Cat fields get
        the rows appended once (``append``): each system's cat chunks hold its own rows."""
        if tags is None:
            return tuple(_rows.merge_weighted(metric, s, r, w, bits) for s, r in zip(reps, rows))
        pair = (tags, tags)
        new = _rows.add_rows_stacked(pair, reps, rows, w)
        return _rows.walk(lambda tag, s, n, d: (tuple(s) + ((d,) if d is not None and append else ()))
                          if tag == "cat" else n, pair, reps, new, rows)

    def split(inputs):
        if sample_ids:
            if not inputs:
                raise validation.fail(name, "ids", "a first input of integer sample ids")
            ids, inputs = inputs[0], inputs[1:]
        else:
            ids = None
        if len(inputs) < 2:
            raise validation.fail(name, "inputs", "preds_a, preds_b and the wrapped metric's other inputs "
                                  "(e.g. target)", f"{len(inputs)} input(s)")
        return ids, (inputs[0], *inputs[2:]), (inputs[1], *inputs[2:]), inputs

    def init():
        stacked = _rows.stack_init(metric, tags, num)
        return PairedState(metric.init(), metric.init(), stacked, stacked, (), torch.zeros((), dtype=torch.int64))

    def update(state, *inputs):
        ids, in_a, in_b, every = split(inputs)
        n = num_rows(every)
        if sample_ids and (not isinstance(ids, torch.Tensor) or ids.is_floating_point() or ids.is_complex()
                           or tuple(ids.shape) != (n,)):
            raise validation.fail(name, "ids", f"an integer tensor of shape ({n},), one id per row of the other "
                                  "inputs", f"{type(ids).__name__} {tuple(getattr(ids, 'shape', ()))}")
        if host_sums and n:  # host data: each sentence's statistics once, the plain states their sums
            rows_a, rows_b = both_rows(in_a, in_b, n)
            ones = torch.ones(n, dtype=torch.int64)
            a, b = _rows.add_rows(tags, state.a, rows_a, ones), _rows.add_rows(tags, state.b, rows_b, ones)
        else:
            a, b = metric.update(state.a, *in_a), metric.update(state.b, *in_b)
            rows_a = rows_b = None
        if n == 0 or per_query is not None:
            return state._replace(a=a, b=b, seen=state.seen + n)
        if sample_ids or queries:
            keys = _draws.sample_keys(seed, ids if sample_ids else every[-1])
        else:
            offsets = state.seen + torch.arange(n, dtype=torch.int64, device=state.seen.device)
            keys = _draws.sample_keys(seed, offsets, _stream_id()) ^ _draws.content_hash(every, n) \
                if not metric.host_input else _draws.sample_keys(seed, offsets, _stream_id())
        own, other = weights(keys)
        if rows_a is None:
            rows_a, rows_b = rows_of(in_a, n), rows_of(in_b, n)
        reps_a, reps_b = add((state.reps_a, state.reps_b), (rows_a, rows_b), own)
        if other is not None:
            reps_a, reps_b = add((reps_a, reps_b), (rows_b, rows_a), other, append=False)
        stored = state.rows + ((keys,) if keeps_rows else ())
        return PairedState(a, b, reps_a, reps_b, stored, state.seen + n)

    def replicate_counts(state):
        """Each replicate's ``(own, other)`` counts of the stored cat rows (``other`` None without swaps), 64
        replicates at a time."""
        if not state.rows:
            yield from [(None, None)] * num
            return
        keys = cat_chunks(state.rows, None)
        for first in range(0, num, 64):
            own, other = weights(keys, first, min(64, num - first))
            own = own.to(torch.int64).unbind(0)
            yield from zip(own, [None] * len(own) if other is None else other.to(torch.int64).unbind(0))

    def replicate(reps_own, reps_other, r, own, other):
        """Replicate ``r`` of a system: its own cat rows ``own`` times, then the other system's ``other`` times."""
        mine = _rows.select(tags, reps_own, r, own)
        if other is None:
            return mine
        theirs = _rows.select(tags, reps_other, r, other)
        def join(tag, x, y):
            if tag != "cat":
                return x  # sum / min / max: replicate r's stacked state holds both systems' rows already
            return (torch.cat([x[0], y[0]]),) if x and y else x or y

        return _rows.walk(join, tags, mine, theirs)

    def weighted_queries(state):
        """Replicates of a mean over queries: per-query values weighted by their queries' draws."""
        qa, qb = per_query.finalize(state.a), per_query.finalize(state.b)
        chunks = state.a.indexes
        ids = torch.unique(cat_chunks(chunks, None)) if chunks else torch.zeros(0, dtype=torch.int64)
        kept = (~qa.isnan()).to(torch.float64)  # a query skipped by empty_target_action="skip" weighs 0
        qa, qb = qa.nan_to_num(0.0), qb.nan_to_num(0.0)
        keys = _draws.sample_keys(seed, ids)
        reps_a, reps_b = [], []
        for first in range(0, num, 64):
            own, other = weights(keys, first, min(64, num - first))
            own = own.to(torch.float64)
            if other is None:
                total = own @ kept
                reps_a.append(own @ qa / total)
                reps_b.append(own @ qb / total)
            else:
                other, total = other.to(torch.float64), kept.sum()
                reps_a.append((own @ qa + other @ qb) / total)
                reps_b.append((own @ qb + other @ qa) / total)
        return torch.cat(reps_a), torch.cat(reps_b)

    def finalize(state):
        if per_query is not None:
            return summary(metric.finalize(state.a), metric.finalize(state.b), *weighted_queries(state))
        value_a, value_b = metric.finalize(state.a), metric.finalize(state.b)  # bad input: its true count first
        stacked = metric.finalize_stacked  # every replicate's value in one call, where the metric has it
        if stacked is not None:
            return summary(value_a, value_b, stacked(state.reps_a), stacked(state.reps_b))
        reps_a, reps_b = [], []
        for r, (own, other) in enumerate(replicate_counts(state)):
            rep_a = replicate(state.reps_a, state.reps_b, r, own, other)
            rep_b = replicate(state.reps_b, state.reps_a, r, own, other)
            if queries and not swap and own is not None:
                rep_a, rep_b = _query_copies(rep_a, own), _query_copies(rep_b, own)
            reps_a.append(metric.finalize(rep_a))
            reps_b.append(metric.finalize(rep_b))
        return summary(value_a, value_b, _rows.stack_values(name, reps_a), _rows.stack_values(name, reps_b))

    def num_rows(every):
        if not metric.host_input:
            return _rows.num_rows(name, every)
        sizes = [(f"inputs[{i}]", len(x)) for i, x in enumerate(every) if _has_rows(x)]
        for arg, m in sizes[1:]:
            if m != sizes[0][1]:
                raise validation.fail(name, arg, f"{sizes[0][1]} rows (as {sizes[0][0]})", f"{m} rows")
        return sizes[0][1] if sizes else 0

    inner_check = _rows.eager_check(metric)

    def check(*inputs):  # the wrapped metric's rules on each system's rows, before any resampling
        _, in_a, in_b, every = split(inputs)
        num_rows(every)
        if host_sums and metric.check is None:
            return  # the per-sentence updates raise the metric's own errors before any state is built
        inner_check(*in_a)
        inner_check(*in_b)

    merge_reps = _rows.stacked_merge(metric, tags)

    def merge(x, y):
        return PairedState(metric.merge(x.a, y.a), metric.merge(x.b, y.b), merge_reps(x.reps_a, y.reps_a),
                           merge_reps(x.reps_b, y.reps_b), tuple(x.rows) + tuple(y.rows), x.seen + y.seen)

    # each system's cat chunks hold its own rows, in the order of the keys in `rows`: a reducer may join them
    reductions = PairedState(metric.reductions, metric.reductions, metric.reductions, metric.reductions, "cat", "sum")
    key = None if metric.state_key is None else (name, metric.state_key, num, seed, sample_ids)
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=f"{name}({metric.name})",
                  state_key=key, reductions=reductions, check=check, is_differentiable=False,
                  host_input=metric.host_input)


def _joined(x, y):
    """``x`` and ``y`` end to end (lists, tuples, tensors), ``x`` where it is ``y``, ``None`` where neither holds."""
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return [*x, *y]
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.dim() >= 1:
        return torch.cat([x, y])
    return x if x is y else None


def _has_rows(x) -> bool:
    return isinstance(x, (list, tuple)) or (isinstance(x, torch.Tensor) and x.dim() >= 1)


def per_key(fn: Callable[..., dict], *values) -> dict:
    """``fn`` on tensors, or per key of dict values (``{"a": {...}, ...}`` becomes ``{key: {"a": ...}}``)."""
    if isinstance(values[0], dict):
        return {k: per_key(fn, *(v[k] for v in values)) for k in values[0]}
    return fn(*(torch.as_tensor(v).to(torch.float64) for v in values))
