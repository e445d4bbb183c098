"""Counting classification workloads, fmetrics vs torchmetrics on the same data, validation on in both.

* multiclass accuracy (macro) and macro F1: 200 batches of 4096 x 100 float32 logits (20 with --quick);
* a five-metric collection (accuracy, precision, recall, F1, specificity) over the same stream: one shared
  update in fmetrics, torchmetrics' ``MetricCollection`` with its compute groups;
* a 100-class confusion matrix of 10^7 (target, prediction) label pairs in 10 batches (10^6 with --quick).
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

C, ROWS = 100, 4096
CM_LABELS, CM_CHUNKS = 10**7, 10


def _batches(quick: bool) -> int:
    return 20 if quick else 200


def _logit_samples(quick: bool) -> int:
    return _batches(quick) * ROWS


def _logit_bytes(quick: bool) -> int:
    return _batches(quick) * ROWS * (C * 4 + 8)  # float32 logits + int64 target, one pass


def _logits(quick: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    n = _batches(quick)
    target = torch.randint(0, C, (n, ROWS), generator=g)
    logits = torch.randn(n, ROWS, C, generator=g)
    logits.scatter_add_(2, target.unsqueeze(-1), torch.full((n, ROWS, 1), 1.5))  # better than chance
    return list(zip(logits.unbind(0), target.unbind(0)))


def _tm(name: str):
    import torchmetrics.classification as tmc

    return getattr(tmc, name)


@register("classification/multiclass_accuracy", domain="classification", samples=_logit_samples,
          bytes=_logit_bytes, peers=("torchmetrics",),
          description="macro accuracy, 100 classes, 200 batches of 4096 logits")
def multiclass_accuracy(quick: bool, device="cpu"):
    batches = on_device(_logits(quick), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.multiclass_accuracy(num_classes=C, average="macro"), batches)}
    try:
        cls = _tm("MulticlassAccuracy")
        runs["torchmetrics"] = torchmetrics_run(lambda: cls(num_classes=C, average="macro"), batches)
    except ImportError:
        pass
    return runs


@register("classification/multiclass_f1_macro", domain="classification", samples=_logit_samples,
          bytes=_logit_bytes, peers=("torchmetrics",),
          description="macro F1, 100 classes, 200 batches of 4096 logits")
def multiclass_f1_macro(quick: bool, device="cpu"):
    batches = on_device(_logits(quick, seed=1), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.multiclass_f1_score(num_classes=C, average="macro"), batches)}
    try:
        cls = _tm("MulticlassF1Score")
        runs["torchmetrics"] = torchmetrics_run(lambda: cls(num_classes=C, average="macro"), batches)
    except ImportError:
        pass
    return runs


_FIVE = {
    "accuracy": ("multiclass_accuracy", "MulticlassAccuracy"),
    "precision": ("multiclass_precision", "MulticlassPrecision"),
    "recall": ("multiclass_recall", "MulticlassRecall"),
    "f1": ("multiclass_f1_score", "MulticlassF1Score"),
    "specificity": ("multiclass_specificity", "MulticlassSpecificity"),
}


@register("classification/stat_scores_collection", domain="classification", samples=_logit_samples,
          bytes=_logit_bytes, peers=("torchmetrics",),
          description="accuracy+precision+recall+F1+specificity (macro), one shared state vs MetricCollection")
def stat_scores_collection(quick: bool, device="cpu"):
    batches = on_device(_logits(quick, seed=2), device)
    col = fmetrics.collection({k: getattr(fmetrics, f)(num_classes=C) for k, (f, _) in _FIVE.items()})
    runs = {"fmetrics": fmetrics_run(col, batches)}
    try:
        from torchmetrics import MetricCollection

        classes = {k: _tm(c) for k, (_, c) in _FIVE.items()}
        runs["torchmetrics"] = torchmetrics_run(
            lambda: MetricCollection({k: cls(num_classes=C) for k, cls in classes.items()}), batches)
    except ImportError:
        pass
    return runs


def _cm_labels(quick: bool) -> int:
    return CM_LABELS // 10 if quick else CM_LABELS


@register("classification/multiclass_confusion_matrix", domain="classification", samples=_cm_labels,
          bytes=lambda quick: 2 * 8 * _cm_labels(quick), peers=("torchmetrics",),
          description="100-class confusion matrix of 10^7 int64 label pairs in 10 batches")
def multiclass_confusion_matrix(quick: bool, device="cpu"):
    g = torch.Generator().manual_seed(3)
    n = _cm_labels(quick)
    target = torch.randint(0, C, (n,), generator=g)
    preds = torch.where(torch.rand(n, generator=g) < 0.6, target, torch.randint(0, C, (n,), generator=g))
    batches = on_device(list(zip(preds.chunk(CM_CHUNKS), target.chunk(CM_CHUNKS))), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.multiclass_confusion_matrix(num_classes=C), batches)}
    try:
        cls = _tm("MulticlassConfusionMatrix")
        runs["torchmetrics"] = torchmetrics_run(lambda: cls(num_classes=C), batches)
    except ImportError:
        pass
    return runs
