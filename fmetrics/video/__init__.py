"""Video metrics (torchmetrics' functional names and options).

VMAF computes its elementary features (VIF at four scales, ADM, motion) in torch, batched over the
frames of a batch of videos, and fuses them with Netflix's ``vmaf_v0.6.1`` model; see docs/video.md.
"""
from fmetrics.video.vmaf import video_multi_method_assessment_fusion

__all__ = ["video_multi_method_assessment_fusion"]
