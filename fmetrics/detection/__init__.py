"""Object detection: COCO mean average precision (pure torch) and the box IoU family.

Inputs follow torchmetrics: lists (one entry per image) of dicts with
``boxes``, ``scores``, ``labels`` (and ``masks``, ``iscrowd``, ``area``).
Semantics and the differences from pycocotools / torchmetrics: docs/detection.md.
"""
from fmetrics.detection.mean_ap import mean_average_precision

__all__ = [
    "mean_average_precision",
]
