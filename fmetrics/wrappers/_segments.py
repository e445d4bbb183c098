"""Paired resampling of a metric fed one list entry per sample whose state only concatenates: detection.

`mean_average_precision` takes lists of per-image dicts and keeps every box in ``cat`` chunks, a
variable number of entries per image, so the rows of `fmetrics.wrappers._rows` (a fixed number of
entries per row) do not apply. Here every image is one sample: each is added by its own update, and
the state records, per image and per chunk field, how many entries that image added (its *segment*).
A replicate is the plain state with each chunk field's segments repeated: image ``i`` of system A
``own[r, i]`` times, then B's image ``i`` ``other[r, i]`` times (paired bootstrap: Poisson counts and
no swap; permutation test: one of the two). The ``Invalid`` records (bad input raises in the plain
finalize, which runs first) are the plain ones.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.state import cat_chunks
from fmetrics.wrappers import _draws
from fmetrics.wrappers._pairs import PairedState
from fmetrics.wrappers._rows import stack_values
from fmetrics.wrappers.bootstrap import _stream_id


def _cat_fields(metric: Metric) -> list:
    return [k for k, tag in metric.reductions._asdict().items() if tag == "cat"]


def _repeat_segments(lengths: torch.Tensor, starts: torch.Tensor, copies: torch.Tensor) -> torch.Tensor:
    """Indexes of the segments ``[starts_j, starts_j + lengths_j)`` in order, segment ``j`` ``copies_j`` times."""
    start, length = torch.repeat_interleave(starts, copies), torch.repeat_interleave(lengths, copies)
    offset = torch.cumsum(length, 0) - length
    return torch.repeat_interleave(start - offset, length) + torch.arange(int(length.sum()))


def _comparable(name: str, value_a, value_b, reps_a: list, reps_b: list):
    """``(value_a, value_b, stacked replicates of A, of B)`` over the keys whose replicate values all have the
    plain value's shape: a per-class value (``classes``, ``map_per_class``) of a replicate that drew no image of
    some class is shorter, and is left out with a warning."""
    if not isinstance(value_a, dict):
        return value_a, value_b, stack_values(name, reps_a), stack_values(name, reps_b)
    shape = lambda v: tuple(torch.as_tensor(v).shape)  # noqa: E731
    keep = [k for k in value_a if all(shape(r[k]) == shape(value_a[k]) and shape(q[k]) == shape(value_b[k])
                                      for r, q in zip(reps_a, reps_b)) and shape(value_a[k]) == shape(value_b[k])]
    if len(keep) < len(value_a):
        warnings.warn(f"{name}: {sorted(set(value_a) - set(keep))} left out: their shape (a class list) differs "
                      "between the systems or replicates", UserWarning, stacklevel=3)
    pick = lambda v: {k: v[k] for k in keep}  # noqa: E731
    return (pick(value_a), pick(value_b), stack_values(name, [pick(r) for r in reps_a]),
            stack_values(name, [pick(r) for r in reps_b]))


def two_systems(name: str, metric: Metric, *, num: int, seed: int, sample_ids: bool,
                weights: Callable[..., tuple], summary: Callable[[Any, Any, Any, Any], dict]) -> Metric:
    """The paired `Metric` of a per-image metric; ``weights(keys, first, count)`` gives ``(own, other)``."""
    fields = _cat_fields(metric)

    def init():
        return PairedState(metric.init(), metric.init(), (), (), (), torch.zeros((), dtype=torch.int64))

    def images(state, preds, target):
        """The state with each image added by its own update, and the ``(B, F)`` entries each added."""
        added = []
        for p, t in zip(preds, target):
            one = metric.update(metric.init(), [p], [t])
            added.append([sum(c.shape[0] for c in getattr(one, f)) for f in fields])
            state = metric.merge(state, one)
        return state, torch.tensor(added, dtype=torch.int64).reshape(len(added), len(fields))

    def split(inputs):
        ids, inputs = (inputs[0], inputs[1:]) if sample_ids and inputs else (None, inputs)
        if len(inputs) != 3 or not all(isinstance(x, (list, tuple)) for x in inputs) \
                or not len(inputs[0]) == len(inputs[1]) == len(inputs[2]):
            raise validation.fail(name, "inputs", ("ids, " if sample_ids else "") + "preds_a, preds_b and target: "
                                  "equally long lists of per-image dicts", f"{len(inputs)} input(s)")
        n = len(inputs[0])
        if sample_ids and (not isinstance(ids, torch.Tensor) or ids.is_floating_point() or tuple(ids.shape) != (n,)):
            raise validation.fail(name, "ids", f"an integer tensor of shape ({n},), one id per image",
                                  f"{type(ids).__name__} {tuple(getattr(ids, 'shape', ()))}")
        return ids, inputs

    def check(*inputs):
        _, (pa, pb, t) = split(inputs)
        metric.update(metric.init(), pa, t)
        metric.update(metric.init(), pb, t)

    def update(state, *inputs):
        ids, (pa, pb, t) = split(inputs)
        n = len(t)
        if n == 0:
            return state
        a, len_a = images(state.a, pa, t)
        b, len_b = images(state.b, pb, t)
        if sample_ids:
            keys = _draws.sample_keys(seed, ids)
        else:
            keys = _draws.sample_keys(seed, state.seen + torch.arange(n, dtype=torch.int64), _stream_id())
        return PairedState(a, b, state.reps_a + (len_a,), state.reps_b + (len_b,), state.rows + (keys,),
                           state.seen + n)

    def merge(x, y):
        return PairedState(metric.merge(x.a, y.a), metric.merge(x.b, y.b), x.reps_a + y.reps_a,
                           x.reps_b + y.reps_b, x.rows + y.rows, x.seen + y.seen)

    def replicate(own, own_len, other, other_len, w_own, w_other):
        """``own``'s state with image ``i``'s segments ``w_own[i]`` times, then ``other``'s ``w_other[i]``."""
        out = {}
        for j, f in enumerate(fields):
            mine, theirs = own[f], other[f] if w_other is not None else None
            if mine is None and theirs is None:
                out[f] = ()
                continue
            mine = theirs[:0] if mine is None else mine
            if w_other is None:
                lengths, copies = own_len[:, j], w_own
                starts = torch.cumsum(lengths, 0) - lengths
                whole = mine
            else:  # image i's own segment, then its other one: offsets into [own | other]
                theirs = mine[:0] if theirs is None else theirs
                lengths = torch.stack([own_len[:, j], other_len[:, j]], 1).reshape(-1)
                starts = torch.stack([torch.cumsum(own_len[:, j], 0) - own_len[:, j],
                                      mine.shape[0] + torch.cumsum(other_len[:, j], 0) - other_len[:, j]], 1)
                copies = torch.stack([w_own, w_other], 1).reshape(-1)
                whole = torch.cat([mine, theirs])
            out[f] = (whole[_repeat_segments(lengths, starts.reshape(-1), copies)],)
        return out

    def finalize(state):
        value_a, value_b = metric.finalize(state.a), metric.finalize(state.b)  # bad input raises here first
        whole_a = {f: cat_chunks(getattr(state.a, f), None) for f in fields}
        whole_b = {f: cat_chunks(getattr(state.b, f), None) for f in fields}
        empty = torch.zeros(0, len(fields), dtype=torch.int64)
        len_a, len_b = cat_chunks(state.reps_a, None), cat_chunks(state.reps_b, None)
        len_a, len_b = (empty if x is None else x for x in (len_a, len_b))
        keys = cat_chunks(state.rows, None)
        reps_a, reps_b = [], []
        for first in range(0, num, 64):
            own, other = weights(keys if keys is not None else torch.zeros(0, dtype=torch.int64), first,
                                 min(64, num - first))
            for r in range(own.shape[0]):
                w_own = own[r].to(torch.int64)
                w_other = None if other is None else other[r].to(torch.int64)
                reps_a.append(metric.finalize(state.a._replace(
                    **replicate(whole_a, len_a, whole_b, len_b, w_own, w_other))))
                reps_b.append(metric.finalize(state.b._replace(
                    **replicate(whole_b, len_b, whole_a, len_a, w_own, w_other))))
        return summary(*_comparable(name, value_a, value_b, reps_a, reps_b))

    reductions = PairedState(metric.reductions, metric.reductions, "cat", "cat", "cat", "sum")
    key = None if metric.state_key is None else (name, metric.state_key, num, seed, sample_ids)
    return Metric(init=init, update=update, merge=merge, finalize=finalize, name=f"{name}({metric.name})",
                  state_key=key, reductions=reductions, check=check, is_differentiable=False, host_input=True)
