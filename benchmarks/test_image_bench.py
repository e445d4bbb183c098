"""Hot paths of the image metrics (pytest-benchmark): fmetrics vs scikit-image, pytorch-msssim, torchmetrics and the
``scipy.linalg.sqrtm`` FID on identical data; each timed fmetrics value is checked against the oracle, each timed
peer value against fmetrics."""
import numpy as np
import pytest
import torch

import fmetrics
from benchmarks._checks import assert_agrees, workload_tolerance
from benchmarks.image import fid_statistics, sqrtm_fid, torchmetrics_fid


def _images(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, 3, 256, 256, generator=g)
    return (t + 0.1 * torch.randn(t.shape, generator=g)).clamp(0, 1), t


def _sk_ssim(p, t):
    skm = pytest.importorskip("skimage.metrics", reason="scikit-image is the SSIM oracle")
    return float(np.mean([skm.structural_similarity(b, a, channel_axis=0, gaussian_weights=True, sigma=1.5,
                                                    use_sample_covariance=False, data_range=1.0)
                          for a, b in zip(p.numpy(), t.numpy())]))


def _fm_ssim(p, t):
    return fmetrics.structural_similarity_index_measure(data_range=1.0)(p, t)


def _fm_ms_ssim(p, t):
    return fmetrics.multiscale_structural_similarity_index_measure(data_range=1.0)(p, t)


def test_ssim_fmetrics(benchmark):
    benchmark.group = "image-ssim"
    p, t = _images()
    value = benchmark(fmetrics.structural_similarity_index_measure(data_range=1.0), p, t)
    assert abs(float(value) - _sk_ssim(p, t)) < 1e-6


def test_ssim_scikit_image(benchmark):
    benchmark.group = "image-ssim"
    p, t = _images()
    _sk_ssim(p[:1], t[:1])
    value = benchmark(_sk_ssim, p, t)
    assert_agrees(value, _fm_ssim(p, t), workload_tolerance("image/structural_similarity_index_measure"))


def test_ssim_pytorch_msssim(benchmark):
    benchmark.group = "image-ssim"
    pm = pytest.importorskip("pytorch_msssim", reason="pytorch-msssim is a peer")
    p, t = _images()
    value = benchmark(pm.ssim, p, t, data_range=1.0)
    assert_agrees(value, _fm_ssim(p, t), workload_tolerance("image/structural_similarity_index_measure"))


def test_ssim_torchmetrics(benchmark):
    benchmark.group = "image-ssim"
    F = pytest.importorskip("torchmetrics.functional.image")
    p, t = _images()
    value = benchmark(F.structural_similarity_index_measure, p, t, data_range=1.0)
    # torchmetrics also averages a reflect-padded border: the workload's tolerance allows for it (benchmarks/image.py)
    assert_agrees(value, _fm_ssim(p, t), workload_tolerance("image/structural_similarity_index_measure"))


def test_ms_ssim_fmetrics(benchmark):
    benchmark.group = "image-ms_ssim"
    pm = pytest.importorskip("pytorch_msssim", reason="pytorch-msssim is the MS-SSIM oracle")
    p, t = _images()
    value = benchmark(fmetrics.multiscale_structural_similarity_index_measure(data_range=1.0), p, t)
    want = pm.ms_ssim(p.double(), t.double(), data_range=1.0, size_average=False).mean()
    assert abs(float(value) - float(want)) < 1e-6


def test_ms_ssim_pytorch_msssim(benchmark):
    benchmark.group = "image-ms_ssim"
    pm = pytest.importorskip("pytorch_msssim", reason="pytorch-msssim is a peer")
    p, t = _images()
    value = benchmark(pm.ms_ssim, p, t, data_range=1.0)
    assert_agrees(value, _fm_ms_ssim(p, t), workload_tolerance("image/multiscale_structural_similarity_index_measure"))


def test_ms_ssim_torchmetrics(benchmark):
    benchmark.group = "image-ms_ssim"
    F = pytest.importorskip("torchmetrics.functional.image")
    p, t = _images()
    value = benchmark(F.multiscale_structural_similarity_index_measure, p, t, data_range=1.0)
    # torchmetrics averages channels before the level powers: the workload's tolerance allows for it
    assert_agrees(value, _fm_ms_ssim(p, t), workload_tolerance("image/multiscale_structural_similarity_index_measure"))


def test_psnr_fmetrics(benchmark):
    benchmark.group = "image-psnr"
    skm = pytest.importorskip("skimage.metrics", reason="scikit-image is the PSNR oracle")
    p, t = _images(16)
    value = benchmark(fmetrics.peak_signal_noise_ratio(data_range=1.0), p, t)
    want = skm.peak_signal_noise_ratio(t.double().numpy(), p.double().numpy(), data_range=1.0)
    assert abs(float(value) - want) < 1e-5


def test_psnr_scikit_image(benchmark):
    benchmark.group = "image-psnr"
    skm = pytest.importorskip("skimage.metrics", reason="scikit-image is a peer")
    p, t = _images(16)
    pn, tn = p.numpy(), t.numpy()
    value = benchmark(skm.peak_signal_noise_ratio, tn, pn, data_range=1.0)
    want = fmetrics.peak_signal_noise_ratio(data_range=1.0)(p, t)
    assert_agrees(value, want, workload_tolerance("image/peak_signal_noise_ratio"))


def test_psnr_torchmetrics(benchmark):
    benchmark.group = "image-psnr"
    F = pytest.importorskip("torchmetrics.functional.image")
    p, t = _images(16)
    value = benchmark(F.peak_signal_noise_ratio, p, t, data_range=1.0)
    want = fmetrics.peak_signal_noise_ratio(data_range=1.0)(p, t)
    assert_agrees(value, want, workload_tolerance("image/peak_signal_noise_ratio"))


D = 768  # > 512: the tiled lower-triangle path; small enough for sqrtm to take seconds, not minutes


def test_fid_finalize_fmetrics(benchmark):
    benchmark.group = "image-fid_finalize"
    pytest.importorskip("scipy.linalg", reason="scipy.linalg.sqrtm is the FID oracle")
    state = fid_statistics(D)
    metric = fmetrics.frechet_inception_distance(feature=torch.nn.Flatten())
    value = benchmark(metric.finalize, state)
    want = sqrtm_fid(state)
    assert abs(float(value) - want) <= 1e-6 * abs(want), (float(value), want)


def test_fid_finalize_scipy_sqrtm(benchmark):
    benchmark.group = "image-fid_finalize"
    pytest.importorskip("scipy.linalg", reason="scipy.linalg.sqrtm is a peer")
    state = fid_statistics(D)
    value = benchmark.pedantic(sqrtm_fid, args=(state,), rounds=3, iterations=1)
    want = fmetrics.frechet_inception_distance(feature=torch.nn.Flatten()).finalize(state)
    assert_agrees(value, want, workload_tolerance("image/frechet_inception_distance_finalize"))


def test_fid_finalize_torchmetrics(benchmark):
    benchmark.group = "image-fid_finalize"
    pytest.importorskip("torchmetrics.image.fid")
    state = fid_statistics(D)
    run = torchmetrics_fid(state, D)
    value = benchmark.pedantic(run, rounds=3, iterations=1)
    want = fmetrics.frechet_inception_distance(feature=torch.nn.Flatten()).finalize(state)
    assert abs(float(value) - float(want)) <= 1e-6 * abs(float(want))
