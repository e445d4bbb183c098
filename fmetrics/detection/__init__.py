"""Object detection: COCO mean average precision (pure torch), the box IoU family and panoptic quality.

Inputs follow torchmetrics: lists (one entry per image) of dicts with
``boxes``, ``scores``, ``labels`` (and ``masks``, ``iscrowd``, ``area``).
Semantics and the differences from pycocotools / torchmetrics: docs/detection.md.
"""
from fmetrics.detection.iou import (
    complete_intersection_over_union,
    distance_intersection_over_union,
    generalized_intersection_over_union,
    intersection_over_union,
)
from fmetrics.detection.mean_ap import mean_average_precision
from fmetrics.detection.panoptic import modified_panoptic_quality, panoptic_quality

__all__ = [
    "complete_intersection_over_union",
    "distance_intersection_over_union",
    "generalized_intersection_over_union",
    "intersection_over_union",
    "mean_average_precision",
    "modified_panoptic_quality",
    "panoptic_quality",
]
