"""VMAF (`fmetrics.video_multi_method_assessment_fusion`) against vmaf-torch and torchmetrics.

vmaf-torch runs in float64 (its module cast with ``.double()``), video by video: the features agree to
1e-7 (ADM's border constant is float32 there) and VMAF to 1e-4, the remaining offset coming from its
float32 model tables (`test_the_vmaf_offset_is_vmaf_torchs_float32_model_tables`). torchmetrics runs
vmaf-torch in float32: agreement to float32's precision on smooth videos.
"""
import math
import warnings

import pytest
import torch

import fmetrics
from fmetrics.testing import check_metric
from fmetrics.video import _svm
from tests.cases.video import KEYS, SLOW_CASES, vmaf_torch_table

pytest.importorskip("vmaf_torch")
VMAF = fmetrics.video_multi_method_assessment_fusion
FEATURE_ATOL, VMAF_ATOL = 1e-7, 1e-4


def _noisy(shape, seed, noise=0.05):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g)
    return (t + noise * torch.randn(shape, generator=g)).clamp(0, 1), t


def _structured(n=2, f=5, h=36, w=40, seed=0):
    """Moving sinusoid gratings per channel, the distorted copy quantized to 5 bits plus faint noise."""
    g = torch.Generator().manual_seed(seed)
    y, x = torch.linspace(0, 1, h).view(h, 1), torch.linspace(0, 1, w).view(1, w)
    t = torch.stack([0.5 + 0.3 * torch.sin(2 * math.pi * (3 * x + 2 * y + 0.1 * k)) + 0.1 * torch.cos(9 * x * y + k)
                     for k in range(f)]).clamp(0, 1)
    t = torch.stack([t * a for a in (1.0, 0.9, 0.8)]).unsqueeze(0)
    t = t * torch.rand(n, 1, 1, 1, 1, generator=g).add(0.5).clamp(max=1)
    p = ((t * 32).round() / 32 + 0.01 * torch.randn(t.shape, generator=g)).clamp(0, 1)
    return p, t


def _table(metric_value) -> torch.Tensor:
    return torch.stack([metric_value[k] for k in KEYS], dim=-1)


def _assert_table_close(ours, want):
    assert ours.shape == want.shape
    torch.testing.assert_close(ours[..., :-1], want[..., :-1], rtol=0, atol=FEATURE_ATOL)
    torch.testing.assert_close(ours[..., -1], want[..., -1], rtol=0, atol=VMAF_ATOL)


@pytest.mark.parametrize("shape", [(2, 3, 5, 32, 32), (1, 3, 3, 37, 45), (2, 3, 4, 17, 17), (1, 3, 1, 64, 48),
                                   (1, 3, 2, 33, 19), (3, 1, 3, 18, 29)])
def test_random_videos_match_vmaf_torch(shape):
    p, t = _noisy(shape, seed=sum(shape))
    _assert_table_close(_table(VMAF(features=True)(p, t)), vmaf_torch_table(p, t))


def test_structured_and_extreme_videos_match_vmaf_torch():
    p, t = _structured()
    g = torch.Generator().manual_seed(3)
    flat = torch.full((1, 3, 3, 20, 24), 0.5)
    shifted = torch.roll(t, shifts=3, dims=-1)
    cases = [
        (p, t),                                     # quantized gratings
        (t, t),                                     # identical: VIF = ADM = 1
        (flat, flat),                               # flat frames: every variance below the thresholds
        (torch.zeros_like(flat), flat),             # black against flat grey
        (flat, torch.rand(flat.shape, generator=g)),  # flat against noise
        (shifted, t),                               # spatial shift
        (t.flip(2), t),                             # frames in reverse
        (1 - t, t),                                 # inverted contrast (negative covariance)
        ((t * 1.5).clamp(0, 1), t),                 # contrast enhancement (gain limits)
    ]
    for preds, target in cases:
        _assert_table_close(_table(VMAF(features=True)(preds, target)), vmaf_torch_table(preds, target))


@pytest.mark.parametrize("neg,clip_score", [(True, False), (False, True), (True, True)])
def test_neg_and_clip_score_match_vmaf_torch(neg, clip_score):
    p, t = _noisy((2, 3, 3, 24, 20), seed=5, noise=0.3)
    p[0] = (t[0] * 1.4).clamp(0, 1)  # enhanced contrast: the NEG gain limits matter
    ours = _table(VMAF(features=True, neg=neg, clip_score=clip_score)(p, t))
    want = vmaf_torch_table(p, t, NEG=neg, clip_score=clip_score)
    _assert_table_close(ours, want)
    if neg:  # the option changes the value
        assert (ours[0, :, -1] - _table(VMAF(features=True)(p, t))[0, :, -1]).abs().max() > 1


def test_the_vmaf_offset_is_vmaf_torchs_float32_model_tables(monkeypatch):
    p, t = _noisy((2, 3, 4, 32, 32), seed=11)
    want = vmaf_torch_table(p, t)[..., -1]
    exact = VMAF()(p, t)
    host = _svm._host_tables
    monkeypatch.setattr(_svm, "_host_tables", lambda dtype: tuple(x.float().to(dtype) for x in host(dtype)))
    monkeypatch.setattr(_svm, "_ON_DEVICE", {})
    rounded = VMAF()(p, t)
    torch.testing.assert_close(rounded, want, rtol=0, atol=1e-6)
    assert 1e-6 < (exact - want).abs().max() < VMAF_ATOL


def test_torchmetrics_keys_shapes_and_values():
    from torchmetrics.functional.video import video_multi_method_assessment_fusion as tm_vmaf

    p, t = _structured(n=2, f=4)
    ours, theirs = VMAF(features=True)(p, t), tm_vmaf(p, t, features=True)
    assert list(ours) == list(theirs)
    for key in KEYS:
        assert ours[key].shape == theirs[key].shape and ours[key].dtype == torch.float64
        torch.testing.assert_close(ours[key], theirs[key].double(), rtol=0, atol=2e-2 if key == "vmaf" else 1e-3)
    torch.testing.assert_close(VMAF()(p, t), tm_vmaf(p, t).double(), rtol=0, atol=2e-2)


def test_float32_is_not_enough_which_is_why_the_features_are_float64():
    p, t = _noisy((1, 3, 5, 32, 32), seed=0)
    gap = (vmaf_torch_table(p, t)[..., -1] - VMAF()(p, t)).abs().max()
    from torchmetrics.functional.video import video_multi_method_assessment_fusion as tm_vmaf
    assert gap < VMAF_ATOL < (tm_vmaf(p, t).double() - VMAF()(p, t)).abs().max()  # float32: 7e-4 here


def test_mean_reduction_is_the_mean_over_every_frame():
    batches = [_noisy((2, 3, 3, 20, 20), seed=1), _noisy((1, 3, 3, 20, 20), seed=2)]
    per_frame, mean = VMAF(features=True), VMAF(features=True, reduction="mean")
    s, sm = per_frame.init(), mean.init()
    for b in batches:
        s, sm = per_frame.update(s, *b), mean.update(sm, *b)
    table, got = _table(per_frame.finalize(s)), mean.finalize(sm)
    torch.testing.assert_close(_table(got), table.mean(dim=(0, 1)), rtol=1e-12, atol=1e-12)
    assert VMAF(reduction="mean").finalize(sm).shape == ()


def test_empty_input():
    empty = torch.zeros(0, 3, 2, 20, 20)
    with pytest.warns(UserWarning, match="no samples were seen"):
        assert torch.isnan(VMAF(reduction="mean")(empty, empty))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert VMAF()(empty, empty).shape == (0, 2)


def test_videos_of_different_lengths_join_only_by_mean():
    m = VMAF()
    s = m.update(m.update(m.init(), *_noisy((1, 3, 2, 20, 20), 0)), *_noisy((1, 3, 3, 20, 20), 1))
    with pytest.raises(ValueError, match=r"video_multi_method_assessment_fusion: .*frame counts \[2, 3\]"):
        m.finalize(s)
    mean = VMAF(reduction="mean")
    s = mean.update(mean.update(mean.init(), *_noisy((1, 3, 2, 20, 20), 0)), *_noisy((1, 3, 3, 20, 20), 1))
    assert torch.isfinite(mean.finalize(s))


@pytest.mark.parametrize("preds,target,arg,expected", [
    (torch.rand(1, 3, 2, 20), torch.rand(1, 3, 2, 20), "preds", "(N, C, F, H, W)"),
    (torch.rand(1, 2, 2, 20, 20), torch.rand(1, 2, 2, 20, 20), "preds", "C = 3"),
    (torch.rand(1, 3, 2, 16, 20), torch.rand(1, 3, 2, 16, 20), "preds", "17x17"),
    (torch.rand(1, 3, 0, 20, 20), torch.rand(1, 3, 0, 20, 20), "preds", "at least one frame"),
    (torch.rand(1, 3, 2, 20, 20), torch.rand(1, 3, 2, 20, 21), "target", "the shape of preds"),
    (torch.randint(0, 255, (1, 3, 2, 20, 20)), torch.rand(1, 3, 2, 20, 20), "preds", "float tensor"),
    ([0.5], torch.rand(1, 3, 2, 20, 20), "preds", "float tensor"),
])
def test_bad_input_names_the_metric_and_argument(preds, target, arg, expected):
    m = VMAF()
    s = m.update(m.init(), *_noisy((1, 3, 2, 20, 20), 0))
    with pytest.raises(ValueError, match=rf"video_multi_method_assessment_fusion: argument `{arg}` expected"):
        m.update(s, preds, target)
    with pytest.raises(ValueError) as err:
        m.update(s, preds, target)
    assert expected in str(err.value)
    assert m.finalize(s).shape == (1, 2)  # the state is intact


def test_nan_strategy():
    p, t = _noisy((2, 3, 2, 20, 20), 0)
    p[1, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="video_multi_method_assessment_fusion: preds must be finite"):
        VMAF()(p, t)
    kept = VMAF(nan_strategy="ignore")(p, t)
    torch.testing.assert_close(kept, VMAF()(p[:1], t[:1]))


def test_bad_config():
    for kwargs in ({"features": 1}, {"reduction": "sum"}, {"neg": "yes"}, {"clip_score": None},
                   {"nan_strategy": "drop"}):
        with pytest.raises(ValueError, match="video_multi_method_assessment_fusion: argument"):
            VMAF(**kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("case", SLOW_CASES, ids=[c.id for c in SLOW_CASES])
def test_slow_cases_laws(case):
    for seed in (0, 1):
        check_metric(case.make(), case.batches(seed), reference=case.reference, seed=seed, **case.check)
