"""Multimodal workloads: CLIP score and CLIP-IQA with one tiny random CLIP network (built offline, loaded by
torchmetrics from the same folder), and the lip vertex error over 10^4 frames, beside torchmetrics."""
from __future__ import annotations

import tempfile

import torch

import fmetrics.multimodal as fmm
from benchmarks.registry import Unsupported, fmetrics_run, register, torchmetrics_run


def _clip():
    import transformers

    from tests.cases.multimodal import TensorFeatures, tiny_clip

    folder = tempfile.mkdtemp(prefix="fmetrics-bench-clip-")
    model, processor = tiny_clip(folder)
    loaded = TensorFeatures(transformers.CLIPModel.from_pretrained(folder).eval())
    return model, processor, (loaded, transformers.CLIPProcessor.from_pretrained(folder))


def _pairs(n: int, batch: int = 32):
    from tests.cases.multimodal import captions, images

    g = torch.Generator().manual_seed(0)
    return [(images(g, min(batch, n - i)), captions(g, min(batch, n - i))) for i in range(0, n, batch)]


@register("multimodal/clip_score", domain="multimodal", samples=lambda quick: 64 if quick else 256,
          tolerance=1e-6, description="CLIP score over 256 image-text pairs (64 with --quick) in batches of 32, "
          "one tiny random CLIP network (2 layers, width 32, 32x32 images) for both: the processor and the "
          "network are most of the cost")
def _clip_score(quick: bool, device="cpu"):
    if torch.device(device).type != "cpu":
        raise Unsupported("host-input metric: the processor runs on the host; the network follows the metric")
    model, processor, peer = _clip()
    batches = _pairs(64 if quick else 256)
    runs = {"fmetrics": fmetrics_run(fmm.clip_score(model=model, processor=processor), batches)}
    from torchmetrics.multimodal import CLIPScore

    runs["torchmetrics"] = torchmetrics_run(lambda: CLIPScore(model_name_or_path=lambda: peer), batches)
    return runs


@register("multimodal/clip_image_quality_assessment", domain="multimodal",
          samples=lambda quick: 64 if quick else 256, tolerance=1e-6,
          description="CLIP-IQA ('quality', 'brightness') of 256 images (64 with --quick) in batches of 32, the "
          "same tiny CLIP network for both")
def _clip_iqa(quick: bool, device="cpu"):
    if torch.device(device).type != "cpu":
        raise Unsupported("host-input metric: the processor runs on the host; the network follows the metric")
    model, processor, peer = _clip()
    g = torch.Generator().manual_seed(1)
    n = 64 if quick else 256
    batches = [(torch.rand(32, 3, 40, 36, generator=g),) for _ in range(n // 32)]
    prompts = ("quality", "brightness")
    runs = {"fmetrics": lambda: fmetrics_run(fmm.clip_image_quality_assessment(
        model=model, processor=processor, prompts=prompts), batches)()["quality"]}
    from torchmetrics.multimodal import CLIPImageQualityAssessment

    tm = torchmetrics_run(lambda: CLIPImageQualityAssessment(model_name_or_path=lambda: peer, prompts=prompts),
                          batches)
    runs["torchmetrics"] = lambda: tm()["quality"]
    return runs


@register("multimodal/lip_vertex_error", domain="multimodal", samples=lambda quick: 2_000 if quick else 10_000,
          tolerance=1e-5, description="lip vertex error over 10^4 frames (2,000 with --quick) of 1,000 vertices "
          "in batches of 500 frames, a mouth of 150 vertices, float32")
def _lve(quick: bool, device="cpu"):
    from benchmarks.registry import on_device

    g = torch.Generator().manual_seed(2)
    frames = 2_000 if quick else 10_000
    batches = on_device([(torch.randn(500, 1000, 3, generator=g), torch.randn(500, 1000, 3, generator=g))
                         for _ in range(frames // 500)], device)
    mouth = torch.randperm(1000, generator=g)[:150].tolist()
    runs = {"fmetrics": fmetrics_run(fmm.lip_vertex_error(mouth_map=mouth), batches)}
    from torchmetrics.multimodal import LipVertexError

    runs["torchmetrics"] = torchmetrics_run(lambda: LipVertexError(mouth_map=mouth), batches)
    return runs
