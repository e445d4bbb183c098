"""Law-suite cases for the segmentation metrics; the oracle is torchmetrics' module API."""
from __future__ import annotations

import torch

from fmetrics import segmentation as fs
from tests.cases import Case, random_splits


def make_masks(seed: int, n: int = 24, num_classes: int = 4, size: int = 12, one_hot: bool = False):
    """``(preds, target)`` class maps ``[n, size, size]`` (one-hot ``[n, C, size, size]``); some classes absent."""
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, num_classes, (n, size, size), generator=g)
    target[::5] = torch.where(target[::5] == num_classes - 1, 0, target[::5])  # a class absent in some samples
    noise = torch.randint(0, num_classes, (n, size, size), generator=g)
    preds = torch.where(torch.rand(n, size, size, generator=g) < 0.3, noise, target)
    if one_hot:
        preds = torch.nn.functional.one_hot(preds, num_classes).movedim(-1, 1)
        target = torch.nn.functional.one_hot(target, num_classes).movedim(-1, 1)
    return preds, target


def _batches(seed, **kw):
    preds, target = make_masks(seed, **kw)
    g = torch.Generator().manual_seed(seed)
    edges = [0, *random_splits(preds.shape[0], 4, g), preds.shape[0]]
    return [(preds[a:b], target[a:b]) for a, b in zip(edges[:-1], edges[1:])]


def tm_reference(cls_name, **kwargs):
    def reference(preds, target):
        import torchmetrics.segmentation as tms

        return getattr(tms, cls_name)(**kwargs)(preds, target).double()

    return reference


def gdice_reference(num_classes, include_background=True, per_class=False, weight_type="square",
                    input_format="one-hot"):
    """Generalized Dice from its definition (Sudre et al. 2017), per sample, infinite weights -> sample max."""

    def reference(preds, target):
        if input_format == "index":
            preds = torch.nn.functional.one_hot(preds, num_classes).movedim(-1, 1)
            target = torch.nn.functional.one_hot(target, num_classes).movedim(-1, 1)
        if not include_background:
            preds, target = preds[:, 1:], target[:, 1:]
        scores = []
        for p, t in zip(preds.double(), target.double()):
            p, t = p.reshape(p.shape[0], -1), t.reshape(t.shape[0], -1)
            ts = t.sum(1)
            w = {"square": 1 / ts ** 2, "simple": 1 / ts, "linear": torch.ones_like(ts)}[weight_type]
            finite = w[torch.isfinite(w)]
            w = torch.where(torch.isfinite(w), w, finite.max() if finite.numel() else 0.0)
            num, den = 2 * (p * t).sum(1) * w, (p.sum(1) + ts) * w
            if not per_class:
                num, den = num.sum(), den.sum()
            scores.append(torch.where(den != 0, num / den, 0.0))
        return torch.stack(scores).mean(0)

    return reference


def _case(id, factory, kwargs, cls_name, one_hot=False):
    return Case(id, factory, kwargs, lambda s: _batches(s, one_hot=one_hot),
                reference=tm_reference(cls_name, **kwargs),
                check={"reference_rtol": 1e-5, "reference_atol": 1e-6, "rtol": 1e-9, "atol": 1e-12})


def _gcase(id, kwargs, one_hot=False):
    return Case(id, fs.generalized_dice_score, kwargs, lambda s: _batches(s, one_hot=one_hot),
                reference=gdice_reference(**kwargs),
                check={"reference_rtol": 1e-9, "reference_atol": 1e-12, "rtol": 1e-9, "atol": 1e-12})


CASES = [
    _case("mean-iou-index", fs.mean_iou, {"num_classes": 4, "input_format": "index"}, "MeanIoU"),
    _case("mean-iou-onehot-perclass-nobg", fs.mean_iou, {"num_classes": 4, "per_class": True,
                                                         "include_background": False}, "MeanIoU", one_hot=True),
    _gcase("gdice-index", {"num_classes": 4, "input_format": "index"}),
    _gcase("gdice-onehot-simple-perclass", {"num_classes": 4, "weight_type": "simple", "per_class": True}, True),
    _gcase("gdice-index-linear-nobg", {"num_classes": 4, "weight_type": "linear", "include_background": False,
                                       "input_format": "index"}),
]
