"""AUROC: the area under the ROC curve (trapezoidal), with McClish's standardized partial AUC for ``max_fpr``."""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics import validation
from fmetrics.classification._docs import MEANING, documented
from fmetrics.classification.curves import _curve
from fmetrics.classification.curves._scores import ClassAverage, ScoreAverage, Task, Thresholds, check_average, family
from fmetrics.classification.curves.roc import check_task
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["binary_auroc", "multiclass_auroc", "multilabel_auroc", "auroc"]


def _partial(fpr: torch.Tensor, tpr: torch.Tensor, max_fpr: float) -> torch.Tensor:
    """``0.5 * (1 + (A - m) / (M - m))`` with ``A`` the area up to ``max_fpr``, ``M = max_fpr``, ``m = M^2 / 2``."""
    stop = int(torch.searchsorted(fpr, torch.tensor([max_fpr], dtype=fpr.dtype, device=fpr.device), right=True))
    w = (max_fpr - fpr[stop - 1]) / (fpr[stop] - fpr[stop - 1])
    y = torch.lerp(tpr[stop - 1], tpr[stop], w)
    area = _curve.auc(torch.cat([fpr[:stop], fpr.new_tensor([max_fpr])]), torch.cat([tpr[:stop], y.reshape(1)]))
    low = 0.5 * max_fpr ** 2
    return 0.5 * (1 + (area - low) / (max_fpr - low))


def _exact_auroc(p, average: str) -> torch.Tensor:
    """Exact AUROC without building curves: `_curve.exact_auroc` per column, from the shared sort."""
    columns = [p.sorted(k) for k in (["pooled"] if average == "micro" else range(p.num_columns))]
    values, hard = zip(*(_curve.exact_auroc(c, p.name) for c in columns))
    sizes = [c.keys.shape[0] for c in columns]
    p.warn_if_hard(hard=any(sizes) and all(h for n, h in zip(sizes, hard) if n))
    if average == "micro":
        return values[0]
    return _curve.reduce(torch.stack(values), average, torch.stack([_curve.positives(c) for c in columns]), p.name)


def column_auroc(counts, name: str, max_fpr=None) -> torch.Tensor:
    fpr, tpr, _ = _curve.roc(counts, name)
    if max_fpr is None or max_fpr == 1 or not bool(fpr.sum() > 0) or not bool(tpr.sum() > 0):
        return _curve.auc(fpr, tpr)
    return _partial(fpr, tpr, max_fpr)


def multi_auroc(p, average: str) -> torch.Tensor:
    if p.thresholds is None:
        return _exact_auroc(p, average)
    if average == "micro":
        pooled = p.pooled()
        p.warn_if_hard([pooled])
        return column_auroc(pooled, p.name)
    counts = p.counts()
    p.warn_if_hard(counts)
    values = torch.stack([column_auroc(c, p.name) for c in counts])
    return _curve.reduce(values, average, torch.stack([c.pos for c in counts]), p.name)


_MANY = "float64: 0-d, or one value per {} (``({},)``) for ``average='none'`` / ``None``."


@factory
@documented(returns="float64 0-d tensor.", inputs="scores-binary")
def binary_auroc(*, max_fpr: Optional[float] = None, thresholds: Thresholds = None, ignore_index: Optional[int] = None,
                 validate_args: bool = True) -> Metric:
    """Area under the ROC curve, ``P(score_pos > score_neg) + P(tie) / 2`` when exact.

    ``max_fpr`` in (0, 1]: the McClish-standardized partial AUC up to that
    false positive rate (scikit-learn's ``roc_auc_score(max_fpr=...)``).
    Hard 0/1 predictions trigger a warning at ``finalize``. With no positives
    or no negatives the ROC rates are 0 (torchmetrics), so the area is 0.

    Example::

        >>> fmetrics.binary_auroc()(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.7500, dtype=torch.float64)
    """
    name = "binary_auroc"
    if max_fpr is not None and (isinstance(max_fpr, bool) or not isinstance(max_fpr, (int, float))
                                or not 0 < max_fpr <= 1):
        raise validation.fail(name, "max_fpr", "None or a float in (0, 1]", repr(max_fpr))
    fam = family(name, "binary", 1, thresholds, ignore_index, validate_args)

    def finalize(p):
        if max_fpr is None:
            return multi_auroc(p, "micro")
        counts = p.counts()
        p.warn_if_hard(counts)
        return column_auroc(counts[0], name, None if max_fpr is None else float(max_fpr))

    return fam.metric(finalize)


@factory
@documented(returns=_MANY.format("class", "C"), inputs="scores-multiclass", average=MEANING["score_average"])
def multiclass_auroc(*, num_classes: int, average: ClassAverage = "macro", thresholds: Thresholds = None,
                     ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """One-vs-rest AUROC per class, reduced by ``average`` (``"macro"``, ``"weighted"`` by support, ``"none"``).

    A class absent from target scores 0 (torchmetrics) and counts in the macro mean.

    Example::

        >>> preds = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.2, 0.3, 0.5], [0.5, 0.4, 0.1]])
        >>> fmetrics.multiclass_auroc(num_classes=3)(preds, torch.tensor([0, 2, 2, 1]))  # sklearn roc_auc_score(multi_class="ovr")
        tensor(0.8889, dtype=torch.float64)
        >>> fmetrics.multiclass_auroc(num_classes=3, average=None)(preds, torch.tensor([0, 2, 2, 1]))
        tensor([1.0000, 0.6667, 1.0000], dtype=torch.float64)
    """
    fam = family("multiclass_auroc", "multiclass", num_classes, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("macro", "weighted", "none"))
    return fam.metric(lambda p: multi_auroc(p, average))


@factory
@documented(returns=_MANY.format("label", "L"), inputs="scores-multilabel", average=MEANING["score_average"])
def multilabel_auroc(*, num_labels: int, average: ScoreAverage = "macro", thresholds: Thresholds = None,
                     ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """AUROC per label, reduced by ``average`` (``"micro"`` pools every label's pairs).

    Example::

        >>> preds = torch.tensor([[0.9, 0.2, 0.6], [0.3, 0.8, 0.4], [0.7, 0.4, 0.1], [0.2, 0.6, 0.8]])
        >>> target = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 0, 0], [0, 1, 0]])
        >>> fmetrics.multilabel_auroc(num_labels=3)(preds, target)  # scikit-learn's roc_auc_score(target, preds)
        tensor(0.8333, dtype=torch.float64)
        >>> fmetrics.multilabel_auroc(num_labels=3, average="micro")(preds, target)
        tensor(0.8611, dtype=torch.float64)
    """
    fam = family("multilabel_auroc", "multilabel", num_labels, thresholds, ignore_index, validate_args)
    average = check_average(fam.name, average, ("micro", "macro", "weighted", "none"))
    return fam.metric(lambda p: multi_auroc(p, average))


@factory
@documented(returns="that of the task's factory.", inputs="facade",
            average=MEANING["score_average"] + " Multiclass and multilabel.", max_fpr=MEANING["max_fpr"] + " Binary only.")
def auroc(*, task: Task, thresholds: Thresholds = None, num_classes: Optional[int] = None,
          num_labels: Optional[int] = None, average: ScoreAverage = "macro", max_fpr: Optional[float] = None,
          ignore_index: Optional[int] = None, validate_args: bool = True) -> Metric:
    """Task facade for AUROC.

    Example::

        >>> m = fmetrics.auroc(task="binary", max_fpr=0.5)  # scikit-learn's roc_auc_score(max_fpr=0.5)
        >>> m(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]))
        tensor(0.6667, dtype=torch.float64)
    """
    task = check_task("auroc", task)
    if task == "binary":
        return binary_auroc(max_fpr=max_fpr, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    if task == "multiclass":
        return multiclass_auroc(num_classes=num_classes, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
    return multilabel_auroc(num_labels=num_labels, average=average, thresholds=thresholds, ignore_index=ignore_index, validate_args=validate_args)
