"""Wrapper workloads: bootstrap intervals with 200 replicates over 100 batches of 1024 rows (2 with --quick).

fmetrics' `bootstrap` (one stacked state, vmapped row weights) against
torchmetrics' ``BootStrapper`` (200 deep copies updated in a Python loop) on
the same data: multiclass accuracy (10 classes, a count state), mean squared
error (a sum state) and Pearson's r (Chan-merged moments, weighted in closed
form: the regression family's `weigh_rows`, `fmetrics.regression._moments.weigh_rows`). The draws differ
(different generators), so the values agree only to Monte-Carlo error
(tolerance 0.01). The ``state_bytes``
column is the memory the replicate states hold at the end of the run.
"""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree

import fmetrics
from benchmarks.registry import Measured, on_device, register

ROWS, REPLICATES, CLASSES = 1024, 200, 10
QUANTILES = (0.025, 0.975)


def _batches(quick: bool) -> int:
    return 2 if quick else 100


def _samples(quick: bool) -> int:
    return _batches(quick) * ROWS


def _classification(quick: bool):
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, CLASSES, (_batches(quick), ROWS), generator=g)
    logits = torch.randn(_batches(quick), ROWS, CLASSES, generator=g) + 2.0 * torch.nn.functional.one_hot(
        target, CLASSES)
    return list(zip(logits.softmax(-1).unbind(0), target.unbind(0)))


def _regression(quick: bool):
    g = torch.Generator().manual_seed(1)
    target = torch.randn(_batches(quick), ROWS, generator=g)
    preds = target + 0.5 * torch.randn(_batches(quick), ROWS, generator=g)
    return list(zip(preds.unbind(0), target.unbind(0)))


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def _fmetrics(metric: fmetrics.Metric, batches):
    m = fmetrics.wrappers.bootstrap(metric, num_samples=REPLICATES, quantiles=QUANTILES)

    device = batches[0][0].device if batches[0][0].device.type != "cpu" else None

    def run():
        s = m.init(device)
        for p, t in batches:
            s = m.update(s, p, t)
        return Measured(m.finalize(s), extra={"state_bytes": _nbytes(pytree.tree_leaves(s))})

    return run


def _torchmetrics(make_base, batches):
    from torchmetrics.wrappers import BootStrapper

    device = batches[0][0].device

    def run():
        m = BootStrapper(make_base(), num_bootstraps=REPLICATES, quantile=torch.tensor(QUANTILES)).to(device)
        for p, t in batches:
            m.update(p, t)
        value = m.compute()
        states = [v for copy in m.metrics for v in copy.metric_state.values()]
        return Measured({"mean": value["mean"], "std": value["std"], "quantile": value["quantile"]},
                        extra={"state_bytes": _nbytes(states)})

    return run


@register("wrappers/bootstrap_multiclass_accuracy", domain="wrappers", samples=_samples, peers=("torchmetrics",),
          tolerance=0.01)
def bootstrap_multiclass_accuracy(quick: bool, device="cpu"):
    """bootstrap(multiclass_accuracy(10 classes), 200 replicates) vs BootStrapper(MulticlassAccuracy)"""
    batches = on_device(_classification(quick), device)
    runs = {"fmetrics": _fmetrics(fmetrics.multiclass_accuracy(num_classes=CLASSES), batches)}
    try:
        from torchmetrics.classification import MulticlassAccuracy

        runs["torchmetrics"] = _torchmetrics(lambda: MulticlassAccuracy(num_classes=CLASSES), batches)
    except ImportError:
        pass
    return runs


@register("wrappers/bootstrap_mean_squared_error", domain="wrappers", samples=_samples, peers=("torchmetrics",),
          tolerance=0.01)
def bootstrap_mean_squared_error(quick: bool, device="cpu"):
    """bootstrap(mean_squared_error, 200 replicates) vs BootStrapper(MeanSquaredError)"""
    batches = on_device(_regression(quick), device)
    runs = {"fmetrics": _fmetrics(fmetrics.mean_squared_error(), batches)}
    try:
        from torchmetrics.regression import MeanSquaredError

        runs["torchmetrics"] = _torchmetrics(MeanSquaredError, batches)
    except ImportError:
        pass
    return runs


@register("wrappers/bootstrap_pearson_corrcoef", domain="wrappers", samples=_samples, peers=("torchmetrics",),
          tolerance=0.01)
def bootstrap_pearson_corrcoef(quick: bool, device="cpu"):
    """bootstrap(pearson_corrcoef, 200 replicates): closed-form weighted moments, vs BootStrapper(PearsonCorrCoef)"""
    batches = on_device(_regression(quick), device)
    runs = {"fmetrics": _fmetrics(fmetrics.pearson_corrcoef(), batches)}
    try:
        from torchmetrics.regression import PearsonCorrCoef

        runs["torchmetrics"] = _torchmetrics(PearsonCorrCoef, batches)
    except ImportError:
        pass
    return runs
