"""Curve arithmetic shared by the curve metrics (runs in ``finalize``; syncs are allowed).

A column's `Counts` hold, for each threshold ``t``, the false and true
positives ``fps(t), tps(t)`` among the entries with ``score >= t``:

* exact -- the thresholds are the distinct scores in decreasing order (one
  sort; ties share a threshold, as in scikit-learn's ``_binary_clf_curve``),
  the counts come from cumulative sums at the first entry of each run of equal scores;
* binned -- the user's thresholds in the given order.

Exact columns of CPU states are sorted and counted by NumPy on the host; those
of any other device by torch on that device (`on_device_path`), where nothing
but a few scalars leaves it.

`roc` and `pr` follow torchmetrics' conventions for both kinds (the exact ROC
starts at ``(0, 0)`` with threshold 1; the PR curve ends at precision 1,
recall 0). Values are float64.
"""
from __future__ import annotations

import warnings
from typing import NamedTuple, Optional, Union

import numpy as np
import torch

from fmetrics import _keys


class Counts(NamedTuple):
    fps: torch.Tensor  # int64 (M,)
    tps: torch.Tensor  # int64 (M,)
    thr: torch.Tensor  # (M,)
    pos: torch.Tensor  # int64 0-d: positives in the column
    neg: torch.Tensor  # int64 0-d: negatives
    exact: bool


class Sorted(NamedTuple):
    """One column sorted (`sort_column`): its order keys in increasing order, negatives first among equal keys.

    ``keys + offset`` are `fmetrics._keys.float_key` of the scores (equal scores, ``-0.0``
    and ``+0.0`` included, have one key; NaN last); ``keys`` are int32 or int64, ``labels``
    0/1 small integers. NumPy arrays on the host path, torch tensors on the scores' device
    on the device path (`on_device_path`); `exact_counts` and `exact_auroc` take either.
    """

    keys: Union[np.ndarray, torch.Tensor]
    labels: Union[np.ndarray, torch.Tensor]
    offset: int
    dtype: torch.dtype  # the scores': thresholds are decoded to it
    device: torch.device


TORCH_ON_CPU = False  # tests set it: CPU columns then take the device path


def on_device_path(device: torch.device) -> bool:
    """Whether a column on ``device`` is sorted and counted by torch there: every device but the CPU.

    On the CPU NumPy's single-pass kernels are cheaper (no per-operation thread
    start-up); on an accelerator a copy of the column to the host would cost more
    than the whole computation, so nothing leaves the device but a few scalars
    (the key range, the number of distinct scores, the number of positives).
    """
    return device.type != "cpu" or TORCH_ON_CPU


def sort_column(scores: torch.Tensor, labels: torch.Tensor) -> Sorted:
    """The one sort of a column, shared by its counts and its AUROC (`Sorted`)."""
    return Sorted(*_sorted(scores.detach(), labels.detach()), scores.dtype, scores.device)


def sort_column_parts(parts, device: torch.device) -> Optional[Sorted]:
    """`sort_column` of a host column given as float32 parts: ``parts()`` yields ``(scores, labels 0/1)`` per
    chunk of a state (made as needed, once per pass), never joined: `fmetrics._keys.sort_flagged_parts`
    (4 bytes a row besides the state). ``None`` when that does not apply (keys too wide): the caller
    joins the parts."""
    found = _keys.sort_flagged_parts(lambda: ((s.numpy(), y.numpy()) for s, y in parts()))
    return None if found is None else Sorted(*found, torch.float32, device)


def positives(column: Sorted) -> torch.Tensor:
    """The positives of a sorted column: an int64 0-d tensor on its device."""
    labels = column.labels
    if isinstance(labels, np.ndarray):
        return torch.tensor(int(np.count_nonzero(labels)), device=column.device)
    return labels.sum().to(torch.int64)


def _sorted(scores: torch.Tensor, labels: torch.Tensor):
    """``(keys, labels, offset)`` of `Sorted`: `fmetrics._keys.sort_flagged_floats`.

    One sort of ``key * 2 + label`` (the float keys offset by the smallest, in
    int32 for scores in ``[0, 1]``), which carries the labels along (no
    argsort, no gather) -- by NumPy on the CPU, by torch on the scores' device
    otherwise.
    """
    if on_device_path(scores.device):
        return _keys.sort_flagged_floats(scores, labels)
    host = scores if scores.dtype in (torch.float32, torch.float64) else scores.float()  # 16-bit: exact
    return _keys.sort_flagged_floats(host.numpy(), labels.numpy())


def _thresholds(column: Sorted, at) -> torch.Tensor:
    """The scores of the sorted keys at positions ``at``, as the column's dtype on its device."""
    keys = column.keys[at]
    keys = (keys.astype(np.int64) if isinstance(keys, np.ndarray) else keys.to(torch.int64)) + column.offset
    values = _keys.float_from_key(keys, column.dtype == torch.float64)
    if isinstance(values, np.ndarray):
        values = torch.from_numpy(np.ascontiguousarray(values))
    return values.to(column.device, column.dtype)


def _runs(column: Sorted):
    """Device path: ``(starts, before, pos)`` -- the first index of each run of equal keys (increasing), the
    positives before it (int64) and all positives (0-d). The number of runs is a host read (a sync)."""
    keys, labels = column.keys, column.labels
    first = torch.empty(keys.shape, dtype=torch.bool, device=keys.device)
    first[:1] = True
    torch.ne(keys[1:], keys[:-1], out=first[1:])
    starts = torch.nonzero(first).reshape(-1)
    cum = torch.cumsum(labels, 0)
    pos = cum[-1].clone() if keys.numel() else cum.new_zeros(())  # not a view: the n-long sums are freed
    return starts, cum[starts] - labels[starts], pos


def exact_counts(column: Sorted) -> Counts:
    """`Counts` at every distinct score of a sorted column (`sort_column`).

    With the entries in increasing order and ``a`` the first index of a run of
    equal scores ``t``: ``tps(t) = P - (positives before a)`` and
    ``fps(t) = (n - a) - tps(t)``.
    """
    keys, ordered, _, _, dev = column
    n = keys.shape[0]
    if isinstance(keys, torch.Tensor):
        starts, before, pos = _runs(column)
        starts, tps = starts.flip(0), pos - before.flip(0)  # decreasing thresholds
        return Counts(n - starts - tps, tps, _thresholds(column, starts), pos, n - pos, True)
    cum = np.cumsum(ordered)
    starts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    starts = np.concatenate([np.zeros(min(n, 1), dtype=np.int64), starts])[::-1]  # decreasing thresholds
    pos = int(cum[-1]) if n else 0
    tps = pos - np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0)
    as_t = lambda x: torch.from_numpy(np.ascontiguousarray(x)).to(dev)  # noqa: E731
    return Counts(as_t(n - starts - tps), as_t(tps), _thresholds(column, starts),
                  torch.tensor(pos, device=dev), torch.tensor(n - pos, device=dev), True)


def is_hard(thresholds: torch.Tensor) -> bool:
    """The distinct scores of a column are all 0 or 1 (hard labels, not scores)."""
    return thresholds.numel() <= 2 and bool(((thresholds == 0) | (thresholds == 1)).all())


def exact_auroc(column: Sorted, name: str):
    """``(AUROC, hard)``: the Mann-Whitney statistic with ties counting 1/2 (= the trapezoidal ROC area).

    Over the runs of equal scores in increasing order, with ``p`` positives and
    ``q`` negatives in a run, ``x`` the negatives below it and ``x' = x + q``
    those up to its end, ``2 U = sum_runs p (x + x')`` (the trapezoids of the
    ROC curve in counts): on the device in torch, on the host in one walk over
    cache-sized blocks (`_twice_u_host`: memory bounded by the block, not the column). AUROC is ``U / (P N)``, in exact
    integer arithmetic (int64 on the device). No positives or no negatives
    gives 0 with a warning (torchmetrics). ``hard``: see `is_hard`.
    """
    keys, ordered, _, _, dev = column
    n = keys.shape[0]
    zero = torch.zeros((), dtype=torch.float64, device=dev)
    if isinstance(keys, torch.Tensor):
        starts, before, total = _runs(column)
        pos = int(total)
        hard = n > 0 and starts.numel() <= 2 and is_hard(_thresholds(column, starts))
        if pos == 0 or pos == n:
            _warn(name, "positive" if pos == 0 else "negative")
            return zero, hard
        below = starts - before  # negatives below each run
        up_to = torch.cat([below[1:], below.new_full((1,), n - pos)])  # ... and up to its end
        twice_u = (torch.diff(before, append=total.reshape(1)) * (below + up_to)).sum()
        return twice_u.double() / (2.0 * pos * (n - pos)), hard
    pos = int(np.count_nonzero(ordered))
    twice_u, distinct = _twice_u_host(keys, ordered)
    hard = n > 0 and distinct <= 2 and is_hard(_thresholds(column, [0, -1]))
    if pos == 0 or pos == n:
        _warn(name, "positive" if pos == 0 else "negative")
        return zero, hard
    return zero + twice_u / (2.0 * pos * (n - pos)), hard


_BLOCK = 1 << 14  # positions per step of the host walk over a sorted column (~10 int64 temporaries of 128 KiB)


def _twice_u_host(keys: np.ndarray, labels: np.ndarray) -> tuple[int, int]:
    """``(2 U, distinct keys)`` of a host `Sorted` column in one walk over blocks (bounded memory).

    Over the runs of equal keys in increasing order, a run with ``p`` positives and
    ``q`` negatives above ``x`` negatives adds ``p (2 x + q)``: its positives beat
    the ``x`` below and tie with its ``q``. A run still open at a block's end
    carries its counts into the next block.
    """
    twice_u = below = open_p = open_q = 0
    distinct, last = 0, None
    for s in range(0, keys.shape[0], _BLOCK):
        k, y = keys[s: s + _BLOCK], labels[s: s + _BLOCK]
        cut = np.flatnonzero(k[1:] != k[:-1]) + 1  # runs starting inside the block
        if last is None or k[0] != last:
            cut = np.concatenate(([0], cut))  # the block starts a run: the open one (if any) closes
        distinct += cut.size
        edges = np.concatenate(([0], cut, [k.shape[0]]))
        cum = np.concatenate(([0], np.cumsum(y, dtype=np.int64)))
        p = cum[edges[1:]] - cum[edges[:-1]]  # positives per segment; segment 0 continues the open run
        q = np.diff(edges) - p
        open_p, open_q = open_p + int(p[0]), open_q + int(q[0])
        if cut.size:  # the open run and segments 1 .. -2 close here; the last segment opens
            ps, qs = np.append(open_p, p[1:-1]), np.append(open_q, q[1:-1])
            xs = below + np.cumsum(qs) - qs  # negatives below each closed run
            twice_u += int((ps * (2 * xs + qs)).sum())
            below += int(qs.sum())
            open_p, open_q = int(p[-1]), int(q[-1])
        last = k[-1]
    return twice_u + open_p * (2 * below + open_q), distinct


def divide(num: torch.Tensor, den: torch.Tensor, zero_division: float = 0.0) -> torch.Tensor:
    """float64 ``num / den`` with ``zero_division`` where ``den == 0``."""
    num, den = num.double(), torch.as_tensor(den, dtype=torch.float64, device=num.device)
    return torch.where(den != 0, num / torch.where(den != 0, den, 1.0), zero_division)


def _warn(name: str, what: str) -> None:
    warnings.warn(f"{name}: no {what} samples in target; {what[:3]} rates are meaningless and set to 0",
                  UserWarning, stacklevel=4)


def roc(c: Counts, name: str = "roc"):
    """``(fpr, tpr, thresholds)``: exact with a leading ``(0, 0)`` at threshold 1; binned in reversed order."""
    if not c.exact:
        return divide(c.fps, c.neg).flip(0), divide(c.tps, c.pos).flip(0), c.thr.flip(0)
    zero = torch.zeros(1, dtype=torch.int64, device=c.fps.device)
    fps, tps = torch.cat([zero, c.fps]), torch.cat([zero, c.tps])
    thr = torch.cat([torch.ones(1, dtype=c.thr.dtype, device=c.thr.device), c.thr])
    if int(c.neg) == 0:
        _warn(name, "negative")
    if int(c.pos) == 0:
        _warn(name, "positive")
    return divide(fps, c.neg), divide(tps, c.pos), thr


def pr(c: Counts, name: str = "precision_recall_curve", absent: float = 1.0):
    """``(precision, recall, thresholds)`` with the final point ``(1, 0)``; exact thresholds increase.

    With no positives the exact recall is ``absent`` everywhere: 1 for binary /
    multilabel columns, NaN for a multiclass class (torchmetrics' conventions).
    """
    one = torch.ones(1, dtype=torch.float64, device=c.fps.device)
    if not c.exact:
        nan = float("nan")
        precision = divide(c.tps, c.tps + c.fps, nan)
        recall = divide(c.tps, c.pos, nan)
        return torch.cat([precision, one]), torch.cat([recall, one * 0]), c.thr
    precision = divide(c.tps, c.tps + c.fps)
    if int(c.pos) == 0:
        warnings.warn(f"{name}: no positive samples in target; recall is undefined and set to {absent}",
                      UserWarning, stacklevel=3)
        recall = torch.full_like(precision, absent)
    else:
        recall = divide(c.tps, c.pos)
    return torch.cat([precision.flip(0), one]), torch.cat([recall.flip(0), one * 0]), c.thr.flip(0)


def auc(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Trapezoidal area under ``y(x)`` (``x`` monotone), float64."""
    if x.numel() < 2:
        return torch.zeros((), dtype=torch.float64, device=x.device)
    return torch.trapezoid(y.double(), x.double())


def average_precision(precision: torch.Tensor, recall: torch.Tensor, exact: bool) -> torch.Tensor:
    """``sum_n (R_n - R_{n+1}) P_n`` over a PR curve.

    Binned curves count their undefined (NaN) points as 0; an exact curve is
    NaN only for a multiclass class without positives, whose AP stays NaN.
    """
    if not exact:
        precision, recall = torch.nan_to_num(precision, nan=0.0), torch.nan_to_num(recall, nan=0.0)
    return -torch.sum((recall[1:] - recall[:-1]) * precision[:-1])


def interp(x: torch.Tensor, xp: torch.Tensor, fp: torch.Tensor) -> torch.Tensor:
    """Piecewise-linear ``fp(xp)`` at ``x`` extended linearly past the ends (torchmetrics' ``interp``)."""
    if xp.numel() < 2:  # a curve of one point (no data): constant
        return fp[:1].expand(x.shape) if fp.numel() else torch.zeros_like(x, dtype=torch.float64)
    slope = divide(fp[1:] - fp[:-1], xp[1:] - xp[:-1])
    offset = fp[:-1] - slope * xp[:-1]
    if bool((xp[1:] >= xp[:-1]).all()):
        idx = torch.searchsorted(xp.contiguous(), x.contiguous(), right=True) - 1
    else:  # not monotone (precision): count the points at or below x, as torchmetrics does
        idx = (x[:, None] >= xp[None, :]).sum(1) - 1
    idx = idx.clamp(0, max(slope.numel() - 1, 0))
    return slope[idx] * x + offset[idx]


def reduce(values: torch.Tensor, average: str, weights: torch.Tensor, name: str) -> torch.Tensor:
    """Per-column ``values`` -> ``"none"`` (as is), ``"macro"`` (mean) or ``"weighted"`` (by positives).

    NaN columns are left out of the mean with a warning (torchmetrics' rule).
    """
    if average == "none":
        return values
    ok = ~torch.isnan(values)
    if not bool(ok.all()):
        warnings.warn(f"{name}: the score of one or more columns is NaN; they are left out of the "
                      f"{average} average", UserWarning, stacklevel=3)
    if average == "macro":
        return values[ok].mean()
    w = weights.double()[ok]
    return (values[ok] * divide(w, w.sum())).sum()


def stack(columns: list, exact: bool):
    """Per-column results: a list (exact: columns differ in length) or a stacked tensor (binned)."""
    return list(columns) if exact else torch.stack(list(columns))
