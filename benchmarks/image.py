"""Image workloads (run with ``--threads 1``): SSIM, MS-SSIM and PSNR on 64 image pairs 3x256x256 float32 in
[0, 1] (2 with --quick), fed as batches of 16, and the FID ``finalize`` (the Fréchet distance of 2048-d
statistics; 384-d with --quick), also from 8, 64, 512, 1,200, 2,000 and 2,100 images per side (full runs only:
the rank-deficient covariances of fewer images than dimensions, and full rank).

Peers: scikit-image (a loop over images for SSIM; one call over the whole array for PSNR), pytorch-msssim
(``ssim`` / ``ms_ssim`` per batch), torchmetrics' classes (``update`` per batch, ``compute``), and for FID the
classic ``scipy.linalg.sqrtm(S1 @ S2)`` way (pytorch-fid's ``calculate_frechet_distance``) and torchmetrics'
``FrechetInceptionDistance.compute`` on the same sums.

torchmetrics' SSIM averages its map over a reflect-padded border as well (5e-5 off on these noise images, up to
~3.5e-3 on natural images), and its MS-SSIM averages channels before the level powers (~2e-5 off here):
docs/image.md. The tolerances are set so those known differences do not flag the rows; scikit-image and
pytorch-msssim agree to ~1e-7.
"""
from __future__ import annotations

import numpy as np
import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

N_IMAGES, QUICK_IMAGES, BATCH = 64, 2, 16
C, H, W = 3, 256, 256
FID_DIMS, QUICK_FID_DIMS, FID_SAMPLES = 2048, 384, 10_000


def _n(quick: bool) -> int:
    return QUICK_IMAGES if quick else N_IMAGES


def _images(quick: bool, seed: int = 0):
    """(preds, target) float32 ``(n, 3, 256, 256)`` in [0, 1]: target uniform, preds = target + noise, clamped."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(_n(quick), C, H, W, generator=g)
    p = (t + 0.1 * torch.randn(t.shape, generator=g)).clamp_(0, 1)
    return p, t


def _batches(p, t):
    return list(zip(p.split(BATCH), t.split(BATCH)))


def _image_bytes(quick: bool) -> int:
    return 2 * _n(quick) * C * H * W * 4


@register("image/structural_similarity_index_measure", domain="image", samples=_n, bytes=_image_bytes,
          peers=("scikit-image", "pytorch-msssim", "torchmetrics"), tolerance=5e-3,
          description="SSIM (Gaussian 11x11, sigma 1.5, data_range 1) of 64 pairs 3x256x256 in batches of 16 "
                      "(2 with --quick) vs skimage's structural_similarity per image, pytorch_msssim.ssim, "
                      "torchmetrics (reflect-padded border)")
def ssim(quick: bool, device="cpu"):
    p, t = _images(quick)  # host copies for scikit-image
    batches = on_device(_batches(p, t), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.structural_similarity_index_measure(data_range=1.0), batches)}
    try:
        import skimage.metrics as skm

        pn, tn = p.numpy(), t.numpy()
        runs["scikit-image"] = lambda: float(np.mean([
            skm.structural_similarity(b, a, channel_axis=0, gaussian_weights=True, sigma=1.5,
                                      use_sample_covariance=False, data_range=1.0) for a, b in zip(pn, tn)]))
    except ImportError:
        pass
    try:
        import pytorch_msssim as pm

        runs["pytorch-msssim"] = lambda: torch.stack(
            [pm.ssim(a, b, data_range=1.0, size_average=False) for a, b in batches]).double().mean()
    except ImportError:
        pass
    try:
        from torchmetrics.image import StructuralSimilarityIndexMeasure

        runs["torchmetrics"] = torchmetrics_run(lambda: StructuralSimilarityIndexMeasure(data_range=1.0), batches)
    except ImportError:
        pass
    return runs


@register("image/multiscale_structural_similarity_index_measure", domain="image", samples=_n,
          bytes=_image_bytes, peers=("pytorch-msssim", "torchmetrics"), tolerance=1e-3,
          description="MS-SSIM (5 levels, Wang et al.'s betas, data_range 1) of 64 pairs 3x256x256 in batches of 16 "
                      "(2 with --quick) vs pytorch_msssim.ms_ssim, torchmetrics (channel mean first)")
def ms_ssim(quick: bool, device="cpu"):
    p, t = _images(quick)
    batches = on_device(_batches(p, t), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.multiscale_structural_similarity_index_measure(data_range=1.0),
                                     batches)}
    try:
        import pytorch_msssim as pm

        runs["pytorch-msssim"] = lambda: torch.cat(
            [pm.ms_ssim(a, b, data_range=1.0, size_average=False) for a, b in batches]).double().mean()
    except ImportError:
        pass
    try:
        from torchmetrics.image import MultiScaleStructuralSimilarityIndexMeasure as MS

        runs["torchmetrics"] = torchmetrics_run(lambda: MS(data_range=1.0), batches)
    except ImportError:
        pass
    return runs


@register("image/peak_signal_noise_ratio", domain="image", samples=_n, bytes=_image_bytes,
          peers=("scikit-image", "torchmetrics"), tolerance=1e-5,
          description="PSNR (data_range 1) of 64 pairs 3x256x256 float32 in batches of 16 (2 with --quick) vs "
                      "skimage's peak_signal_noise_ratio on the whole array, torchmetrics' PeakSignalNoiseRatio")
def psnr(quick: bool, device="cpu"):
    p, t = _images(quick)  # host copies for scikit-image
    batches = on_device(_batches(p, t), device)
    runs = {"fmetrics": fmetrics_run(fmetrics.peak_signal_noise_ratio(data_range=1.0), batches)}
    try:
        import skimage.metrics as skm

        pn, tn = p.numpy(), t.numpy()
        runs["scikit-image"] = lambda: skm.peak_signal_noise_ratio(tn, pn, data_range=1.0)
    except ImportError:
        pass
    try:
        from torchmetrics.image import PeakSignalNoiseRatio

        runs["torchmetrics"] = torchmetrics_run(lambda: PeakSignalNoiseRatio(data_range=1.0), batches)
    except ImportError:
        pass
    return runs


def fid_statistics(d: int, n: int = FID_SAMPLES, seed: int = 0):
    """An FID state of ``d``-dim features: per side ``n`` samples with covariance ``diag(s) + U U^T / r``.

    Built from the moments directly (``sum = n mu``, ``outer = (n - 1) S + n mu mu^T``): generating and
    multiplying ``n x d`` features would cost more than the distance itself.
    """
    from fmetrics.image.features import FIDState

    g = torch.Generator().manual_seed(seed)
    rank = min(256, d)

    def side(shift):
        mu = torch.randn(d, generator=g, dtype=torch.float64) * 0.1 + shift
        u = torch.randn(d, rank, generator=g, dtype=torch.float64)
        s = u @ u.T / rank + torch.diag(torch.rand(d, generator=g, dtype=torch.float64) * 0.5 + 0.05)
        nt = torch.tensor(n, dtype=torch.int64)
        return nt, n * mu, (n - 1) * s + n * torch.outer(mu, mu)

    return FIDState(*side(0.0), *side(0.05), torch.zeros((), dtype=torch.int64))


def _sides(state):
    """``(mu, sigma)`` per side from the sums (float64 NumPy), as every FID implementation computes them."""
    out = []
    for n, s, outer in ((state.real_n, state.real_sum, state.real_outer), (state.fake_n, state.fake_sum,
                                                                             state.fake_outer)):
        n, s, outer = int(n), s.numpy(), outer.numpy()
        mu = s / n
        out.append((mu, (outer - n * np.outer(mu, mu)) / (n - 1)))
    return out


def sqrtm_fid(state) -> float:
    """pytorch-fid's ``calculate_frechet_distance``: ``scipy.linalg.sqrtm(S1 @ S2)``, float64."""
    import scipy.linalg

    (mu1, s1), (mu2, s2) = _sides(state)
    covmean = scipy.linalg.sqrtm(s1 @ s2)
    if not np.isfinite(covmean).all():  # pytorch-fid's fallback
        offset = np.eye(s1.shape[0]) * 1e-6
        covmean = scipy.linalg.sqrtm((s1 + offset) @ (s2 + offset))
    covmean = np.real(covmean)
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean))


class _Features(torch.nn.Module):
    """A stand-in feature network: the benchmark times ``finalize`` / ``compute`` only."""

    def __init__(self, d: int):
        super().__init__()
        self.num_features = d

    def forward(self, x):
        return x.flatten(1)


def torchmetrics_fid(state, d: int):
    """torchmetrics' ``FrechetInceptionDistance`` holding the same sums; its ``compute`` is the callable."""
    from torchmetrics.image.fid import FrechetInceptionDistance

    m = FrechetInceptionDistance(feature=_Features(d)).to(state.real_sum.device)
    m.real_features_num_samples = state.real_n.clone()
    m.real_features_sum = state.real_sum.clone()
    m.real_features_cov_sum = state.real_outer.clone()
    m.fake_features_num_samples = state.fake_n.clone()
    m.fake_features_sum = state.fake_sum.clone()
    m.fake_features_cov_sum = state.fake_outer.clone()
    m.orig_dtype = torch.float64  # set by update from the features' dtype
    m._update_count = 1  # the sums were set, not updated: no "compute before update" warning

    def run():
        m._computed = None  # no cached value: compute() computes
        return m.compute().double()

    return run


@register("image/frechet_inception_distance_finalize", domain="image", samples=1,
          peers=("scipy-sqrtm", "torchmetrics"), tolerance=1e-6,
          description="FID finalize: the Fréchet distance of 2048-d statistics (384-d with --quick) from the "
                      "summed moments, vs scipy.linalg.sqrtm(S1 @ S2) (pytorch-fid) and torchmetrics' compute "
                      "(general eigvals of S1 @ S2)")
def fid_finalize(quick: bool, device="cpu"):
    d = QUICK_FID_DIMS if quick else FID_DIMS
    state = fid_statistics(d)  # host copy for the SciPy way
    on = on_device(state, device)
    metric = fmetrics.frechet_inception_distance(feature=_Features(d))
    runs = {"fmetrics": lambda: metric.finalize(on)}
    try:
        import scipy.linalg  # noqa: F401

        runs["scipy-sqrtm"] = lambda: sqrtm_fid(state)
    except ImportError:
        pass
    try:
        runs["torchmetrics"] = torchmetrics_fid(on, d)
    except ImportError:
        pass
    return runs


def fid_feature_state(d: int, n: int, seed: int = 0):
    """An FID state from ``n`` feature rows per side (``d``-dim, correlated columns): covariances of rank
    ``n - 1`` when ``n <= d``, as a run over few images leaves them."""
    from fmetrics.image.features import FIDState

    g = torch.Generator().manual_seed(seed)
    scale = torch.rand(d, generator=g, dtype=torch.float64) + 0.5

    def side(shift):
        f = torch.randn(n, d, generator=g, dtype=torch.float64)
        f = (f + 0.5 * f.roll(1, 1)) * scale + shift  # neighbouring features correlated
        return torch.tensor(n, dtype=torch.int64), f.sum(0), f.T @ f

    return FIDState(*side(0.0), *side(0.05), torch.zeros((), dtype=torch.int64))


def _fid_images_workload(n: int):
    @register(f"image/frechet_inception_distance_finalize_{n}_images", domain="image", samples=1,
              peers=("torchmetrics",), tolerance=1e-6,
              full_only="torchmetrics' 2048-d eigvals takes seconds a call",
              description=f"FID finalize from {n} images per side (2048-d features; covariance rank "
                          f"{min(n - 1, FID_DIMS)}) vs torchmetrics' compute (general eigvals of S1 @ S2)")
    def build(quick: bool, device="cpu"):
        on = on_device(fid_feature_state(FID_DIMS, n), device)
        metric = fmetrics.frechet_inception_distance(feature=_Features(FID_DIMS))
        runs = {"fmetrics": lambda: metric.finalize(on)}
        try:
            runs["torchmetrics"] = torchmetrics_fid(on, FID_DIMS)
        except ImportError:
            pass
        return runs

    return build


for _count in (8, 64, 512, 1200, 2000, 2100):
    _fid_images_workload(_count)
