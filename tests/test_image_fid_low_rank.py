"""FID with fewer images than feature dimensions: the rank-``r`` factor (`features._pivoted_cholesky`).

Oracle written here from the features, not the covariances: ``S_i = X_ic^T X_ic / (n_i - 1)`` (centred rows),
so the eigenvalues of ``S1 S2`` are the squared singular values of ``X1c X2c^T / sqrt((n1 - 1)(n2 - 1))`` and
``tr sqrt(S1 S2)`` is that matrix's nuclear norm (NumPy SVD, float64). SciPy's ``sqrtm`` and torchmetrics'
``eigvals(S1 S2)`` are checked too at their own (looser) accuracy: both carry the square roots of the
round-off eigenvalues of the singular product.
"""
import numpy as np
import pytest
import scipy.linalg
import torch

import fmetrics.image as fi
from fmetrics.image import features as feat


def _features(n1, n2, d, seed):
    g = torch.Generator().manual_seed(seed)
    mix = torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5
    fr = torch.randn(n1, d, generator=g, dtype=torch.float64) @ mix
    ff = torch.randn(n2, d, generator=g, dtype=torch.float64) @ mix * 1.2 + 0.1
    return fr, ff


def _oracle(fr, ff):
    """FID from the features by the nuclear norm of the centred cross product (float64 NumPy)."""
    fr, ff = fr.numpy(), ff.numpy()
    x1, x2 = fr - fr.mean(0), ff - ff.mean(0)
    n1, n2 = len(fr), len(ff)
    tr_sqrt = np.linalg.svd(x1 @ x2.T, compute_uv=False).sum() / np.sqrt((n1 - 1) * (n2 - 1))
    diff = fr.mean(0) - ff.mean(0)
    return float(diff @ diff + (x1 ** 2).sum() / (n1 - 1) + (x2 ** 2).sum() / (n2 - 1) - 2 * tr_sqrt)


def _state(fr, ff):
    fid = fi.frechet_inception_distance(feature=torch.nn.Flatten())
    s = fid.update(fid.init(), fr[:, :, None, None], True)
    return fid, fid.update(s, ff[:, :, None, None], False)


@pytest.mark.parametrize("n1,n2", [(2, 2), (3, 40), (8, 8), (64, 20), (100, 400), (90, 90), (150, 150),
                                   (191, 191), (192, 200), (193, 193), (180, 400)])
def test_few_images_match_the_feature_oracle(n1, n2):
    # d = 192: ranks from 1 to d; (100, 400): one side low rank, the other full rank; (90, 90): both singular
    # with r1 + r2 < d; (191, 191) .. (193, 193): ranks d - 1 and d
    fr, ff = _features(n1, n2, 192, seed=n1 * 1000 + n2)
    fid, s = _state(fr, ff)
    got, want = float(fid.finalize(s)), _oracle(fr, ff)
    assert abs(got - want) <= 1e-10 * abs(want), (got, want)


def test_the_side_of_smaller_rank_is_factored_by_pivots(monkeypatch):
    calls = []
    real = feat._pivoted_cholesky

    def spy(a, rank):
        g, order = real(a, rank)
        calls.append((rank, g.shape[1]))
        return g, order

    monkeypatch.setattr(feat, "_pivoted_cholesky", spy)
    for n1, n2 in ((8, 300), (300, 8), (144, 500), (500, 145), (160, 160), (192, 300), (193, 300), (300, 300)):
        fr, ff = _features(n1, n2, 192, seed=7)
        fid, s = _state(fr, ff)
        got, want = float(fid.finalize(s)), _oracle(fr, ff)
        assert abs(got - want) <= 1e-10 * abs(want), (n1, n2, got, want)
    # rank n - 1 of the side with fewer images, from either side; rank d (193 or more images on both sides):
    # LAPACK's Cholesky, no pivots
    assert calls == [(7, 7), (7, 7), (143, 143), (144, 144), (159, 159), (191, 191)]
    # without counts (MiFID's call) the plain Cholesky fails on a singular covariance: the pivoted factor
    # stops at its numerical rank
    fr, ff = _features(8, 8, 64, seed=1)
    got = feat.frechet_distance(fr.mean(0), torch.cov(fr.T), ff.mean(0), torch.cov(ff.T))
    assert calls[-1] == (64, 7)
    assert abs(float(got) - _oracle(fr, ff)) <= 1e-10 * _oracle(fr, ff)


def _psd(d, rank, seed, scales=None):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(d, rank, generator=g, dtype=torch.float64)
    if scales is not None:
        x = x * scales[:, None]
    return x @ x.T


@pytest.mark.parametrize("case", ["rank-5", "rank-d", "rank-0", "dead-features", "duplicate-features", "scales"])
def test_pivoted_cholesky_is_an_exact_factor_of_the_rank(case):
    d = 96
    scales = torch.logspace(-3, 3, d, dtype=torch.float64)
    a, rank = {"rank-5": (_psd(d, 5, 0), 5), "rank-d": (_psd(d, 2 * d, 1), d),
               "rank-0": (torch.zeros(d, d, dtype=torch.float64), 0),
               "dead-features": (_psd(d, 40, 2, (torch.arange(d) % 3 > 0).double()), 40),
               "duplicate-features": (_psd(d, 30, 3)[[i // 2 for i in range(d)]][:, [i // 2 for i in range(d)]], 30),
               "scales": (_psd(d, 50, 4, scales), 50)}[case]
    g, order = feat._pivoted_cholesky(a, d)  # the bound d: it stops at the numerical rank
    assert g.shape == (d, rank)
    assert sorted(order.tolist()) == list(range(d))
    assert torch.equal(torch.triu(g, 1), torch.zeros_like(g))  # lower trapezoidal
    assert float(torch.dist(a[order][:, order], g @ g.T)) <= 1e-13 * max(float(a.norm()), 1e-300)
    g, _ = feat._pivoted_cholesky(a, min(rank, 3))  # a smaller bound: that many columns
    assert g.shape == (d, min(rank, 3))


def test_dead_features_and_repeated_images_match_the_feature_oracle():
    # more images than dimensions, yet singular covariances: a constant feature, and each image twice
    fr, ff = _features(300, 250, 64, seed=5)
    fr[:, 3], ff[:, 3] = 1.0, 1.0
    fid, s = _state(fr, ff)
    assert abs(float(fid.finalize(s)) - _oracle(fr, ff)) <= 1e-10 * _oracle(fr, ff)
    fr, ff = _features(40, 50, 128, seed=6)
    fr, ff = fr.repeat(2, 1), ff.repeat(3, 1)  # rank 39 and 49 from 80 and 150 images
    fid, s = _state(fr, ff)
    assert abs(float(fid.finalize(s)) - _oracle(fr, ff)) <= 1e-10 * _oracle(fr, ff)


def test_low_rank_matches_scipy_sqrtm_and_torchmetrics():
    tm = pytest.importorskip("torchmetrics.image.fid")
    fr, ff = _features(12, 30, 96, seed=3)
    fid, s = _state(fr, ff)
    got = float(fid.finalize(s))
    mu1, mu2 = fr.mean(0).numpy(), ff.mean(0).numpy()
    s1, s2 = np.cov(fr.numpy(), rowvar=False), np.cov(ff.numpy(), rowvar=False)
    covmean = scipy.linalg.sqrtm(s1 @ s2).real
    scipy_fid = float((mu1 - mu2) @ (mu1 - mu2) + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))
    assert abs(got - scipy_fid) <= 1e-6 * abs(scipy_fid), (got, scipy_fid)
    m = tm.FrechetInceptionDistance(feature=_Flat(96))
    m.update(fr[:, :, None, None], real=True)
    m.update(ff[:, :, None, None], real=False)
    want = float(m.compute())
    assert abs(got - want) <= 1e-6 * abs(want), (got, want)


class _Flat(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.num_features = d

    def forward(self, x):
        return x.flatten(1)


def test_large_dimension_few_images():
    # the benchmark's shape, d = 2048 with 8 and 64 images per side (the full eigensolves took seconds)
    for n in (8, 64):
        fr, ff = _features(n, n, 2048, seed=n)
        fid, s = _state(fr, ff)
        got, want = float(fid.finalize(s)), _oracle(fr, ff)
        assert abs(got - want) <= 1e-10 * abs(want), (n, got, want)


@pytest.mark.slow
@pytest.mark.parametrize("n1,n2", [(1200, 1200), (2000, 1900), (2100, 2100)])
def test_large_dimension_near_d_images(n1, n2):
    # ranks near d = 2048 (the benchmark's 1,200 / 2,000 / 2,100-image rows)
    fr, ff = _features(n1, n2, 2048, seed=n1 + n2)
    fid, s = _state(fr, ff)
    got, want = float(fid.finalize(s)), _oracle(fr, ff)
    assert abs(got - want) <= 1e-10 * abs(want), (n1, n2, got, want)
