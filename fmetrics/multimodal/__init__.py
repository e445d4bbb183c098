"""Multimodal metrics (torchmetrics' functional names and options).

`clip_score` and `clip_image_quality_assessment` take the CLIP network and
its processor as parameters (nothing is downloaded; see docs/multimodal.md for
building them from a checkpoint on disk) and are host-input metrics: the
processor works on host data. `lip_vertex_error` is a plain tensor metric.
"""
from fmetrics.multimodal.clip_iqa import clip_image_quality_assessment
from fmetrics.multimodal.clip_score import clip_score
from fmetrics.multimodal.lve import lip_vertex_error

__all__ = ["clip_image_quality_assessment", "clip_score", "lip_vertex_error"]
