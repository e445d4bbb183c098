"""`critical_success_index`: ``hits / (hits + misses + false alarms)`` at a threshold."""
from __future__ import annotations

from typing import Literal, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.regression import _inputs
from fmetrics.state import cat_chunks, merge_fields
from fmetrics.recipe import factory


class CSIState(NamedTuple):
    counts: torch.Tensor  # int64 (3,): hits, misses, false alarms (keep_sequence_dim=None)
    chunks: tuple  # (3, S_i) counts per update along keep_sequence_dim, joined in finalize
    nonfinite: torch.Tensor  # int64 (): NaN entries of preds or target (never events)


@factory
def critical_success_index(*, threshold: float, keep_sequence_dim: Optional[int] = None,
                           nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """CSI (threat score) ``TP / (TP + FN + FP)`` with events ``preds >= threshold``, ``target >= threshold``.

    0 when there is no event at all (as torchmetrics).

    Args:
      threshold: the event threshold, a number (required).
      keep_sequence_dim: ``None`` (default): one score over everything; ``k``:
        one score per index along dim ``k``. As in torchmetrics, each update
        appends its own scores (so with ``k = 0`` the result is one score per
        sample; with another ``k`` it depends on the batching).
      nan_strategy: NaN in the inputs: ``"error"`` (default; raised at once on
        CPU, else by `finalize`), ``"warn"``/``"ignore"`` (a NaN pair is
        neither event nor miss) or ``"disable"`` (NaN compares as no event).
        Infinities are valid values here (``inf >= threshold``).

    Inputs:
      ``update(state, preds, target)``: real tensors of one shape.

    Returns:
      float64 0-d tensor in ``[0, 1]``, or one score per index along
      ``keep_sequence_dim``.

    Example::

        >>> m = fmetrics.critical_success_index(threshold=0.5)
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
    _inputs.check_nan_strategy(name, nan_strategy)
    drop = nan_strategy != "disable"

    def init():
        return CSIState(torch.zeros(3, dtype=torch.int64), (), torch.zeros((), dtype=torch.int64))

    def update(state, preds, target):
        preds, target = _inputs.pair(name, preds, target)
        p, t = preds >= threshold, target >= threshold
        nonfinite = state.nonfinite
        if drop:  # a NaN pair is neither an event nor a miss
            nan = torch.isnan(preds) | torch.isnan(target)
            nonfinite = nonfinite + validation.count(nan)
            p, t = p & ~nan, t & ~nan
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
            return CSIState(state.counts + counts, state.chunks, nonfinite)
        return CSIState(state.counts, state.chunks + (counts.T,), nonfinite)

    def finalize(state):
        if nan_strategy in ("error", "warn"):
            validation.report(name, {"preds and target must not be NaN": state.nonfinite}, nan_strategy)
        c = state.counts if keep_sequence_dim is None else cat_chunks(
            state.chunks, torch.zeros(0, 3, dtype=torch.int64)).T
        denom = c.sum(0)
        return torch.where(denom > 0, c[0] / torch.clamp(denom, min=1).double(), 0.0).double()

    tags = CSIState(counts="sum", chunks="cat", nonfinite="sum")
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  reductions=tags, check=_nan_check(name) if nan_strategy == "error" else None,
                  higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))


def _nan_check(name: str):
    def check(preds, target):
        for arg, x in (("preds", preds), ("target", target)):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and bool(torch.isnan(x).any()):
                raise ValueError(f"{name}: {arg} must not be NaN (nan_strategy='error'); found "
                                 f"{validation.quote(x[torch.isnan(x)])}")
    return check
