"""Video workloads (run with ``--threads 1``): VMAF per frame of 4 video pairs 3x12x144x176 (QCIF-like) RGB in
[0, 1] (1 pair of 3x3x64x64 with --quick), fed as batches of 2 videos.

Peers: vmaf-torch's ``VMAF`` (float32, one video at a time, as torchmetrics calls it) and torchmetrics'
``VideoMultiMethodAssessmentFusion`` (which wraps it). fmetrics computes the features in float64; float32
moves VMAF by up to ~1e-3 of its value on noise videos (docs/video.md), hence the tolerance.
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

N_VIDEOS, BATCH = 4, 2
SHAPE, QUICK_SHAPE = (3, 12, 144, 176), (3, 3, 64, 64)


def _shape(quick: bool):
    return QUICK_SHAPE if quick else SHAPE


def _n(quick: bool) -> int:
    return 1 if quick else N_VIDEOS


def _frames(quick: bool) -> int:
    return _n(quick) * _shape(quick)[1]


def _bytes(quick: bool) -> int:
    c, f, h, w = _shape(quick)
    return 2 * _n(quick) * c * f * h * w * 4


def _videos(quick: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(_n(quick), *_shape(quick), generator=g)
    p = (t + 0.05 * torch.randn(t.shape, generator=g)).clamp_(0, 1)
    return p, t


@register("video/video_multi_method_assessment_fusion", domain="video", samples=_frames, bytes=_bytes,
          peers=("vmaf-torch", "torchmetrics"), tolerance=2e-3,
          description="VMAF per frame (vmaf_v0.6.1) of 4 video pairs 3x12x144x176 in batches of 2 (1 pair "
                      "3x3x64x64 with --quick) vs vmaf-torch per video (float32) and torchmetrics (wraps it)")
def vmaf(quick: bool, device="cpu"):
    p, t = _videos(quick)
    batches = on_device(list(zip(p.split(BATCH), t.split(BATCH))), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.video_multi_method_assessment_fusion(), batches)}
    try:
        from vmaf_torch import VMAF

        model = VMAF().to(p.device if device == "cpu" else device)

        def luma(v):  # (N, 3, F, H, W) -> per video (F, 1, H, W) in [0, 255], torchmetrics' conversion
            return ((0.299 * v[:, 0] + 0.587 * v[:, 1] + 0.114 * v[:, 2]) * 255).unsqueeze(2)

        def vmaf_torch():
            with torch.no_grad():
                rows = [model.compute_vmaf_score(r, d).squeeze(-1) for b_p, b_t in batches
                        for r, d in zip(luma(b_t), luma(b_p))]
            return torch.stack(rows).double()

        runs["vmaf-torch"] = vmaf_torch
    except ImportError:
        pass
    try:
        from torchmetrics.video import VideoMultiMethodAssessmentFusion

        runs["torchmetrics"] = torchmetrics_run(VideoMultiMethodAssessmentFusion, batches)
    except (ImportError, RuntimeError):
        pass
    return runs
