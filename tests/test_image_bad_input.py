"""Issue 28, image domain: bad input gives a clear error with the state intact, or a defined, documented value.

Oracles: scikit-image (SSIM with an explicit range), torchmetrics (per-image SSIM / PSNR), SciPy (FID), and hand
calculations written here.
"""
import math
import warnings

import numpy as np
import pytest
import scipy.linalg
import torch

import fmetrics
import fmetrics.image as fi
from adapters import TorchMetric


def _net(d=4, seed=0, dropout=False):
    torch.manual_seed(seed)
    layers = [torch.nn.Conv2d(3, d, 3), torch.nn.BatchNorm2d(d), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()]
    if dropout:
        layers.append(torch.nn.Dropout(0.5))
    return torch.nn.Sequential(*layers).double()


def _fid_sqrtm(fr, ff):
    s1, s2 = np.cov(fr, rowvar=False), np.cov(ff, rowvar=False)
    covmean = scipy.linalg.sqrtm(s1 @ s2).real
    return float(((fr.mean(0) - ff.mean(0)) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


def _images(n, seed, scale=255.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 3, 8, 8, generator=g, dtype=torch.float64) * scale


# ------------------------------------------------------------------ networks are never mutated

@pytest.mark.parametrize("factory,arg,inputs", [
    (fi.frechet_inception_distance, "feature", lambda: (_images(6, 0), True)),
    (fi.kernel_inception_distance, "feature", lambda: (_images(6, 0), True)),
    (fi.memorization_informed_frechet_inception_distance, "feature", lambda: (_images(6, 0), True)),
    (fi.inception_score, "feature", lambda: (_images(6, 0),)),
    (fi.learned_perceptual_image_patch_similarity, "net", lambda: (_images(6, 0, 1.0), _images(6, 1, 1.0))),
])
def test_user_network_mode_device_dtype_unchanged_and_run_in_eval(factory, arg, inputs):
    net = _net(dropout=True)
    if factory is fi.learned_perceptual_image_patch_similarity:
        net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Dropout(0.5)).double()
    net.train()
    modes = [m.training for m in net.modules()]
    dtype, device = net[0].weight.dtype, net[0].weight.device
    m = factory(**{arg: net})
    s = m.update(m.init(), *inputs())
    tm = TorchMetric(m)
    tm.update(*inputs())
    tm.train()
    tm.update(*inputs())
    tm.eval()
    tm.train(True)
    assert [x.training for x in net.modules()] == modes, "the user's network changed mode"
    assert net[0].weight.dtype == dtype and net[0].weight.device == device
    # evaluated in eval mode: deterministic (dropout off, batch norm on its running statistics)
    s2 = m.update(m.init(), *inputs())
    for a, b in zip(torch.utils._pytree.tree_leaves(s), torch.utils._pytree.tree_leaves(s2)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with torch.no_grad():
        net.eval()
        want = net(inputs()[0] if arg == "feature" else inputs()[0])
        net.train()
    if factory is fi.frechet_inception_distance:
        torch.testing.assert_close(s.real_sum, want.sum(0))


def test_eval_view_shares_weights_so_training_updates_are_seen():
    net = _net()
    fid = fi.frechet_inception_distance(feature=net)
    x = _images(5, 3)
    before = fid.update(fid.init(), x, True).real_sum
    with torch.no_grad():
        net[0].bias.add_(1.0)  # a training step on the user's network
    after = fid.update(fid.init(), x, True).real_sum
    assert not torch.equal(before, after)
    net.eval()
    with torch.no_grad():
        torch.testing.assert_close(after, net(x).sum(0))


# ------------------------------------------------------------------ FID checkpoints and clear errors

def test_fid_checkpoint_without_num_features_round_trips():
    net = _net()
    assert not hasattr(net, "num_features")
    tm = TorchMetric(fi.frechet_inception_distance(feature=net), persistent=True)
    real, fake = _images(7, 1), _images(6, 2) * 0.7 + 20
    tm.update(real, True)
    tm.update(fake, False)
    sd = tm.state_dict()
    fresh = TorchMetric(fi.frechet_inception_distance(feature=net), persistent=True)
    fresh.load_state_dict(sd)
    net.eval()
    with torch.no_grad():
        want = _fid_sqrtm(net(real).numpy(), net(fake).numpy())
    assert abs(float(fresh.compute()) - want) <= 1e-6 * abs(want)
    assert float(fresh.compute()) == float(tm.compute())
    fresh.update(real[:2], True)  # and it keeps accumulating
    assert int(fresh._get_state().real_n) == 9


def test_fid_feature_size_change_names_metric_and_both_sizes():
    class Grows(torch.nn.Module):
        def forward(self, x):
            return x.flatten(1)[:, : x.shape[-1]]  # width = image side

    fid = fi.frechet_inception_distance(feature=Grows())
    s = fid.update(fid.init(), torch.rand(3, 3, 4, 4), True)
    with pytest.raises(ValueError, match=r"frechet_inception_distance: .*`feature`.*size 4.*size 5"):
        fid.update(s, torch.rand(3, 3, 5, 5), False)
    s2 = fid.update(s, torch.rand(3, 3, 4, 4), False)  # the old state still updates
    assert int(s2.real_n) == 3 and int(s2.fake_n) == 3
    kid = fi.kernel_inception_distance(feature=Grows(), subsets=1, subset_size=2)
    s = kid.update(kid.init(), torch.rand(3, 3, 4, 4), True)
    s = kid.update(s, torch.rand(3, 3, 5, 5), False)
    with pytest.raises(ValueError, match=r"kernel_inception_distance: .*`feature`.*size 4.*size 5"):
        kid.finalize(s)


def test_inception_score_requires_its_network_and_says_so():
    with pytest.raises(TypeError, match="feature"):
        fi.inception_score()
    for bad in ("logits_unbiased", 2048):
        with pytest.raises(ValueError, match=r"inception_score: argument `feature` expected an nn.Module returning "
                                             r"class logits .* required"):
            fi.inception_score(feature=bad)
    # with a network returning logits the default options work: IS of uniform logits is 1 (hand calculation)
    m = fi.inception_score(feature=torch.nn.Flatten())
    mean, std = m(torch.zeros(20, 5, 1, 1))
    assert float(mean) == pytest.approx(1.0) and float(std) == pytest.approx(0.0)


def test_bert_score_leaves_the_encoder_mode_alone():
    from tests.test_text_bert import TinyEncoder, TinyTokenizer
    import fmetrics.text as ft
    model = TinyEncoder(1)
    model.train()
    seen = []
    model.register_forward_pre_hook(lambda mod, args: seen.append(mod.training))
    ft.bert_score(model=model, tokenizer=TinyTokenizer())(["a b"], ["a c"])
    assert model.training and seen and not any(seen)  # run in eval mode, left in training mode


# ------------------------------------------------------------------ SSIM / MS-SSIM: a constant pair is scored

def _batch_with_black_pair(n=4, c=3, h=24, w=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, c, h, w, generator=g, dtype=torch.float64)
    p = (t + 0.1 * torch.randn(n, c, h, w, generator=g, dtype=torch.float64)).clamp(0, 1)
    p[2] = 0.0
    t[2] = 0.0
    return p, t


def test_ssim_inferred_range_scores_a_black_pair_as_one():
    import skimage.metrics as skm
    import torchmetrics.functional.image as T
    p, t = _batch_with_black_pair()
    got = fi.structural_similarity_index_measure(reduction="none")(p, t)
    want = []
    for i, (a, b) in enumerate(zip(p.numpy(), t.numpy())):
        dr = max(np.ptp(a), np.ptp(b))
        want.append(1.0 if i == 2 else skm.structural_similarity(b, a, channel_axis=0, gaussian_weights=True,
                                                                 sigma=1.5, use_sample_covariance=False,
                                                                 data_range=dr))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-8)
    assert float(got[2]) == 1.0
    mean = fi.structural_similarity_index_measure()(p, t)
    assert math.isfinite(float(mean)) and float(mean) == pytest.approx(float(np.mean(want)), rel=1e-6)
    # torchmetrics, per image (its per-batch range is the image's range there): the other images agree up to
    # its reflect-padded border; on the black pair alone its range is 0 and it gives NaN
    for i in (0, 1, 3):
        tm = float(T.structural_similarity_index_measure(p[i:i + 1], t[i:i + 1]))
        assert abs(tm - float(got[i])) < 2e-2
    assert math.isnan(float(T.structural_similarity_index_measure(p[2:3], t[2:3])))
    # split invariance with the constant pair in its own batch
    m = fi.structural_similarity_index_measure()
    s = m.update(m.update(m.init(), p[:2], t[:2]), p[2:3], t[2:3])
    s = m.update(s, p[3:], t[3:])
    assert float(m.finalize(s)) == pytest.approx(float(mean), rel=1e-12)


def test_ssim_two_different_constant_images_use_their_gap_as_range():
    p, t = torch.full((1, 1, 16, 16), 0.2, dtype=torch.float64), torch.full((1, 1, 16, 16), 0.6, dtype=torch.float64)
    c1 = (0.01 * 0.4) ** 2  # L = |0.6 - 0.2|; both variances and the covariance are 0, so CS = C2 / C2 = 1
    want = (2 * 0.2 * 0.6 + c1) / (0.2 ** 2 + 0.6 ** 2 + c1)
    assert float(fi.structural_similarity_index_measure()(p, t)) == pytest.approx(want, rel=1e-9)


def test_ms_ssim_inferred_range_scores_a_black_pair_as_one():
    import pytorch_msssim as pm
    p, t = _batch_with_black_pair(c=2, h=66, w=65)
    got = fi.multiscale_structural_similarity_index_measure(sigma=0.5, reduction="none")(p, t)
    for i in (0, 1, 3):
        dr = float(torch.maximum(p[i].max() - p[i].min(), t[i].max() - t[i].min()))
        want = pm.ms_ssim(p[i:i + 1], t[i:i + 1], data_range=dr, win_size=5, win_sigma=0.5, size_average=False)
        assert float(got[i]) == pytest.approx(float(want), rel=1e-5)  # its window taps are float32
    assert float(got[2]) == 1.0


# ------------------------------------------------------------------ NaN / inf: nan_strategy (default "error")

from fmetrics import validation  # noqa: E402
from tests.cases.image import CASES as _CASES  # noqa: E402

_FLOAT_CASES = [c for c in _CASES if c.id not in ("psnr-uint8-tuple-range", "ssim-uint8")]  # uint8: always finite


def _clean(case):
    """The case's batches joined into one batch (every image metric's inputs share the batch axis)."""
    batches = [b for b in case.batches(0) if b[0].shape[0]]
    return tuple(torch.cat([b[i] for b in batches]) for i in range(len(batches[0])))


def _poisoned(inputs, value=float("nan")):
    """``inputs`` with a copy of image 0 inserted at position 1, one of its entries set to ``value``."""
    out = []
    for k, x in enumerate(inputs):
        extra = x[:1].clone()
        if k == 0:
            extra.view(-1)[min(3, extra.numel() - 1)] = value
        out.append(torch.cat([x[:1], extra, x[1:]]))
    return tuple(out)


def _close(a, b, what):
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    for x, y in zip(a, b):
        torch.testing.assert_close(torch.as_tensor(x).double(), torch.as_tensor(y).double(), rtol=2e-5, atol=1e-6,
                                   equal_nan=True, msg=what)


def _kw(case, **extra):
    return {**case.kwargs, **extra}


@pytest.mark.parametrize("case", _FLOAT_CASES, ids=[c.id for c in _FLOAT_CASES])
def test_nonfinite_input_error_ignore_deferred_disable(case):
    clean = _clean(case)
    bad = _poisoned(clean, float("inf") if "psnr" in case.id else float("nan"))
    m = case.factory(**case.kwargs)
    # "error" (default), CPU eager: raises at once naming the metric and the input; the state is untouched
    s = m.update(m.init(), *clean)
    with pytest.raises(ValueError, match=rf"^{m.name}: \w+ must be finite \(nan_strategy='error'\); found (nan|inf)"):
        m.update(s, *bad)
    _close(m.finalize(m.update(s, *clean)), m(*(torch.cat([x, x]) for x in clean)), "state after a rejected update")
    # "ignore": the image with the non-finite entry is left out (the case's oracle on the clean images);
    # PSNR over every entry (dim=None) leaves out that entry only, as MSE
    if case.factory is fi.peak_signal_noise_ratio and "dim" not in case.kwargs:
        keep = torch.isfinite(bad[0])
        want = case.reference(bad[0][keep], bad[1][keep])
    else:
        want = case.reference(*clean) if case.reference is not None else m(*clean)
    _close(case.factory(**_kw(case, nan_strategy="ignore"))(*bad), want, "ignore")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _close(case.factory(**_kw(case, nan_strategy="warn"))(*bad), want, "warn")
    assert any("1 input entry broke the rule: images must be finite" in str(w.message) for w in seen)
    # deferred (as on a GPU, or compiled): counted, and finalize raises; the valid images were kept
    with validation.mode("deferred"):
        s = m.update(m.update(m.init(), *clean), *bad)
    with pytest.raises(ValueError, match=rf"^{m.name}: 1 input entry broke the rule: images must be finite"):
        m.finalize(s)
    ignore = case.factory(**_kw(case, nan_strategy="ignore"))
    _close(ignore.finalize(s), ignore(*(torch.cat([x, y]) for x, y in zip(clean, bad))), "deferred state")


def test_nan_strategy_disable_propagates_and_bad_values_are_rejected():
    p, t = _batch_with_black_pair()
    p[1, 0, 3, 3] = float("nan")
    assert math.isnan(float(fi.structural_similarity_index_measure(nan_strategy="disable")(p, t)))
    assert math.isnan(float(fi.peak_signal_noise_ratio(nan_strategy="disable", data_range=1.0)(p, t)))
    with pytest.raises(ValueError, match=r"structural_similarity_index_measure: argument `nan_strategy` expected one "
                                         r"of \('error', 'warn', 'ignore', 'disable'\), got 'drop'"):
        fi.structural_similarity_index_measure(nan_strategy="drop")


def test_psnr_nan_strategy_leaves_entries_out_like_scikit_image_on_the_rest():
    import skimage.metrics as skm
    g = torch.Generator().manual_seed(3)
    t = torch.rand(2, 1, 8, 8, generator=g, dtype=torch.float64)
    p = (t + 0.1 * torch.randn(2, 1, 8, 8, generator=g, dtype=torch.float64)).clamp(0, 1)
    p2 = p.clone()
    p2[0, 0, 0, 0] = float("nan")
    keep = torch.ones_like(p, dtype=torch.bool)
    keep[0, 0, 0, 0] = False
    want = skm.peak_signal_noise_ratio(t[keep].numpy(), p[keep].numpy(), data_range=float(t.max() - t.min()))
    assert float(fi.peak_signal_noise_ratio(nan_strategy="ignore")(p2, t)) == pytest.approx(want, rel=1e-9)


# ------------------------------------------------------------------ zero-size images

@pytest.mark.parametrize("make,args", [
    (lambda: fi.structural_similarity_index_measure(), lambda x: (x, x)),
    (lambda: fi.peak_signal_noise_ratio_with_blocked_effect(data_range=1.0), lambda x: (x[:, :1], x[:, :1])),
    (lambda: fi.spectral_angle_mapper(), lambda x: (x, x)),
    (lambda: fi.total_variation(), lambda x: (x,)),
    (lambda: fi.image_gradients(), lambda x: (x,)),
    (lambda: fi.frechet_inception_distance(feature=torch.nn.Flatten()), lambda x: (x, True)),
])
def test_images_without_pixels_are_rejected(make, args):
    m = make()
    for shape in ((2, 3, 0, 5), (2, 3, 5, 0), (2, 0, 5, 5)):
        with pytest.raises(ValueError, match=rf"^{m.name}: argument `\w+` expected images with at least one channel "
                                             r"and one pixel.*got shape"):
            m.update(m.init(), *args(torch.zeros(shape)))


@pytest.mark.parametrize("make,args,defined", [
    (lambda: fi.structural_similarity_index_measure(), lambda x: (x, x), None),
    (lambda: fi.multiscale_structural_similarity_index_measure(), lambda x: (x, x), None),
    (lambda: fi.peak_signal_noise_ratio(), lambda x: (x, x), None),
    (lambda: fi.peak_signal_noise_ratio_with_blocked_effect(data_range=1.0), lambda x: (x[:, :1], x[:, :1]), None),
    (lambda: fi.total_variation(reduction="mean"), lambda x: (x,), None),
    (lambda: fi.root_mean_squared_error_using_sliding_window(), lambda x: (x, x), None),
    (lambda: fi.relative_average_spectral_error(), lambda x: (x, x), None),
    (lambda: fi.spectral_distortion_index(), lambda x: (x, x), None),
    (lambda: fi.frechet_inception_distance(feature=torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1),
                                                                       torch.nn.Flatten())), lambda x: (x, True), None),
    (lambda: fi.inception_score(feature=torch.nn.Flatten()), lambda x: (x,), None),
    (lambda: fi.total_variation(), lambda x: (x,), 0.0),  # the empty sum
    (lambda: fi.structural_similarity_index_measure(reduction="sum"), lambda x: (x, x), 0.0),
])
def test_empty_batch_follows_the_empty_input_rule(make, args, defined):
    m = make()
    s = m.update(m.init(), *args(torch.zeros(0, 3, 176, 176)))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        v = m.finalize(s)
    v = v[0] if isinstance(v, tuple) else v
    msgs = [str(w.message) for w in seen]
    if defined is None:
        assert math.isnan(float(v))
        assert any(msg.startswith(m.name) and ("no samples were seen" in msg or "fewer than" in msg) for msg in msgs)
    else:
        assert float(v) == defined and not msgs
