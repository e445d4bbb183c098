"""Box conversions and pairwise box overlaps in plain torch (no torchvision)."""
from __future__ import annotations

import torch

BOX_FORMATS = ("xyxy", "xywh", "cxcywh")


def to_xyxy(boxes: torch.Tensor, fmt: str) -> torch.Tensor:
    """``boxes [..., 4]`` in ``fmt`` as corners, computed in the boxes' dtype (as torchvision's ``box_convert``)."""
    if fmt == "xyxy":
        return boxes
    a, b, c, d = boxes.unbind(-1)
    if fmt == "xywh":
        return torch.stack([a, b, a + c, b + d], -1)
    return torch.stack([a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d], -1)


def to_xywh(boxes: torch.Tensor, fmt: str) -> torch.Tensor:
    """``boxes`` as (x, y, w, h) through corners, as torchvision's ``box_convert`` does."""
    if fmt == "xywh":
        return boxes
    x1, y1, x2, y2 = to_xyxy(boxes, fmt).unbind(-1)
    return torch.stack([x1, y1, x2 - x1, y2 - y1], -1)


def box_area(b: torch.Tensor) -> torch.Tensor:
    return (b[..., 2] - b[..., 0]) * (b[..., 3] - b[..., 1])


def _inter_union(a: torch.Tensor, b: torch.Tensor):
    area_a, area_b = box_area(a), box_area(b)
    lt = torch.maximum(a[:, None, :2], b[None, :, :2])
    rb = torch.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return inter, union


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU matrix ``[N, M]`` of xyxy boxes (torchvision's ``box_iou``)."""
    inter, union = _inter_union(a, b)
    return inter / union


def generalized_box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """GIoU = IoU - (|C| - |A u B|) / |C| with C the smallest enclosing box."""
    inter, union = _inter_union(a, b)
    iou = inter / union
    lt = torch.minimum(a[:, None, :2], b[None, :, :2])
    rb = torch.maximum(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    area_c = wh[..., 0] * wh[..., 1]
    return iou - (area_c - union) / area_c


def _diou_parts(a: torch.Tensor, b: torch.Tensor, eps: float):
    inter, union = _inter_union(a, b)
    iou = inter / union
    lti = torch.minimum(a[:, None, :2], b[None, :, :2])
    rbi = torch.maximum(a[:, None, 2:], b[None, :, 2:])
    whi = (rbi - lti).clamp(min=0)
    diag = whi[..., 0] ** 2 + whi[..., 1] ** 2 + eps
    xa = (a[:, 0] + a[:, 2]) / 2
    ya = (a[:, 1] + a[:, 3]) / 2
    xb = (b[:, 0] + b[:, 2]) / 2
    yb = (b[:, 1] + b[:, 3]) / 2
    centers = (xa[:, None] - xb[None, :]) ** 2 + (ya[:, None] - yb[None, :]) ** 2
    return iou, centers / diag


def distance_box_iou(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """DIoU = IoU - d(centers)^2 / diag(C)^2 (torchvision's ``distance_box_iou``, ``eps=1e-7``)."""
    iou, pen = _diou_parts(a, b, eps)
    return iou - pen


def complete_box_iou(a: torch.Tensor, b: torch.Tensor, eps: float = 1e-7) -> torch.Tensor:
    """CIoU = DIoU - alpha v, v = 4/pi^2 (atan(w_b/h_b) - atan(w_a/h_a))^2, alpha = v / (1 - IoU + v)."""
    iou, pen = _diou_parts(a, b, eps)
    wa, ha = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
    wb, hb = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    v = (4 / (torch.pi ** 2)) * (torch.atan(wa / ha)[:, None] - torch.atan(wb / hb)[None, :]) ** 2
    with torch.no_grad():
        alpha = v / (1 - iou + v + eps)
    return iou - pen - alpha * v
