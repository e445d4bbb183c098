"""Score / curve classification workloads, fmetrics vs torchmetrics on the same data, validation on in both.

* exact binary AUROC on 10^6 and 10^7 float32 scores, fed in 10 batches (one sort in ``finalize``);
* binned binary AUROC with 1000 thresholds over 100 batches of 10^4 scores (a 1000-bucket histogram state).

``--quick`` uses a tenth of the exact AUROC data and 1 of the binned batches.
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

BATCHES = 10
BINNED_BATCHES, BINNED_ROWS, THRESHOLDS = 100, 10**4, 1000
QUICK_BINNED_BATCHES = 1  # torchmetrics takes ~150 ms a batch: three rounds of it fit a quick run's share


def _scores(n: int, batches: int, seed: int = 0):
    """``batches`` pairs of float32 scores (better than chance) and int64 0/1 targets."""
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, 2, (n,), generator=g)
    scores = torch.sigmoid(torch.randn(n, generator=g) + target * 0.8)
    return list(zip(scores.chunk(batches), target.chunk(batches)))


def _runs(metric: fmetrics.Metric, tm_kwargs: dict, batches):
    runs = {"fmetrics": fmetrics_run(metric, batches)}
    try:
        from torchmetrics.classification import BinaryAUROC

        runs["torchmetrics"] = torchmetrics_run(lambda: BinaryAUROC(**tm_kwargs), batches)
    except ImportError:
        pass
    return runs


def _exact(total: int):
    def samples(quick: bool) -> int:
        return total // 10 if quick else total

    def build(quick: bool, device="cpu"):
        return _runs(fmetrics.binary_auroc(), {}, on_device(_scores(samples(quick), BATCHES), device))

    return samples, build


def _register_exact(label: str, total: int):
    samples, build = _exact(total)
    register(f"classification/binary_auroc_exact_{label}", domain="classification", samples=samples,
             bytes=lambda quick: samples(quick) * (4 + 8), peers=("torchmetrics",),
             description=f"exact binary AUROC, {label} float32 scores in {BATCHES} batches")(build)


_register_exact("1e6", 10**6)
_register_exact("1e7", 10**7)


def _binned_samples(quick: bool) -> int:
    return (QUICK_BINNED_BATCHES if quick else BINNED_BATCHES) * BINNED_ROWS


@register("classification/binary_auroc_binned", domain="classification", samples=_binned_samples,
          bytes=lambda quick: _binned_samples(quick) * (4 + 8), peers=("torchmetrics",),
          description="binned binary AUROC, 1000 thresholds, 100 batches of 10^4 scores")
def binary_auroc_binned(quick: bool, device="cpu"):
    batches = on_device(_scores(_binned_samples(quick), QUICK_BINNED_BATCHES if quick else BINNED_BATCHES), device)
    return _runs(fmetrics.binary_auroc(thresholds=THRESHOLDS), {"thresholds": THRESHOLDS}, batches)
