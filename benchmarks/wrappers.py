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


# ------------------------------------------------------------------ feature_share

class _ConvFeatures(torch.nn.Module):
    """A small conv feature network (3 x 64 x 64 uint8 images -> 64 features), built offline from a seed."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, stride=2), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3, stride=2),
            torch.nn.ReLU(), torch.nn.Conv2d(64, 64, 3, stride=2), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.num_features = 64

    def forward(self, x):
        return self.body(x.float() / 255)


def _image_batches(quick: bool, device):
    g = torch.Generator().manual_seed(2)
    n = 2 if quick else 20
    return [(torch.randint(0, 256, (32, 3, 64, 64), generator=g, dtype=torch.uint8).to(device), i % 2 == 0)
            for i in range(n)]


@register("wrappers/feature_share_fid_mifid", domain="wrappers", samples=lambda quick: (2 if quick else 20) * 32,
          peers=("torchmetrics",), tolerance=1e-3)
def feature_share_fid_mifid(quick: bool, device="cpu"):
    """feature_share({FID, MiFID}) over one conv network (one forward pass per batch) vs FeatureShare"""
    batches = _image_batches(quick, device)
    net = _ConvFeatures().to(device)
    m = fmetrics.wrappers.feature_share({
        "fid": fmetrics.frechet_inception_distance(feature=net),
        "mifid": fmetrics.memorization_informed_frechet_inception_distance(feature=net)})

    def ours():
        s = m.init(device if device != "cpu" else None)
        for x, real in batches:
            s = m.update(s, x, real)
        return m.finalize(s)

    runs = {"fmetrics": ours}
    try:
        from torchmetrics.image.fid import FrechetInceptionDistance
        from torchmetrics.image.mifid import MemorizationInformedFrechetInceptionDistance
        from torchmetrics.wrappers import FeatureShare

        def theirs():
            fs = FeatureShare({"fid": FrechetInceptionDistance(feature=net),
                               "mifid": MemorizationInformedFrechetInceptionDistance(feature=net)}).to(device)
            for x, real in batches:
                fs.update(x, real=real)
            return fs.compute()

        runs["torchmetrics"] = theirs
    except ImportError:
        pass
    return runs
