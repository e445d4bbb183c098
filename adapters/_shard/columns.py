"""Sharded finalize of the exact score-curve metrics beyond binary AUROC / AP: one sample sort per column.

Every task is ``K`` binary columns of (score, label) pairs (`fmetrics.classification.curves._scores`):
binary one, multiclass one per class (one-vs-rest), multilabel one per label; ``average="micro"`` pools
them into one. Each column goes through `sort.sample_sort` (equal scores of every rank meet on one rank,
so a tie never straddles a range boundary); with ``P_u, N_u`` the positives / negatives of distinct score
``u`` and the exclusive prefix over the ranks giving the counts below each range:

* AUROC and AP (`scalar`): per range ``sum_u P_u (N_{<u} + N_u / 2)`` and
  ``sum_u P_u TP_{>=u} / (TP_{>=u} + FP_{>=u})``, one ``all_reduce`` for every column; the per-column
  values ``U / (P N)`` and ``AP / P`` are then averaged as one process does (`_curve.reduce`). Memory per
  rank: its own rows and distinct keys.
* partial AUROC (``max_fpr``, `partial_auroc`): per range the trapezoids of its ROC points up to
  ``fpr <= max_fpr``, the joins to the previous range (one ``all_gather`` of the ranges' end points) and the
  segment cut at ``max_fpr``, one ``all_reduce``. Memory: as AUROC.
* the fixed-point metrics (`FIXED`): each range picks its candidate point by the metric's rule; the ``world``
  candidates are gathered as a `_curve.Counts` and the metric's own ``finish`` chooses among them.
* the curves and what else is read off them (ROC, PR curve, EER, log-AUC) (`Global`): each range's points
  ``(fps, tps, threshold)`` with ``tps(u) = P - P_{<u}`` are gathered in rank order (every range is above
  the previous rank's) and flipped to decreasing thresholds: the global `_curve.Counts` of each column, from
  which the metric's own ``finish`` computes the value. Every rank then holds the curve: O(global distinct
  scores) per column, the size of a curve's output.

The value records (invalid labels, NaN scores) are reduced on the state without its rows, and reported as
one process reports them; warnings (no positives / negatives, hard 0/1 scores, NaN columns left out of an
average, empty input) are those of one process.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from adapters._shard import comm, sort
from fmetrics import _keys
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import TASKS, Prepared, family
from fmetrics.classification.curves.average_precision import _column as ap_column
from fmetrics.classification.curves.fixed_point import _lexmax

SCALAR = frozenset({"auroc", "average_precision"})
CURVE = frozenset({"roc", "precision_recall_curve", "eer", "logauc", "recall_at_fixed_precision",
                   "precision_at_fixed_recall", "sensitivity_at_specificity", "specificity_at_sensitivity"})


def _kind(metric):
    """``(task, kind)`` of a score-curve metric (``kind`` its name without the task), else ``None``."""
    r = metric.recipe
    if r is None or not r.module.startswith("fmetrics.classification.curves"):
        return None
    task, _, kind = metric.name.partition("_")
    return (task, kind) if task in TASKS and kind in SCALAR | CURVE else None


def applies(metric) -> bool:
    return _kind(metric) is not None and metric.recipe.arguments.get("thresholds") is None


def finalize(ctx: comm.Ctx, metric, state, reduce):
    task, kind = _kind(metric)
    args = metric.recipe.arguments
    num = 1 if task == "binary" else args["num_classes" if task == "multiclass" else "num_labels"]
    spec = family(metric.name, task, num, None, args["ignore_index"], args["validate_args"])
    base = reduce(metric, state._replace(scores=(), labels=()))
    p = Global(spec, base)  # reports the value records, as one process's shared step
    device = base.invalid.count.device
    width = () if task == "binary" else (num,)
    (dtype,) = comm.promoted(ctx, [state.scores[0].dtype if state.scores else None])
    dtype = dtype or torch.float32
    label_dtype = torch.int64 if task == "multiclass" else torch.int8
    local = state._replace(scores=(torch.cat([torch.empty((0,) + width, dtype=dtype, device=device)]
                                             + [c.to(device, dtype) for c in state.scores]),),
                           labels=(torch.cat([torch.empty((0,) + width if task == "multilabel" else (0,),
                                                          dtype=label_dtype, device=device)]
                                             + [c.to(device) for c in state.labels]),))
    if task == "binary" and dtype == torch.float32 and device.type == "cpu":
        # decoded chunk by chunk, as one process's host path does (a logits chunk's sigmoid: same bits)
        kept = [spec._binary_kept(c.to(dtype), code) for c, code in zip(state.scores, state.labels)]
        pairs = [(torch.cat([local.scores[0][:0]] + [s for s, _ in kept]),
                  torch.cat([torch.zeros(0, dtype=torch.bool, device=device)] + [y for _, y in kept]))]
    else:
        pairs = spec.pairs(local)
    average = args.get("average") if task != "binary" else "none"
    average = "none" if average is None else average
    if average == "micro":
        pairs = [(torch.cat([s for s, _ in pairs]), torch.cat([y for _, y in pairs]))]
    ranges = _sorted_columns(ctx, pairs)
    if sum(int(r.total.sum()) for r in ranges) == 0:  # every entry dropped, or no rows: as one process
        return metric.finalize(local._replace(scores=(local.scores[0][:0],), labels=(local.labels[0][:0],),
                                              invalid=base.invalid))
    if kind in FIXED:
        p.curves(ctx, ranges, dtype, micro=False, pick=FIXED[kind](args[FLOOR[kind]], spec.absent_recall))
        return metric.finish(p)
    max_fpr = args.get("max_fpr")
    if max_fpr is not None and _distinct(ctx, ranges[0]) > 2 and bool((ranges[0].total > 0).all()):
        return partial_auroc(ctx, ranges[0], float(max_fpr), device)
    if kind in CURVE or max_fpr is not None:
        p.curves(ctx, ranges, dtype, micro=average == "micro")
        return metric.finish(p)
    return scalar(ctx, p, kind, average, ranges, device)


def _sorted(ctx: comm.Ctx, scores: torch.Tensor, labels: torch.Tensor) -> sort.Range:
    keys, counts = sort.distinct_labels(scores.to(ctx.comm), labels.to(ctx.comm))
    return sort.sample_sort(ctx, keys, counts)


PACKED = (torch.float16, torch.bfloat16, torch.float32)  # score dtypes whose order fits in 32 bits
GROUP_ROWS = 1 << 18  # entries (over every rank) of the columns that share one packed sample sort


def _sorted_columns(ctx: comm.Ctx, pairs: list) -> list:
    """A `sort.Range` per column. Columns of float32 (or narrower) scores share packed sample sorts, in groups
    of consecutive columns of up to `GROUP_ROWS` entries over every rank (one ``all_reduce`` of the column
    sizes): a group of many short columns costs one sort's collectives, a long column is sorted alone (arrays
    past a few MB cost page faults more than a sort's collectives save). Other dtypes: a sort per column."""
    dtype = pairs[0][0].dtype if pairs else None  # (every column is one state's)
    if len(pairs) <= 1 or dtype not in PACKED:
        return [_sorted(ctx, s, y) for s, y in pairs]
    sizes = torch.tensor([s.shape[0] for s, _ in pairs], dtype=torch.int64, device=ctx.comm)
    dist.all_reduce(sizes, group=ctx.group)
    out, group, rows = [], [], 0
    for pair, n in zip(pairs + [None], sizes.tolist() + [GROUP_ROWS + 1]):
        if group and rows + n > GROUP_ROWS:
            out += [_sorted(ctx, *group[0])] if len(group) == 1 else _sorted_packed(ctx, group)
            group, rows = [], 0
        if pair is not None:
            group.append(pair)
            rows += n
    return out


def _sorted_packed(ctx: comm.Ctx, pairs: list) -> list:
    """A `sort.Range` per column from one sample sort of int64 keys ``column << 32 | score order bits`` (a
    column's keys are one contiguous run of the key axis, so each rank's range holds a run of every column it
    reaches, ties whole); a column's counts below its run and its totals come from one ``all_gather`` of every
    rank's per-column sums."""
    dtype = pairs[0][0].dtype
    keys, counts = _distinct_packed(pairs, ctx.comm)
    r = sort.sample_sort(ctx, keys, counts)
    column = r.keys >> 32
    mine = torch.zeros((len(pairs), 2), dtype=torch.int64, device=ctx.comm).index_add_(0, column, r.counts)
    every = comm.gather_rows(ctx, mine[None])  # (world, columns, 2)
    below, total = every[: ctx.rank].sum(0), every.sum(0)
    bounds = torch.searchsorted(column, torch.arange(len(pairs) + 1, device=column.device)).tolist()
    scores = _keys.float32_from_key((r.keys & 0xFFFFFFFF) - 2**31).to(dtype)
    return [sort.Range(scores[a:b], r.counts[a:b], below[k], total[k], None, None)
            for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def _distinct_packed(pairs: list, device: torch.device):
    """Distinct keys ``column << 32 | ascending32(score) + 2^31`` of every column, ascending, with their
    ``(positives, negatives)``: one sort of ``key << 1 | label`` (numpy in place on the CPU), then the runs of
    equal keys."""
    packed = torch.empty(sum(s.shape[0] for s, _ in pairs), dtype=torch.int64, device=device)
    at = 0
    for k, (s, y) in enumerate(pairs):
        seg = packed[at: at + s.shape[0]]
        at += s.shape[0]
        s = s.to(device, torch.float32)  # (float16 / bfloat16: exact)
        seg.copy_(torch.from_numpy(_keys.ascending32(s.numpy())) if device.type == "cpu" else _keys.ascending32(s))
        seg += (k << 32) + 2**31
        seg <<= 1
        seg |= y.to(device)
    packed = sort.sorted_in_place(packed)
    if device.type != "cpu":
        keys, inverse, rows = torch.unique_consecutive(packed >> 1, return_inverse=True, return_counts=True)
        pos = torch.zeros_like(rows).index_add_(0, inverse, packed & 1)
        return keys, torch.stack([pos, rows - pos], 1)
    p = packed.numpy()
    key = p >> 1
    new = np.empty(key.shape, dtype=bool)
    new[:1] = True
    np.not_equal(key[1:], key[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], key.shape[0])[: starts.shape[0]]  # (no rows: none)
    cum = np.cumsum(p & 1)
    pos = cum[ends - 1] - cum[starts] + (p[starts] & 1)
    return torch.from_numpy(key[starts]), torch.from_numpy(np.stack([pos, ends - starts - pos], 1))


def _below(r: sort.Range):
    """Per key of the range: the positives and negatives of every smaller key (all ranks)."""
    pos, neg = r.counts[:, 0], r.counts[:, 1]
    return r.below[0] + torch.cumsum(pos, 0) - pos, r.below[1] + torch.cumsum(neg, 0) - neg


def scalar(ctx: comm.Ctx, p: "Global", kind: str, average: str, ranges: list, device):
    """AUROC / AP per column from per-range sums (one ``all_reduce``), averaged as one process."""
    sums = []
    for r in ranges:
        n_pos, n_neg = (int(v) for v in r.total)
        pos_below, neg_below = _below(r)
        pos_f, neg_f = r.counts[:, 0].double(), r.counts[:, 1].double()
        tp, fp = (n_pos - pos_below).double(), (n_neg - neg_below).double()
        soft = ((r.keys != 0) & (r.keys != 1)).sum().double()
        sums.append(torch.stack([(pos_f * (neg_below.double() + neg_f / 2)).sum(),
                                 (pos_f * tp / (tp + fp).clamp_min(1)).sum(), soft]))
    sums = torch.stack(sums)
    dist.all_reduce(sums, group=ctx.group)
    totals = [(int(r.total[0]), int(r.total[1])) for r in ranges]
    hard = any(a + b for a, b in totals) and all(s == 0 for s, (a, b) in zip(sums[:, 2].tolist(), totals) if a + b)
    micro = average == "micro"
    values = []
    if kind == "auroc":
        for (u, _, _), (n_pos, n_neg) in zip(sums.tolist(), totals):
            if n_pos == 0 or n_neg == 0:
                _curve._warn(p.name, "positive" if n_pos == 0 else "negative")
                values.append(0.0)
            else:
                values.append(u / (n_pos * n_neg))
        p.warn_if_hard(hard=hard)
    else:
        p.warn_if_hard(hard=hard)
        absent = 1.0 if micro else p.absent_recall
        for (_, ap, _), (n_pos, n_neg) in zip(sums.tolist(), totals):
            values.append(ap / n_pos if n_pos else float(ap_column(_no_positives(n_neg, device), p.name, absent)))
    values = torch.tensor(values, dtype=torch.float64, device=device)
    if micro or p.task == "binary":
        return values[0]
    pos = torch.tensor([a for a, _ in totals], dtype=torch.int64, device=device)
    return _curve.reduce(values, average, pos, p.name)


def _distinct(ctx: comm.Ctx, r: sort.Range) -> int:
    n = torch.tensor([r.keys.shape[0]], device=ctx.comm)
    dist.all_reduce(n, group=ctx.group)
    return int(n)


def partial_auroc(ctx: comm.Ctx, r: sort.Range, max_fpr: float, device) -> torch.Tensor:
    """McClish's standardized partial AUROC (`auroc._partial`) without the global curve: the ROC points of each
    range (decreasing thresholds) up to ``fpr <= max_fpr``, their trapezoids, the segments that join a range to
    the previous one in curve order (its last point, from one ``all_gather`` of every range's ends) and the
    segment cut at ``max_fpr``, summed by one ``all_reduce``. Data with positives, negatives and more than two
    distinct scores (else the global curve is tiny: the metric's own finalize reads it)."""
    n_pos, n_neg = (int(v) for v in r.total)
    pos_below, neg_below = _below(r)
    x = _curve.divide(n_neg - neg_below, n_neg).flip(0)  # fpr, tpr in curve order
    y = _curve.divide(n_pos - pos_below, n_pos).flip(0)
    ends = torch.zeros(5, dtype=torch.float64, device=x.device)  # (has points, first x, first y, last x, last y)
    if x.numel():
        ends = torch.stack([torch.ones((), dtype=torch.float64, device=x.device), x[0], y[0], x[-1], y[-1]])
    every = comm.gather_rows(ctx, ends[None])
    # the point before this range on the curve: the last point of the nearest higher rank's range, else (0, 0)
    before = next((e for e in every[ctx.rank + 1:] if e[0] > 0), torch.zeros(5, dtype=torch.float64, device=x.device))
    xs, ys = torch.cat([before[3:4], x]), torch.cat([before[4:5], y])
    inside = int((xs <= max_fpr).sum())  # a prefix: fpr grows along the curve
    k = max(inside, 1)
    twice = ((xs[1:k] - xs[:k - 1]) * (ys[1:k] + ys[:k - 1])).sum()
    if 0 < inside < xs.shape[0]:  # the curve crosses max_fpr inside this range (or at its first point)
        w = (max_fpr - xs[inside - 1]) / (xs[inside] - xs[inside - 1])
        cut = torch.lerp(ys[inside - 1], ys[inside], w)
        twice = twice + (max_fpr - xs[inside - 1]) * (ys[inside - 1] + cut)
    twice = twice.reshape(1)
    dist.all_reduce(twice, group=ctx.group)
    if max_fpr == 1:  # the whole area (`auroc.column_auroc`)
        return (twice[0] / 2).to(device)
    low = 0.5 * max_fpr ** 2
    return (0.5 * (1 + (twice[0] / 2 - low) / (max_fpr - low))).to(device)


def _no_positives(n_neg: int, device) -> _curve.Counts:
    """The counts of a column without positives (its AP and warning depend on nothing else)."""
    pts = [n_neg] if n_neg else []
    z = torch.tensor(pts, dtype=torch.int64, device=device)
    return _curve.Counts(z, torch.zeros_like(z), torch.full(z.shape, 0.5, device=device),
                         torch.tensor(0, device=device), torch.tensor(n_neg, device=device), True)


def _pr_pick(best_recall: bool):
    """`fixed_point._on_pr`'s choice among a range's points: the lexicographic maximum of (value, limit,
    threshold) where ``limit >= floor`` and the value is defined; the global choice is that of the ranges'."""
    def make(floor: float, absent: float):
        def pick(fps, tps, pos, neg, thr):
            precision = _curve.divide(tps, tps + fps)
            recall = _curve.divide(tps, pos) if pos else torch.full_like(precision, absent)
            value, limit = (recall, precision) if best_recall else (precision, recall)
            i = _lexmax([value, limit, thr.double()], (limit >= floor) & ~torch.isnan(value))
            return None if i is None else int(i)
        return pick
    return make


def _roc_pick(best_sensitivity: bool):
    """`fixed_point._on_roc`'s choice among a range's points (decreasing thresholds): the first maximum of the
    value where ``limit >= floor``; the global first maximum is among the ranges' (the leading (0, 0) point
    is added by the metric's own finalize)."""
    def make(floor: float, absent: float):
        def pick(fps, tps, pos, neg, thr):
            fpr, tpr = _curve.divide(fps, neg), _curve.divide(tps, pos)
            value, limit = (tpr, 1 - fpr) if best_sensitivity else (1 - fpr, tpr)
            ok = torch.nonzero(limit >= floor).reshape(-1)
            return int(ok[torch.argmax(value[ok])]) if ok.numel() else None
        return pick
    return make


# the fixed-point metrics: per column only each range's candidate point crosses the network (O(world) points)
FIXED = {"recall_at_fixed_precision": _pr_pick(True), "precision_at_fixed_recall": _pr_pick(False),
         "sensitivity_at_specificity": _roc_pick(True), "specificity_at_sensitivity": _roc_pick(False)}
FLOOR = {"recall_at_fixed_precision": "min_precision", "precision_at_fixed_recall": "min_recall",
         "sensitivity_at_specificity": "min_specificity", "specificity_at_sensitivity": "min_sensitivity"}


class Global(Prepared):
    """The shared step of a curve family over every rank's rows: the global per-column `_curve.Counts`
    (`curves`) for the metric's own ``finish``; the rows themselves are never joined."""

    def __init__(self, spec, base):
        super().__init__(spec, base)
        self._global: list = []
        self._micro = None

    def curves(self, ctx: comm.Ctx, ranges: list, dtype: torch.dtype, micro: bool, pick=None) -> None:
        """The global counts of every column (``pick``: only each range's candidate point, `FIXED`); some rank
        kept an entry (`Prepared.empty` reads the codes)."""
        device = self.state.invalid.count.device
        self.state = self.state._replace(labels=(torch.zeros(1, dtype=torch.int8, device=device),))
        out = []
        for r in ranges:
            n_pos, n_neg = r.total
            pos_below, neg_below = _below(r)
            points, thr = torch.stack([n_neg - neg_below, n_pos - pos_below], 1), r.keys.to(dtype)  # ascending
            if pick is not None:  # chosen in the curve's order: decreasing thresholds
                i = pick(*points.flip(0).unbind(1), int(n_pos), int(n_neg), thr.flip(0))
                keep = slice(0, 0) if i is None else slice(thr.shape[0] - 1 - i, thr.shape[0] - i)
                points, thr = points[keep], thr[keep]
            points, thr = comm.gather_rows(ctx, points).flip(0), comm.gather_rows(ctx, thr).flip(0)
            out.append(_curve.Counts(points[:, 0].to(device), points[:, 1].to(device), thr.to(device),
                                     n_pos.to(device), n_neg.to(device), True))
        if micro:
            self._micro = out[0]
        self._global = out

    def counts(self) -> list:
        return self._global

    def pooled(self) -> _curve.Counts:
        return self._micro

    def sorted(self, column):
        raise NotImplementedError("the sharded shared step has no joined rows")  # AUROC takes `scalar`
