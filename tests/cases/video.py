"""Law-suite cases for the video metrics.

Oracle: vmaf-torch (what torchmetrics' VMAF wraps), run in float64 video by video (its module cast with
``.double()``); a missing vmaf-torch makes the reference a skip. Its model tables are float32 buffers, ours
the model file's doubles: VMAF agrees to 1e-4, the features much closer (tests/test_video_vmaf.py).
"""
from __future__ import annotations

import importlib.util

import torch

import fmetrics.video as fv
from tests.cases import Case

HAVE_VMAF_TORCH = importlib.util.find_spec("vmaf_torch") is not None
KEYS = ("integer_motion2", "integer_motion", "integer_adm2", "integer_adm_scale0", "integer_adm_scale1",
        "integer_adm_scale2", "integer_adm_scale3", "integer_vif_scale0", "integer_vif_scale1",
        "integer_vif_scale2", "integer_vif_scale3", "vmaf")
TOL = {"reference_rtol": 0.0, "reference_atol": 1e-4}


def _videos(seed, sizes=(2, 0, 1, 1), c=3, f=3, h=20, w=18, noise=0.05):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        t = torch.rand(n, c, f, h, w, generator=g)
        p = (t + noise * torch.randn(n, c, f, h, w, generator=g)).clamp(0, 1)
        out.append((p, t))
    return out


def vmaf_torch_table(preds, target, **kw) -> torch.Tensor:
    """``(N, F, 12)``: vmaf-torch's per-frame table (the columns `KEYS`), float64, one video at a time."""
    from vmaf_torch import VMAF

    model = VMAF(**kw).double()

    def luma(v):
        v = v.double()
        v = 0.299 * v[:, 0] + 0.587 * v[:, 1] + 0.114 * v[:, 2] if v.shape[1] == 3 else v[:, 0]
        return (v * 255).unsqueeze(2)  # (N, F, 1, H, W)

    p, t = luma(preds), luma(target)
    rows = [torch.tensor(model.table(t[i], p[i])[list(KEYS)].astype(float).values) for i in range(p.shape[0])]
    return torch.stack(rows) if rows else torch.zeros(0, preds.shape[2], len(KEYS), dtype=torch.float64)


def _ref(features=False, reduction="none", clip_score=False, neg=False):
    def ref(preds, target):
        table = vmaf_torch_table(preds, target, clip_score=clip_score, NEG=neg)
        if reduction == "mean":
            table = table.mean(dim=(0, 1))
        return dict(zip(KEYS, table.unbind(-1))) if features else table[..., -1]
    return ref if HAVE_VMAF_TORCH else None


def _by_video(value):
    """Per-video rows in a fixed order (ordered by their VMAF sum): chunks join in update order."""
    if isinstance(value, dict):
        order = torch.argsort(torch.as_tensor(value["vmaf"]).sum(-1))
        return {k: torch.as_tensor(v)[order] for k, v in value.items()}
    value = torch.as_tensor(value)
    return value[torch.argsort(value.sum(-1))]


PER_VIDEO = {**TOL, "canonical": _by_video}

CASES = [
    Case("vmaf", fv.video_multi_method_assessment_fusion, {}, _videos, reference=_ref(), check=PER_VIDEO),
    Case("vmaf-features-mean", fv.video_multi_method_assessment_fusion, {"features": True, "reduction": "mean"},
         lambda s: _videos(s, f=4, h=17, w=24), reference=_ref(features=True, reduction="mean"), check=TOL),
]

# ~40 s each, mostly tracing under compile (tests/test_video_vmaf.py runs them under the "slow" mark; their
# options have fast parity tests there); not in CASES
SLOW_CASES = [
    Case("vmaf-features", fv.video_multi_method_assessment_fusion, {"features": True}, _videos,
         reference=_ref(features=True), check=PER_VIDEO),
    Case("vmaf-neg-clip-luma", fv.video_multi_method_assessment_fusion, {"neg": True, "clip_score": True},
         lambda s: _videos(s, c=1, noise=0.2), reference=_ref(clip_score=True, neg=True), check=PER_VIDEO),
]
