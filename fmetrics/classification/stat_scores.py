"""Stat scores: per-class true/false positive/negative counts, the state of the counting family.

`stat_scores_family` declares the one state every stat-score metric reads
(accuracy, precision, recall, F-beta, specificity, NPV, Jaccard, Hamming,
stat scores, the binary / multilabel confusion matrices) as a
`fmetrics.Family`; each factory is a member with its own finalizer
(`scored` builds the averaged ones). Members over one configuration have
equal state keys, so a `fmetrics.collection` of them runs a single update per
batch and turns the raw counts into ``tp, fp, tn, fn`` once (the family's
shared step). ``average`` and ``zero_division`` only change the finalizer and
are not in the key.

Counting (no host sync):

* binary / multilabel -- a prediction is positive when its probability
  (``sigmoid`` first if the batch holds logits) exceeds ``threshold``; integer
  predictions are used as they are.
* multiclass -- ``argmax`` over the class axis; with ``top_k > 1`` the
  prediction is the target if it is among the top ``k`` scores, else the top
  score (torchmetrics' definition). Counts come from one ``scatter_add``, or,
  when every entry counts, from ``bincount`` (top-1 scores on the eager CPU
  path: one pass of `fmetrics._native`'s fused row kernel, or numpy's row
  ``argmax`` then ``bincount``, `_format.top1_counts`); ``tp, fp, tn, fn`` are
  derived in ``finalize``.

Validation: on CPU in eager mode the family's ``check`` raises at once on a
bad value (the state is untouched) and ``update`` then counts without masks;
elsewhere ``update`` leaves offending entries out, records them in the
``invalid`` field and ``finalize`` raises naming the first one.
"""
from __future__ import annotations

from typing import Callable, Literal, NamedTuple, Optional

import numpy as np
import torch

from fmetrics import validation
from fmetrics.classification import _empty, _format
from fmetrics.classification._docs import documented
from fmetrics.classification._reduce import Counts, check_average
from fmetrics.classification._reduce import average as reduce_average
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks, host_plus
from fmetrics.recipe import factory

__all__ = [
    "binary_stat_scores",
    "multiclass_stat_scores",
    "multilabel_stat_scores",
    "stat_scores",
]

Task = Literal["binary", "multiclass", "multilabel"]
Average = Literal["micro", "macro", "weighted", "none"]
MultidimAverage = Literal["global", "samplewise"]


class StatScoresState(NamedTuple):
    # int64 raw counts: multiclass (3C,) [targets | predictions | hits per class] (entries = sum of targets);
    # binary / multilabel (4, L) rows [targets, predicted positives, true positives, entries] per label;
    # samplewise: a tuple of chunks with a leading sample axis
    counts: object
    invalid: validation.Invalid  # deferred record of entries that broke the value rule


def _check_top_k(name: str, top_k, num_classes: int) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= num_classes:
        raise validation.fail(name, "top_k", f"an integer in [1, num_classes={num_classes}]", repr(top_k))
    return top_k


def positive(preds: torch.Tensor, threshold: float) -> torch.Tensor:
    if preds.is_floating_point():
        return _format.sigmoid_if_logits(preds) > threshold
    return preds == 1


def binary_counts(pos, target, keep, samplewise: bool) -> torch.Tensor:
    """``pos, target, keep``: ``(N, L, M)`` -> raw int64 ``[tt, pp, tp, n]`` per label: ``(4, L)`` or
    ``(N, 4, L)`` (targets, predicted positives, true positives, entries counted)."""
    dims = (2,) if samplewise else (0, 2)
    pos = pos & keep
    tgt = target.bool()  # left-out entries already hold 0
    return torch.stack([tgt.sum(dims), pos.sum(dims), (pos & tgt).sum(dims), keep.sum(dims)], dim=-2)


def _multiclass_counts(labels, target, keep, num_classes: int, samplewise: bool, complete: bool = False):
    """``labels, target, keep``: ``(N, M)`` -> raw int64 ``[tt (C) | pp (C) | tp (C)]``: ``(3C,)`` or
    ``(N, 3C)``, from one ``scatter_add`` (the kept count is ``sum(tt)``). ``complete`` (every entry
    kept, global; labels in ``[0, C)``; ``keep`` unused) skips the index and weight buffers: the row
    sums, column sums and diagonal of the confusion matrix from one ``bincount`` of ``target * C +
    label`` while ``C^2`` is not much above the entries, else three ``bincount``."""
    c = num_classes
    if complete and not samplewise:
        # [:c*c] / [:c]: the state keeps its shape when validate_args=False lets a target >= C through
        target, labels = target.reshape(-1), labels.reshape(-1)
        if c * c <= 4 * target.numel() + 4096:  # one bincount of C^2 pairs beats three of C bins
            pairs = torch.bincount(target * c + labels, minlength=c * c)[:c * c].view(c, c)
            return torch.cat([pairs.sum(1), pairs.sum(0), pairs.diagonal()])
        hit = torch.where(labels == target, target, c)  # tp: the target where the label hits, else bin c
        return torch.cat([torch.bincount(x, minlength=c)[:c] for x in (target, labels, hit)])
    index = torch.cat([target, labels + c, target + 2 * c], dim=1)
    src = torch.cat([keep, keep, keep & (labels == target)], dim=1).long()
    if samplewise:
        bins = torch.zeros(labels.shape[0], 3 * c, dtype=torch.int64, device=labels.device)
        return bins.scatter_add(1, index, src)
    bins = torch.zeros(3 * c, dtype=torch.int64, device=labels.device)
    return bins.scatter_add(0, index.reshape(-1), src.reshape(-1))


def _host_add(state: StatScoresState, counts: np.ndarray) -> StatScoresState:
    """``state`` plus the ``counts`` of one eagerly checked CPU batch (the update counter too), in numpy:
    a torch op costs ~10 µs once an update's pass over the scores has evicted the caches."""
    return StatScoresState(torch.from_numpy(state.counts.numpy() + counts),
                           state.invalid._replace(calls=host_plus(state.invalid.calls, 1)))


def _counts_from_raw(raw: torch.Tensor, task: str, num: int) -> Counts:
    """Raw state counts -> `Counts` ``tp, fp, tn, fn`` with the class axis last."""
    if task == "multiclass":
        tt, pp, tp = raw.unflatten(-1, (3, num)).unbind(-2)
        n = tt.sum(-1, keepdim=True)
    else:
        tt, pp, tp, n = raw.unbind(-2)
    return Counts(tp, pp - tp, n - pp - tt + tp, tt - tp)


def counting(validate: bool, inputs: tuple) -> bool:
    """Whether ``update`` must leave out and record bad values itself (deferred validation).

    Not when the metric's eager check has run on these inputs (it raised on any bad value), nor
    without ``validate_args``.
    """
    return validate and not validation.eager_check_applies(inputs, {})


def value_rule(validate: bool, inputs: tuple) -> tuple:
    """``(count, raise_nan)`` for an update whose eager check leaves NaN multiclass scores to it.

    ``count``: see `counting`. ``raise_nan``: the eager check ran (CPU, eager), so the update
    raises on NaN score rows itself (`_format.multiclass_inputs`); never while tracing, where the
    deferred count takes over (a forced ``validation.mode("eager")`` under compile or vmap).
    """
    count = counting(validate, inputs)
    if validate and not count and validation.traced():
        return True, False
    return count, validate and not count


def stat_scores_family(name: str, task: str, num: int, *, threshold: float = 0.5, top_k: int = 1,
                       multidim_average: str = "global", ignore_index: Optional[int] = None,
                       validate_args: bool = True) -> Family:
    """The stat-scores `Family` of one configuration; its shared step gives int64 `Counts`.

    ``task`` is ``"binary"`` (``num`` 1), ``"multiclass"`` (``num`` classes) or
    ``"multilabel"`` (``num`` labels). The counts have the class axis last,
    after a sample axis when ``multidim_average="samplewise"``.
    """
    if task != "binary":
        num = _format.check_num(name, "num_classes" if task == "multiclass" else "num_labels", num)
    samplewise = _format.check_multidim_average(name, multidim_average) == "samplewise"
    ignore_index = _format.check_ignore_index(name, ignore_index)
    validate = bool(validate_args)
    if task == "multiclass":
        top_k = _check_top_k(name, top_k, num)
        threshold = None
    else:
        threshold = _format.check_threshold(name, threshold)
        top_k = None

    width = (3 * num,) if task == "multiclass" else (4, num)
    plain_top1 = top_k == 1 and not samplewise and ignore_index is None  # `_format.top1_counts` may apply

    def init():
        counts = () if samplewise else torch.zeros(width, dtype=torch.int64)
        return StatScoresState(counts, validation.invalid_init())

    def update(state, preds, target):
        count, raise_nan = value_rule(validate, (preds, target))
        if task == "multiclass":
            host = _format.top1_counts(name, preds, target, num) if raise_nan and plain_top1 else None
            if host is not None:  # checked eagerly: every entry counts, nothing to record
                return _host_add(state, host)
            f = _format.multiclass_inputs(name, preds, target, num, ignore_index, samplewise, count, top_k, raise_nan)
            counts = _multiclass_counts(f.preds, f.target, f.keep, num, samplewise, f.complete)
        else:
            if task == "binary":
                f = _format.binary_inputs(name, preds, target, ignore_index, samplewise, count)
                f = f._replace(preds=f.preds.unsqueeze(1), target=f.target.unsqueeze(1), keep=f.keep.unsqueeze(1))
            else:
                f = _format.multilabel_inputs(name, preds, target, num, ignore_index, samplewise, count)
            counts = binary_counts(positive(f.preds, threshold), f.target, f.keep, samplewise)
        total = state.counts + (counts,) if samplewise else state.counts + counts
        return StatScoresState(total, _format.flag(state.invalid, f))

    tags = StatScoresState(counts="cat" if samplewise else "sum", invalid=None)

    def merge(a, b):
        counts = a.counts + b.counts if not samplewise else tuple(a.counts) + tuple(b.counts)
        return StatScoresState(counts, validation.invalid_merge(a.invalid, b.invalid))

    def counts(state) -> Counts:
        _format.report(name, state.invalid, num if task == "multiclass" else 2)
        raw = state.counts
        if samplewise:
            raw = cat_chunks(raw, torch.zeros(0, *width, dtype=torch.int64, device=state.invalid.count.device))
        return _counts_from_raw(raw, task, num)

    key = (task, num, threshold, top_k, "samplewise" if samplewise else "global", ignore_index, validate)
    return Family(name="stat_scores", key=key, init=init, update=update, reductions=tags, merge=merge,
                  shared=counts, check=_format.checker(name, task, num, ignore_index, nan_in_update=True) if validate else None)


def scored(task: str, num: int, score: Callable[[Counts], torch.Tensor], how: str, *,
           support_rule: bool = False, drop_class: Optional[int] = None) -> Callable[[Counts], torch.Tensor]:
    """The finalizer ``Counts -> value``: float64 ``score`` averaged per `fmetrics.classification._reduce.average`.

    ``how`` is ``"binary"`` for the binary task; ``drop_class`` zeroes one class's counts before averaging.
    """
    multilabel = task == "multilabel"

    def value(counts: Counts):
        dtype = accum_dtype(counts.tp.device)
        counts = Counts(*(x.to(dtype) for x in counts))
        if drop_class is not None:
            keep = torch.arange(num, device=counts.tp.device) != drop_class
            counts = Counts(*(x * keep for x in counts))
        return reduce_average(counts, score, how, multilabel=multilabel, support_rule=support_rule)

    return value


def no_entries(c: Counts) -> bool:
    """Global counts of a stream in which no entry counted (the empty-input rule, `_empty`); never for
    samplewise counts, whose value on no samples is an empty tensor."""
    return c.tp.dim() == 1 and not bool((c.tp + c.fp + c.tn + c.fn).any())


def scored_member(name: str, task: str, num: int, score: Callable[[Counts], torch.Tensor], average, *,
                  higher_is_better: Optional[bool] = True, bounds: tuple = (0.0, 1.0), support_rule: bool = False,
                  drop_class: Optional[int] = None, **config) -> Metric:
    """A member of `stat_scores_family` (``config``) whose value is `scored` ``score``."""
    fam = stat_scores_family(name, task, num, **config)
    how = "binary" if task == "binary" else check_average(name, average)
    finish = scored(task, num, score, how, support_rule=support_rule, drop_class=drop_class)
    return fam.metric(name, _empty.guard(name, no_entries, finish), higher_is_better=higher_is_better, is_differentiable=False, bounds=bounds)


def check_task(name: str, task, num_classes, num_labels, allowed=("binary", "multiclass", "multilabel")) -> str:
    """A task facade's ``task``, checked with the size argument it requires."""
    task = validation.check_policy(name, "task", task, allowed)
    if task == "multiclass" and num_classes is None:
        raise validation.fail(name, "num_classes", "an integer >= 2 for task='multiclass'", "None")
    if task == "multilabel" and num_labels is None:
        raise validation.fail(name, "num_labels", "an integer >= 2 for task='multilabel'", "None")
    return task


# ------------------------------------------------------------------ stat scores themselves


def _stat_scores_value(average: str):
    def value(counts: Counts):
        tp, fp, tn, fn = counts
        res = torch.stack([tp, fp, tn, fn, tp + fn], dim=-1)  # (..., C, 5)
        if average == "binary":
            return res[..., 0, :]
        if average == "micro":
            return res.sum(-2)
        if average == "none":
            return res
        res = res.to(accum_dtype(res.device))
        if average == "macro":
            return res.mean(-2)
        weight = (tp + fn).to(res.dtype)
        total = weight.sum(-1, keepdim=True)
        return (res * (weight / total).unsqueeze(-1)).sum(-2)

    return value


def _stat_member(name, task, num, average, **config) -> Metric:
    fam = stat_scores_family(name, task, num, **config)
    how = "binary" if task == "binary" else check_average(name, average)
    value = _stat_scores_value(how)
    if how == "weighted":  # a support-weighted mean: undefined without samples (counts and their plain means are not)
        value = _empty.guard(name, no_entries, value)
    return fam.metric(name, value, higher_is_better=None, is_differentiable=False,
                      bounds=(0, None))


_STAT_RETURNS = ("int64 ``[tp, fp, tn, fn, support]`` (``support = tp + fn``): ``(5,)``, or ``(C, 5)`` per class "
                 "for ``average='none'``; float64 for ``'macro'`` / ``'weighted'``; a leading ``N`` axis for "
                 "``multidim_average='samplewise'``.")


@factory
@documented(returns="int64 ``[tp, fp, tn, fn, support]``: ``(5,)``, or ``(N, 5)`` samplewise.", inputs="binary")
def binary_stat_scores(*, threshold: float = 0.5, multidim_average: MultidimAverage = "global",
                       ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """True / false positives and negatives of thresholded binary predictions, and the support ``tp + fn``.

    Example::

        >>> fmetrics.binary_stat_scores()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor([1, 1, 0, 1, 2])
    """
    return _stat_member("binary_stat_scores", "binary", 1, None, threshold=threshold,
                        multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns=_STAT_RETURNS, inputs="multiclass")
def multiclass_stat_scores(*, num_classes: int, average: Optional[Average] = "macro", top_k: int = 1,
                           multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-class ``[tp, fp, tn, fn, support]`` (one-vs-rest), summed (micro), averaged (macro) or
    support-weighted (weighted) over classes.

    Example::

        >>> m = fmetrics.multiclass_stat_scores(num_classes=3, average="micro")
        >>> m(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor([2, 1, 5, 1, 3])
    """
    return _stat_member("multiclass_stat_scores", "multiclass", num_classes, average, top_k=top_k,
                        multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns=_STAT_RETURNS.replace("per class", "per label"), inputs="multilabel")
def multilabel_stat_scores(*, num_labels: int, threshold: float = 0.5, average: Optional[Average] = "macro",
                           multidim_average: MultidimAverage = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-label ``[tp, fp, tn, fn, support]``, reduced over labels like `multiclass_stat_scores`.

    Example::

        >>> m = fmetrics.multilabel_stat_scores(num_labels=3, average="micro")
        >>> m(torch.tensor([[0, 0, 1], [1, 0, 1]]), torch.tensor([[0, 1, 0], [1, 0, 1]]))
        tensor([2, 1, 2, 1, 3])
    """
    return _stat_member("multilabel_stat_scores", "multilabel", num_labels, average, threshold=threshold,
                        multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)


@factory
@documented(returns="that of the task's factory.", inputs="facade")
def stat_scores(*, task: Task, threshold: float = 0.5, num_classes: Optional[int] = None,
                num_labels: Optional[int] = None, average: Optional[Average] = "micro",
                multidim_average: MultidimAverage = "global", top_k: int = 1, ignore_index: Optional[int] = None,
                validate_args: bool = True) -> Metric:
    """Task facade over `binary_stat_scores`, `multiclass_stat_scores` and `multilabel_stat_scores`.

    Example::

        >>> fmetrics.stat_scores(task="binary")(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor([1, 1, 0, 1, 2])
    """
    task = check_task("stat_scores", task, num_classes, num_labels)
    common = dict(multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args)
    if task == "binary":
        return binary_stat_scores(threshold=threshold, **common)
    if task == "multiclass":
        return multiclass_stat_scores(num_classes=num_classes, average=average, top_k=top_k, **common)
    return multilabel_stat_scores(num_labels=num_labels, threshold=threshold, average=average, **common)
