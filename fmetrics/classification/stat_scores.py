"""Stat scores: per-class true/false positive/negative counts, the state of the counting family.

`counts_metric` builds every stat-score metric (accuracy, precision, recall,
F-beta, specificity, NPV, Jaccard, Hamming, stat scores): one state per
configuration, so metrics over equal configurations have equal state keys and
a `fmetrics.collection` of them runs a single update per batch. ``average``
and ``zero_division`` only change ``finalize`` and are not in the key.

Counting (no host sync):

* binary / multilabel -- a prediction is positive when its probability
  (``sigmoid`` first if the batch holds logits) exceeds ``threshold``; integer
  predictions are used as they are.
* multiclass -- ``argmax`` over the class axis; with ``top_k > 1`` the
  prediction is the target if it is among the top ``k`` scores, else the top
  score (torchmetrics' definition). Counts come from one ``scatter_add``;
  ``tp, fp, tn, fn`` are derived in ``finalize``.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.classification import _format
from fmetrics.classification._reduce import Counts, check_average
from fmetrics.classification._reduce import average as reduce_average
from fmetrics.metric import Metric
from fmetrics.state import accum_dtype, cat_chunks, merge_fields
from fmetrics.recipe import factory

__all__ = [
    "binary_stat_scores",
    "multiclass_stat_scores",
    "multilabel_stat_scores",
    "stat_scores",
]


class StatScoresState(NamedTuple):
    # int64 raw counts: multiclass (3C + 1,) [targets | predictions | hits per class | entries];
    # binary / multilabel (4, L) rows [targets, predicted positives, true positives, entries] per label;
    # samplewise: a tuple of chunks with a leading sample axis
    counts: object
    invalid: torch.Tensor  # int64 (3,): dropped entries per rule of _format.RULES


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
    tgt = target.bool()  # dropped entries already hold 0
    return torch.stack([tgt.sum(dims), pos.sum(dims), (pos & tgt).sum(dims), keep.sum(dims)], dim=-2)


def _multiclass_counts(labels, target, keep, num_classes: int, samplewise: bool) -> torch.Tensor:
    """``labels, target, keep``: ``(N, M)`` -> raw int64 ``[tt (C) | pp (C) | tp (C) | n]``: ``(3C + 1,)``
    or ``(N, 3C + 1)``, from one ``scatter_add``."""
    c = num_classes
    hit = keep & (labels == target)
    index = torch.cat([target, labels + c, target + 2 * c, torch.full_like(target, 3 * c)], dim=1)
    src = torch.cat([keep, keep, hit, keep], dim=1).long()
    if samplewise:
        bins = torch.zeros(labels.shape[0], 3 * c + 1, dtype=torch.int64, device=labels.device)
        return bins.scatter_add(1, index, src)
    bins = torch.zeros(3 * c + 1, dtype=torch.int64, device=labels.device)
    return bins.scatter_add(0, index.reshape(-1), src.reshape(-1))


def _counts_from_raw(raw: torch.Tensor, task: str, num: int) -> Counts:
    """Raw state counts -> `Counts` ``tp, fp, tn, fn`` with the class axis last."""
    if task == "multiclass":
        tt, pp, tp = raw[..., :3 * num].unflatten(-1, (3, num)).unbind(-2)
        n = raw[..., 3 * num:]
    else:
        tt, pp, tp, n = raw.unbind(-2)
    return Counts(tp, pp - tp, n - pp - tt + tp, tt - tp)


def counts_metric(
    name: str,
    task: str,
    num: int,
    finalize_counts: Callable[[Counts], object],
    *,
    threshold: float = 0.5,
    top_k: int = 1,
    multidim_average: str = "global",
    ignore_index: Optional[int] = None,
    validate_args: bool = True,
) -> Metric:
    """A `Metric` over the stat-scores state; ``finalize_counts`` maps int64 `Counts` to the value.

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

    width = (3 * num + 1,) if task == "multiclass" else (4, num)

    def init():
        counts = () if samplewise else torch.zeros(width, dtype=torch.int64)
        return StatScoresState(counts, torch.zeros(3, dtype=torch.int64))

    def update(state, preds, target):
        if task == "multiclass":
            f = _format.multiclass_inputs(name, preds, target, num, ignore_index, samplewise, validate, top_k)
            counts = _multiclass_counts(f.preds, f.target, f.keep, num, samplewise)
        else:
            if task == "binary":
                f = _format.binary_inputs(name, preds, target, ignore_index, samplewise, validate)
                f = f._replace(preds=f.preds.unsqueeze(1), target=f.target.unsqueeze(1), keep=f.keep.unsqueeze(1))
            else:
                f = _format.multilabel_inputs(name, preds, target, num, ignore_index, samplewise, validate)
            counts = binary_counts(positive(f.preds, threshold), f.target, f.keep, samplewise)
        total = state.counts + (counts,) if samplewise else state.counts + counts
        return StatScoresState(total, state.invalid + f.invalid)

    def finalize(state):
        _format.report(name, state.invalid)
        counts = state.counts
        if samplewise:
            counts = cat_chunks(counts, torch.zeros(0, *width, dtype=torch.int64, device=state.invalid.device))
        return finalize_counts(_counts_from_raw(counts, task, num))

    tags = StatScoresState(counts="cat" if samplewise else "sum", invalid="sum")
    key = ("stat_scores", task, num, threshold, top_k, "samplewise" if samplewise else "global", ignore_index,
           validate)
    return Metric(init=init, update=update, merge=merge_fields(tags), finalize=finalize, name=name,
                  state_key=key, reductions=tags)


def scored_metric(name: str, task: str, num: int, score: Callable[[Counts], torch.Tensor], average,
                  *, support_rule: bool = False, drop_class: Optional[int] = None, **config) -> Metric:
    """A stat-score metric whose value is ``score`` averaged per `fmetrics.classification._reduce.average`.

    ``average`` is ignored (``"binary"``) for the binary task; ``drop_class`` zeroes one class's counts
    before averaging; ``config`` goes to `counts_metric`.
    """
    how = "binary" if task == "binary" else check_average(name, average)
    multilabel = task == "multilabel"

    def value(counts: Counts):
        dtype = accum_dtype(counts.tp.device)
        counts = Counts(*(x.to(dtype) for x in counts))
        if drop_class is not None:
            keep = torch.arange(num, device=counts.tp.device) != drop_class
            counts = Counts(*(x * keep for x in counts))
        return reduce_average(counts, score, how, multilabel=multilabel, support_rule=support_rule)

    return counts_metric(name, task, num, value, **config)


def task_dispatch(name: str, task, num_classes, num_labels, binary: Optional[Callable[[], Metric]],
                  multiclass: Optional[Callable[[int], Metric]], multilabel: Optional[Callable[[int], Metric]]
                  ) -> Metric:
    """The task facades: picks the factory for ``task`` and checks its required size argument."""
    tasks = tuple(t for t, f in (("binary", binary), ("multiclass", multiclass), ("multilabel", multilabel)) if f)
    task = validation.check_policy(name, "task", task, tasks)
    if task == "binary":
        return binary()
    if task == "multiclass":
        if num_classes is None:
            raise validation.fail(name, "num_classes", "an integer >= 2 for task='multiclass'", "None")
        return multiclass(num_classes)
    if num_labels is None:
        raise validation.fail(name, "num_labels", "an integer >= 2 for task='multilabel'", "None")
    return multilabel(num_labels)


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


@factory
def binary_stat_scores(*, threshold: float = 0.5, multidim_average: str = "global",
                       ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """``[tp, fp, tn, fn, support]`` (int64 ``(5,)``, or ``(N, 5)`` samplewise) of binary predictions.

    Example::

        >>> fmetrics.binary_stat_scores()(torch.tensor([0.7, 0.2, 0.9]), torch.tensor([1, 1, 0]))
        tensor([1, 1, 0, 1, 2])
    """
    return counts_metric("binary_stat_scores", "binary", 1, _stat_scores_value("binary"),
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
def multiclass_stat_scores(*, num_classes: int, average: Optional[str] = "macro", top_k: int = 1,
                           multidim_average: str = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-class ``[tp, fp, tn, fn, support]``: ``(C, 5)`` for ``average="none"``, summed (micro),
    averaged (macro) or support-weighted (weighted) to ``(5,)``; a leading ``N`` axis samplewise.

    Example::

        >>> fmetrics.multiclass_stat_scores(3, average="micro")(torch.tensor([2, 1, 0]), torch.tensor([2, 0, 0]))
        tensor([2, 1, 5, 1, 3])
    """
    name = "multiclass_stat_scores"
    return counts_metric(name, "multiclass", num_classes, _stat_scores_value(check_average(name, average)),
                         top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
def multilabel_stat_scores(*, num_labels: int, threshold: float = 0.5, average: Optional[str] = "macro",
                           multidim_average: str = "global", ignore_index: Optional[int] = None,
                           validate_args: bool = True) -> Metric:
    """Per-label ``[tp, fp, tn, fn, support]``, reduced over labels like `multiclass_stat_scores`.

    Example::

        >>> m = fmetrics.multilabel_stat_scores(3, average="micro")
        >>> m(torch.tensor([[0, 0, 1], [1, 0, 1]]), torch.tensor([[0, 1, 0], [1, 0, 1]]))
        tensor([2, 1, 2, 1, 3])
    """
    name = "multilabel_stat_scores"
    return counts_metric(name, "multilabel", num_labels, _stat_scores_value(check_average(name, average)),
                         threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index,
                         validate_args=validate_args)


@factory
def stat_scores(*, task: str, threshold: float = 0.5, num_classes: Optional[int] = None,
                num_labels: Optional[int] = None, average: Optional[str] = "micro",
                multidim_average: str = "global", top_k: int = 1, ignore_index: Optional[int] = None,
                validate_args: bool = True) -> Metric:
    """Task facade (``"binary" | "multiclass" | "multilabel"``) over the ``*_stat_scores`` factories."""
    return task_dispatch(
        "stat_scores", task, num_classes, num_labels,
        lambda: binary_stat_scores(threshold=threshold, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
        lambda n: multiclass_stat_scores(num_classes=n, average=average, top_k=top_k, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
        lambda n: multilabel_stat_scores(num_labels=n, threshold=threshold, average=average, multidim_average=multidim_average, ignore_index=ignore_index, validate_args=validate_args),
    )

