"""FID with fewer images than feature dimensions: the rank-``n - 1`` route (`features._low_rank_trace_sqrt`).

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


@pytest.mark.parametrize("n1,n2", [(2, 2), (3, 40), (8, 8), (64, 20), (100, 400), (90, 90)],
                         ids=["2-2", "3-40", "8-8", "64-20", "100-400", "90-90"])
def test_few_images_match_the_feature_oracle(n1, n2):
    # d = 192: every pair has a side of rank n - 1 with n - 1 + 10 < 0.8 d (the low-rank route);
    # (100, 400): the 100 side is low rank and the other full rank (its projection is Cholesky-factored);
    # (90, 90): both singular, the projected covariances too (the eigh fallback)
    fr, ff = _features(n1, n2, 192, seed=n1 * 1000 + n2)
    fid, s = _state(fr, ff)
    got, want = float(fid.finalize(s)), _oracle(fr, ff)
    assert abs(got - want) <= 1e-9 * abs(want), (got, want)


def test_low_rank_route_is_taken_and_full_rank_unchanged(monkeypatch):
    calls = []
    real = feat._low_rank_trace_sqrt
    monkeypatch.setattr(feat, "_low_rank_trace_sqrt", lambda *a: calls.append(a[2]) or real(*a))
    for n1, n2 in ((8, 300), (300, 8), (144, 500), (145, 500), (500, 145), (160, 160), (300, 300)):
        fr, ff = _features(n1, n2, 192, seed=7)
        fid, s = _state(fr, ff)
        got, want = float(fid.finalize(s)), _oracle(fr, ff)
        assert abs(got - want) <= 1e-9 * abs(want), (n1, n2, got, want)
    # rank 7 from either side; 143 + 10 < 0.8 * 192 takes it, 144 + 10 does not (then the Cholesky of the
    # 500-image side, either order); (160, 160) the symmetric square root; full rank never
    assert calls == [7, 7, 143]
    # without counts (MiFID's call) the full-matrix route is kept
    fr, ff = _features(8, 8, 64, seed=1)
    feat.frechet_distance(fr.mean(0), torch.cov(fr.T), ff.mean(0), torch.cov(ff.T))
    assert calls == [7, 7, 143]


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
        assert abs(got - want) <= 1e-9 * abs(want), (n, got, want)
