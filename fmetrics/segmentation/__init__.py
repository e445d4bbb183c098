"""Segmentation: overlap of predicted and target masks (mean IoU, Dice, generalized Dice) and the Hausdorff distance.

Semantics and differences from torchmetrics: docs/segmentation.md.
"""
from fmetrics.segmentation.distance import hausdorff_distance
from fmetrics.segmentation.overlap import dice_score, generalized_dice_score, mean_iou

__all__ = ["dice_score", "generalized_dice_score", "hausdorff_distance", "mean_iou"]
