"""Segmentation workloads: overlap metrics over 10^7 pixels (10 batches of 4 class maps of 500x500,
10 classes, int64 class indices; 10^6 pixels with --quick) and the Hausdorff distance of 8 masks of
64x64 with 3 classes (1 with --quick; torchmetrics needs ~70 ms a mask). fmetrics' ``init / update* /
finalize`` against torchmetrics' modules (``update* / compute``), both with ``input_format="index"``. ``bytes`` counts one read of both
int64 inputs, for the memory-bandwidth fraction.
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

CLASSES, SIDE, PER_BATCH = 10, 500, 4


def class_maps(n_batches: int, per_batch: int = PER_BATCH, side: int = SIDE, classes: int = CLASSES, seed: int = 0):
    """Blocky class maps with ~20% of the pixels changed in the predictions."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        coarse = torch.randint(0, classes, (per_batch, side // 10, side // 10), generator=g)
        target = coarse.repeat_interleave(10, 1).repeat_interleave(10, 2)
        noise = torch.randint(0, classes, target.shape, generator=g)
        preds = torch.where(torch.rand(target.shape, generator=g) < 0.2, noise, target)
        out.append((preds, target))
    return out


def _n_batches(quick: bool) -> int:
    return 1 if quick else 10


def _pixels(quick: bool) -> int:
    return _n_batches(quick) * PER_BATCH * SIDE * SIDE


def _overlap(name, factory, tm_class, doc, **kwargs):
    @register(f"segmentation/{name}", domain="segmentation", samples=_pixels,
              bytes=lambda quick: 2 * 8 * _pixels(quick), peers=("torchmetrics",), description=doc)
    def build(quick: bool, device="cpu"):
        batches = on_device(class_maps(_n_batches(quick)), device)
        runs = {"fmetrics": fmetrics_run(factory(num_classes=CLASSES, input_format="index", **kwargs), batches)}
        try:
            import torchmetrics.segmentation as tms

            cls = getattr(tms, tm_class)
            runs["torchmetrics"] = torchmetrics_run(lambda: cls(num_classes=CLASSES, input_format="index", **kwargs),
                                                    batches)
        except ImportError:
            pass
        return runs

    return build


_overlap("mean_iou", fmetrics.mean_iou, "MeanIoU", "mean IoU over 10^7 pixels, 10 classes, vs MeanIoU")
_overlap("dice_score", fmetrics.dice_score, "DiceScore",
         "Dice (samplewise, macro) over 10^7 pixels, 10 classes, vs DiceScore")
_overlap("dice_score_global", fmetrics.dice_score, "DiceScore",
         "Dice (global, micro) over 10^7 pixels, 10 classes, vs DiceScore", aggregation_level="global",
         average="micro")
_overlap("generalized_dice_score", fmetrics.generalized_dice_score, "GeneralizedDiceScore",
         "generalized Dice over 10^7 pixels, 10 classes, vs GeneralizedDiceScore (values differ by design "
         "where a class is absent from a sample; here every class is present)")


@register("segmentation/hausdorff_distance", domain="segmentation", samples=lambda quick: 1 if quick else 8,
          peers=("torchmetrics",), tolerance=1e-5)
def hausdorff(quick: bool, device="cpu"):
    """Hausdorff distance (euclidean) of 8 masks of 64x64 with 3 classes (1 with --quick) vs HausdorffDistance."""
    batches = on_device(class_maps(1, per_batch=1 if quick else 8, side=64, classes=3, seed=1), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.hausdorff_distance(num_classes=3, input_format="index"), batches)}
    try:
        import torchmetrics.segmentation as tms

        runs["torchmetrics"] = torchmetrics_run(lambda: tms.HausdorffDistance(num_classes=3, input_format="index"),
                                                batches)
    except ImportError:
        pass
    return runs
