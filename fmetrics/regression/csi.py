"""`critical_success_index`: ``hits / (hits + misses + false alarms)`` at a threshold."""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.state import cat_chunks, merge_fields
from fmetrics.recipe import factory


class CSIState(NamedTuple):
    counts: torch.Tensor  # int64 (3,): hits, misses, false alarms (keep_sequence_dim=None)
    chunks: tuple  # (3, S_i) counts per update along keep_sequence_dim, joined in finalize


@factory
def critical_success_index(*, threshold: float, keep_sequence_dim: Optional[int] = None) -> Metric:
    """CSI (threat score) ``TP / (TP + FN + FP)`` with events ``preds >= threshold``, ``target >= threshold``;
    0 when there is no event at all (as torchmetrics).

    ``keep_sequence_dim=k`` gives one score per index along dim ``k``; as in
    torchmetrics, each update appends its own scores (so with ``k = 0`` the
    result is one score per sample; with another ``k`` it depends on the
    batching).

    Example::

        >>> m = fmetrics.critical_success_index(0.5)
        >>> m(torch.tensor([0.9, 0.2, 0.7, 0.1]), torch.tensor([1., 1., 0., 0.]))
        tensor(0.3333, dtype=torch.float64)
    """
    name = "critical_success_index"
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise validation.fail(name, "threshold", "a number", repr(threshold))
    threshold = float(threshold)
    if keep_sequence_dim is not None and (
            isinstance(keep_sequence_dim, bool) or not isinstance(keep_sequence_dim, int) or keep_sequence_dim < 0):
        raise validation.fail(name, "keep_sequence_dim", "None or an int >= 0", repr(keep_sequence_dim))

    def init():
        return CSIState(torch.zeros(3, dtype=torch.int64), ())

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p, t = preds >= threshold, target >= threshold
        if keep_sequence_dim is None:
            dims = tuple(range(p.dim()))
        elif keep_sequence_dim < p.dim():
            dims = tuple(i for i in range(p.dim()) if i != keep_sequence_dim)
        else:
            raise validation.fail(name, "keep_sequence_dim", f"a dim of the inputs (< {p.dim()})",
                                  keep_sequence_dim)
        counts = torch.stack([(p & t).sum(dims, dtype=torch.int64), (~p & t).sum(dims, dtype=torch.int64),
                              (p & ~t).sum(dims, dtype=torch.int64)])
        if keep_sequence_dim is None:
            return CSIState(state.counts + counts, state.chunks)
        return CSIState(state.counts, state.chunks + (counts.T,))

    def finalize(state):
        c = state.counts if keep_sequence_dim is None else cat_chunks(
            state.chunks, torch.zeros(0, 3, dtype=torch.int64)).T
        denom = c.sum(0)
        return torch.where(denom > 0, c[0] / torch.clamp(denom, min=1).double(), 0.0).double()

    tags = CSIState(counts="sum", chunks="cat")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=("regression.csi", threshold, keep_sequence_dim), reductions=tags)
