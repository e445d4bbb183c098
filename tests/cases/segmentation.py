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


def make_blobs(seed: int, n: int = 12, num_classes: int = 3, size: int = 16, block: int = 4, one_hot: bool = False):
    """Class maps of blocks (every class in every sample, both sides) with shifted, noisy predictions."""
    g = torch.Generator().manual_seed(seed)
    k = size // block
    coarse = torch.randint(0, num_classes, (n, k, k), generator=g)
    coarse[:, 0, :num_classes] = torch.arange(num_classes)
    target = coarse.repeat_interleave(block, 1).repeat_interleave(block, 2)
    preds = torch.roll(target, shifts=(int(torch.randint(-1, 2, (1,), generator=g)), 1), dims=(1, 2))
    noise = torch.rand(n, size, size, generator=g) < 0.05
    preds = torch.where(noise, torch.randint(0, num_classes, (n, size, size), generator=g), preds)
    preds[:, :1, :num_classes] = torch.arange(num_classes)  # every class predicted somewhere
    if one_hot:
        preds = torch.nn.functional.one_hot(preds, num_classes).movedim(-1, 1)
        target = torch.nn.functional.one_hot(target, num_classes).movedim(-1, 1)
    return preds, target


def _blob_batches(seed, **kw):
    preds, target = make_blobs(seed, **kw)
    g = torch.Generator().manual_seed(seed)
    edges = [0, *random_splits(preds.shape[0], 4, g), preds.shape[0]]
    return [(preds[a:b], target[a:b]) for a, b in zip(edges[:-1], edges[1:])]


def _dice_case(id, kwargs, one_hot=False):
    return Case(id, fs.dice_score, kwargs, lambda s: _batches(s, one_hot=one_hot),
                reference=tm_reference("DiceScore", **kwargs),
                check={"reference_rtol": 1e-5, "reference_atol": 1e-6, "rtol": 1e-9, "atol": 1e-12},
                integer_state=kwargs.get("aggregation_level") == "global")


def _hd_case(id, kwargs, one_hot=False):
    return Case(id, fs.hausdorff_distance, kwargs, lambda s: _blob_batches(s, one_hot=one_hot),
                reference=tm_reference("HausdorffDistance", **kwargs),
                check={"reference_rtol": 1e-5, "reference_atol": 1e-6, "rtol": 1e-9, "atol": 1e-12})


CASES += [
    _dice_case("dice-index-macro", {"num_classes": 4, "input_format": "index"}),
    _dice_case("dice-onehot-micro-nobg", {"num_classes": 4, "average": "micro", "include_background": False}, True),
    _dice_case("dice-index-weighted", {"num_classes": 4, "average": "weighted", "input_format": "index"}),
    _dice_case("dice-index-none", {"num_classes": 4, "average": "none", "input_format": "index"}),
    _dice_case("dice-global-macro", {"num_classes": 4, "aggregation_level": "global", "input_format": "index"}),
    _dice_case("dice-global-none-onehot", {"num_classes": 4, "aggregation_level": "global", "average": "none"}, True),
    _dice_case("dice-global-weighted", {"num_classes": 4, "aggregation_level": "global", "average": "weighted",
                                        "input_format": "index"}),
    _hd_case("hausdorff-index", {"num_classes": 3, "input_format": "index"}),
    _hd_case("hausdorff-onehot-bg-taxicab", {"num_classes": 3, "include_background": True,
                                             "distance_metric": "taxicab"}, True),
    _hd_case("hausdorff-chessboard-directed", {"num_classes": 3, "distance_metric": "chessboard", "directed": True,
                                               "input_format": "index"}),
    _hd_case("hausdorff-spacing", {"num_classes": 3, "spacing": [0.5, 2.0], "input_format": "index"}),
]
