"""Segmentation: overlap of predicted and target masks (mean IoU, generalized Dice).

Semantics and differences from torchmetrics: docs/segmentation.md.
"""
from fmetrics.segmentation.overlap import generalized_dice_score, mean_iou

__all__ = ["generalized_dice_score", "mean_iou"]
