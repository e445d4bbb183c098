"""Law-suite cases for the image metrics.

Oracles: scikit-image (PSNR, SSIM), pytorch-msssim (SSIM 3-D, contrast
sensitivity, MS-SSIM), torchmetrics (float64 inputs) where no other exists,
and numpy formulas (PSNR-B per Yim & Bovik). An oracle package that is missing
makes its case's reference a skip (see `_need`). The feature-based metrics
(FID, KID, IS, MiFID, LPIPS) have their cases in `tests/test_image_features.py`'s
networks and are registered here with tiny networks built on the spot.
"""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import torch

import fmetrics.image as fi
from tests.cases import Case

HAVE_SKIMAGE = importlib.util.find_spec("skimage") is not None
HAVE_MSSSIM = importlib.util.find_spec("pytorch_msssim") is not None

SIZES = (3, 1, 0, 2)


def _imgs(seed, c=3, h=24, w=20, sizes=SIZES, scale=1.0, noise=0.1, dtype=torch.float32, depth=None):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        shape = (n, c, h, w) if depth is None else (n, c, depth, h, w)
        t = torch.rand(shape, generator=g)
        p = (t + noise * torch.randn(shape, generator=g)).clamp(0, 1)
        if dtype == torch.uint8:
            out.append(((p * 255).round().to(torch.uint8), (t * 255).round().to(torch.uint8)))
        else:
            out.append(((p * scale).to(dtype), (t * scale).to(dtype)))
    return out


def _singles(seed):
    return [(p,) for p, _ in _imgs(seed)]


def _positive(seed):  # no all-zero pixel spectra (their angle is NaN, as in torchmetrics)
    return [(p + 0.05, t + 0.05) for p, t in _imgs(seed)]


def _np(x):
    return x.double().numpy()


def _tm(fn_name, *, cast=torch.float64, **kw):
    def ref(*xs):
        import torchmetrics.functional.image as T
        return getattr(T, fn_name)(*(x.to(cast) for x in xs), **kw)
    return ref


# --------------------------------------------------------------- scikit-image / pytorch-msssim oracles

def _sk_psnr(data_range=None):
    def ref(p, t):
        if not HAVE_SKIMAGE:
            return _psnr_np(p, t, data_range)
        import skimage.metrics as skm
        dr = data_range if data_range is not None else float(t.max() - t.min())
        return skm.peak_signal_noise_ratio(_np(t), _np(p), data_range=dr)
    return ref


def _psnr_np(p, t, data_range):
    p, t = _np(p), _np(t)
    dr = data_range if data_range is not None else t.max() - t.min()
    return 10 * np.log10(dr ** 2 / np.mean((p - t) ** 2))


def _sk_ssim(data_range=None, gaussian=True, win_size=None, reduction="mean"):
    def ref(p, t):
        import skimage.metrics as skm
        vals = []
        for a, b in zip(_np(p), _np(t)):
            dr = data_range if data_range is not None else max(np.ptp(a), np.ptp(b))
            kw = dict(gaussian_weights=True, sigma=1.5) if gaussian else dict(win_size=win_size)
            vals.append(skm.structural_similarity(b, a, channel_axis=0, use_sample_covariance=False,
                                                  data_range=dr, **kw))
        vals = np.array(vals)
        return vals if reduction == "none" else (vals.sum() if reduction == "sum" else vals.mean())
    return ref


def _pm_ssim_cs(data_range):
    def ref(p, t):
        from pytorch_msssim.ssim import _fspecial_gauss_1d, _ssim
        win = _fspecial_gauss_1d(11, 1.5).repeat([p.shape[1]] + [1] * (p.dim() - 1)).double()
        s, cs = _ssim(p.double(), t.double(), data_range=data_range, win=win, size_average=False)
        return s.mean(1).mean(), cs.mean(1).mean()
    return ref


def _pm_ssim(data_range):
    def ref(p, t):
        import pytorch_msssim as pm
        return pm.ssim(p.double(), t.double(), data_range=data_range, size_average=False).mean()
    return ref


def _pm_ms_ssim(data_range, win_size=11, win_sigma=1.5):
    def ref(p, t):
        import pytorch_msssim as pm
        return pm.ms_ssim(p.double(), t.double(), data_range=data_range, size_average=False, win_size=win_size,
                          win_sigma=win_sigma).mean()
    return ref


# --------------------------------------------------------------- numpy formulas

def _psnrb_np(data_range, block=8):
    def bef(x):
        h, w = x.shape
        dh = (x[:, 1:] - x[:, :-1]) ** 2
        dv = (x[1:, :] - x[:-1, :]) ** 2
        cols = list(range(block - 1, w - 1, block))
        rows = list(range(block - 1, h - 1, block))
        db = dh[:, cols].sum() + dv[rows, :].sum()
        nb = h * len(cols) + w * len(rows)
        nbc = h * (w - 1) + w * (h - 1) - nb
        dbc = (dh.sum() + dv.sum() - db) / nbc
        db = db / max(nb, 1)
        eta = math.log2(block) / math.log2(min(h, w))
        return eta * (db - dbc) if db > dbc else 0.0

    def ref(p, t):
        p, t = _np(p), _np(t)
        mse = np.mean((p - t) ** 2)
        return 10 * np.log10(data_range ** 2 / (mse + np.mean([bef(x[0]) for x in p])))
    return ref


def _rase_tm(window):
    def ref(p, t):
        import torchmetrics.functional.image as T
        # torchmetrics divides the local target mean by window_size^2 twice: its RASE is window_size^2 x ours
        return T.relative_average_spectral_error(p.double(), t.double(), window_size=window) / window ** 2
    return ref


def _pansharp(seed, sizes=(2, 1, 0, 2), with_lr=True):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        ms = torch.rand(n, 3, 16, 16, generator=g, dtype=torch.float64)
        pan = torch.rand(n, 3, 32, 32, generator=g, dtype=torch.float64)
        fused = (pan * 0.5 + torch.rand(n, 3, 32, 32, generator=g, dtype=torch.float64) * 0.5)
        lr = torch.rand(n, 3, 16, 16, generator=g, dtype=torch.float64)
        out.append((fused, ms, pan, lr) if with_lr else (fused, ms, pan))
    return out


def _dlambda_pairs(seed):
    return [(f, ms) for f, ms, _, _ in _pansharp(seed)]


def _sorted(v):
    if isinstance(v, (tuple, list)):
        return tuple(_sorted(x) for x in v)
    return torch.sort(torch.as_tensor(v).double().reshape(-1)).values


SORTED = {"canonical": _sorted}

# cases too slow for the default run (tests/test_image_laws.py runs them under the "slow" mark); not in CASES
SLOW_CASES = []  # per-image values joined in update order: compared order-free


FLOAT64 = dict(dtype=torch.float64)

CASES = [
    # PSNR
    Case("psnr", fi.peak_signal_noise_ratio, {"data_range": 1.0}, _imgs, reference=_sk_psnr(1.0)),
    Case("psnr-inferred-range", fi.peak_signal_noise_ratio, {}, _imgs, reference=_sk_psnr(None)),
    Case("psnr-uint8-tuple-range", fi.peak_signal_noise_ratio, {"data_range": (0, 255)},
         lambda s: _imgs(s, dtype=torch.uint8), reference=_sk_psnr(255.0)),
    Case("psnr-dim-base2", fi.peak_signal_noise_ratio, {"data_range": 1.0, "dim": (1, 2, 3), "base": 2.0},
         lambda s: _imgs(s, **FLOAT64),
         reference=_tm("peak_signal_noise_ratio", data_range=1.0, dim=(1, 2, 3), base=2.0)),
    Case("psnr-dim-none", fi.peak_signal_noise_ratio, {"data_range": 1.0, "dim": (2, 3), "reduction": "none"},
         lambda s: _imgs(s, **FLOAT64),
         reference=_tm("peak_signal_noise_ratio", data_range=1.0, dim=(2, 3), reduction="none"), check=SORTED),
    Case("psnrb", fi.peak_signal_noise_ratio_with_blocked_effect, {"data_range": 1.0},
         lambda s: _imgs(s, c=1, h=24, w=32, noise=0.05), reference=_psnrb_np(1.0)),
    # SSIM family
    Case("ssim", fi.structural_similarity_index_measure, {"data_range": 1.0}, _imgs,
         reference=_sk_ssim(1.0) if HAVE_SKIMAGE else None, check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("ssim-inferred-range-none", fi.structural_similarity_index_measure, {"reduction": "none"},
         lambda s: _imgs(s, scale=3.0), reference=_sk_ssim(None, reduction="none") if HAVE_SKIMAGE else None,
         check={**SORTED, "reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("ssim-uint8", fi.structural_similarity_index_measure, {"data_range": 255.0},
         lambda s: _imgs(s, dtype=torch.uint8), reference=_sk_ssim(255.0) if HAVE_SKIMAGE else None,
         check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("ssim-uniform-7-sum", fi.structural_similarity_index_measure,
         {"gaussian_kernel": False, "kernel_size": 7, "data_range": 1.0, "reduction": "sum"}, _imgs,
         reference=_sk_ssim(1.0, gaussian=False, win_size=7, reduction="sum") if HAVE_SKIMAGE else None,
         check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("ssim-3d", fi.structural_similarity_index_measure, {"data_range": 1.0},
         lambda s: _imgs(s, c=1, h=12, w=13, depth=11), reference=_pm_ssim(1.0) if HAVE_MSSSIM else None,
         check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("ssim-contrast-sensitivity", fi.structural_similarity_index_measure,
         {"data_range": 1.0, "return_contrast_sensitivity": True}, _imgs,
         reference=_pm_ssim_cs(1.0) if HAVE_MSSSIM else None, check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("ssim-full-image", fi.structural_similarity_index_measure,
         {"data_range": 1.0, "return_full_image": True}, lambda s: _imgs(s, h=14, w=12), check=SORTED),
    # all five levels with a 5-tap window (sigma 0.5): sides >= 65 instead of 161 keep the law suite fast; the
    # default 11-tap window on 162x161 images runs in tests/test_image_laws.py (slow)
    Case("ms-ssim", fi.multiscale_structural_similarity_index_measure, {"data_range": 1.0, "sigma": 0.5},
         lambda s: _imgs(s, c=2, h=66, w=65, sizes=(1, 0, 2)),
         reference=_pm_ms_ssim(1.0, win_size=5, win_sigma=0.5) if HAVE_MSSSIM else None,
         check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
    Case("ms-ssim-3-levels-simple-none", fi.multiscale_structural_similarity_index_measure,
         {"data_range": 1.0, "betas": (0.3, 0.3, 0.4), "normalize": "simple", "reduction": "none"},
         lambda s: _imgs(s, c=2, h=48, w=44, sizes=(2, 0, 1)), check=SORTED),
    Case("uqi", fi.universal_image_quality_index, {}, lambda s: _imgs(s, **FLOAT64),
         reference=_tm("universal_image_quality_index"), check={"reference_rtol": 1e-6, "reference_atol": 1e-7}),
    Case("uqi-none", fi.universal_image_quality_index, {"kernel_size": (7, 7), "sigma": (1.0, 1.2),
                                                       "reduction": "none"},
         lambda s: _imgs(s, **FLOAT64),
         reference=_tm("universal_image_quality_index", kernel_size=(7, 7), sigma=(1.0, 1.2), reduction="none"), check=SORTED),
    # others
    Case("tv-sum", fi.total_variation, {}, _singles, reference=_tm("total_variation")),
    Case("tv-mean", fi.total_variation, {"reduction": "mean"}, _singles, reference=_tm("total_variation", reduction="mean")),
    Case("tv-none", fi.total_variation, {"reduction": "none"}, _singles, reference=_tm("total_variation", reduction="none"), check=SORTED),
    Case("image-gradients", fi.image_gradients, {}, _singles,
         reference=lambda x: __import__("torchmetrics").functional.image.image_gradients(x), check=SORTED),
    Case("vif", fi.visual_information_fidelity, {}, lambda s: _imgs(s, c=2, h=41, w=44, scale=255.0, **FLOAT64),
         reference=_tm("visual_information_fidelity")),
    Case("vif-none", fi.visual_information_fidelity, {"sigma_n_sq": 0.5, "reduction": "none"},
         lambda s: _imgs(s, c=1, h=48, w=41, scale=255.0, **FLOAT64),
         reference=_tm("visual_information_fidelity", sigma_n_sq=0.5, reduction="none"), check=SORTED),
    Case("sam", fi.spectral_angle_mapper, {}, _positive, reference=_tm("spectral_angle_mapper")),
    Case("sam-none", fi.spectral_angle_mapper, {"reduction": "none"}, _positive,
         reference=_tm("spectral_angle_mapper", reduction="none"), check=SORTED),
    Case("ergas", fi.error_relative_global_dimensionless_synthesis, {"ratio": 2},
         lambda s: _imgs(s, **FLOAT64), reference=_tm("error_relative_global_dimensionless_synthesis", ratio=2)),
    Case("rmse-sw", fi.root_mean_squared_error_using_sliding_window, {}, lambda s: _imgs(s, **FLOAT64),
         reference=_tm("root_mean_squared_error_using_sliding_window")),
    Case("rmse-sw-map", fi.root_mean_squared_error_using_sliding_window, {"window_size": 5, "return_rmse_map": True},
         lambda s: _imgs(s, **FLOAT64),
         reference=_tm("root_mean_squared_error_using_sliding_window", window_size=5, return_rmse_map=True)),
    Case("rase", fi.relative_average_spectral_error, {}, lambda s: _imgs(s, **FLOAT64), reference=_rase_tm(8)),
    Case("scc", fi.spatial_correlation_coefficient, {}, _imgs,
         reference=_tm("spatial_correlation_coefficient", cast=torch.float32), check={"reference_rtol": 1e-5}),
    Case("scc-none-window5", fi.spatial_correlation_coefficient, {"window_size": 5, "reduction": "none"}, _imgs,
         reference=_tm("spatial_correlation_coefficient", cast=torch.float32, window_size=5, reduction="none"),
         check={**SORTED, "reference_rtol": 1e-5}),
    Case("d-lambda", fi.spectral_distortion_index, {}, _dlambda_pairs, reference=_tm("spectral_distortion_index")),
    Case("d-lambda-p2", fi.spectral_distortion_index, {"p": 2}, _dlambda_pairs,
         reference=_tm("spectral_distortion_index", p=2)),
    Case("d-s", fi.spatial_distortion_index, {}, _pansharp, reference=_tm("spatial_distortion_index")),
    Case("d-s-degraded-pan", fi.spatial_distortion_index, {"norm_order": 2, "window_size": 5},
         lambda s: _pansharp(s, with_lr=False)),
    Case("qnr", fi.quality_with_no_reference, {"alpha": 0.5, "beta": 2.0}, _pansharp,
         reference=_tm("quality_with_no_reference", alpha=0.5, beta=2.0)),
]


# --------------------------------------------------------------- feature-based metrics (tiny networks built here)

def _feature_net():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()).double()
    net.num_features = 4
    return net


FEATURE_NET = _feature_net()


def _gen_batches(seed, sizes=(5, 3, 0, 6)):
    """(images, real flags) batches: real images in [0, 255], fakes shifted."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in sizes:
        flags = torch.rand(n, generator=g) < 0.5
        x = torch.rand(n, 3, 6, 6, generator=g, dtype=torch.float64) * 255
        x = torch.where(flags[:, None, None, None], x, x * 0.7 + 20)
        out.append((x, flags))
    return out


def _split_feats(x, flags):
    with torch.no_grad():
        f = FEATURE_NET(x).numpy()
    return f[flags.numpy()], f[~flags.numpy()]


def _fid_ref(x, flags):
    import scipy.linalg
    fr, ff = _split_feats(x, flags)
    s1, s2 = np.cov(fr, rowvar=False), np.cov(ff, rowvar=False)
    covmean = scipy.linalg.sqrtm(s1 @ s2).real
    return ((fr.mean(0) - ff.mean(0)) ** 2).sum() + np.trace(s1) + np.trace(s2) - 2 * np.trace(covmean)


def _lpips_batches(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(n, 3, 6, 6, generator=g, dtype=torch.float64),
             torch.rand(n, 3, 6, 6, generator=g, dtype=torch.float64)) for n in (2, 1, 0, 3)]


def _is_batches(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, 5, 1, 1, generator=g, dtype=torch.float64),) for n in (4, 2, 0, 5)]


def _is_ref(x):
    p = torch.softmax(x.flatten(1), 1).numpy()
    py = p.mean(0, keepdims=True)
    return np.exp((p * (np.log(p) - np.log(py))).sum(1).mean()), 0.0


CASES += [
    Case("fid-network", fi.frechet_inception_distance, {"feature": FEATURE_NET}, _gen_batches, reference=_fid_ref,
         check={"reference_rtol": 1e-6, "rtol": 1e-6, "atol": 1e-6}),
    Case("kid-one-full-subset", fi.kernel_inception_distance, {"feature": torch.nn.Flatten(), "subsets": 1,
                                                                "subset_size": 3},
         lambda s: [(x[:, :2, :1, :1], f) for x, f in _gen_batches(s)]),
    Case("inception-score-one-split", fi.inception_score, {"feature": torch.nn.Flatten(), "splits": 1},
         _is_batches, reference=_is_ref),
    Case("mifid", fi.memorization_informed_frechet_inception_distance, {"feature": FEATURE_NET}, _gen_batches),
    Case("lpips", fi.learned_perceptual_image_patch_similarity,
         {"net": torch.nn.Conv2d(3, 4, 3).double(), "normalize": True}, _lpips_batches),
]

SLOW_CASES += [
    Case("ms-ssim-default-window", fi.multiscale_structural_similarity_index_measure, {"data_range": 1.0},
         lambda s: _imgs(s, c=1, h=162, w=161, sizes=(1, 0, 1)), reference=_pm_ms_ssim(1.0) if HAVE_MSSSIM else None,
         check={"reference_rtol": 1e-5, "reference_atol": 1e-6}),
]


# --------------------------------------------------------------- ARNIQA / DISTS / PPL (issue 29)
# Tiny random networks (module-level classes: the metrics pickle with their networks). Parity with torchmetrics'
# own forward passes lives in tests/test_image_models.py; here the laws.

def _tiny(module):
    torch.manual_seed(0)
    return module().double()


class TinyPPLGenerator(torch.nn.Module):
    """``forward(z) -> (N, 3, 6, 6)`` images in [0, 255]; ``sample(n) -> (n, 3)`` latents."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3 * 6 * 6)

    def forward(self, z):
        return 255 * torch.sigmoid(self.lin(z)).reshape(-1, 3, 6, 6)

    def sample(self, n):
        return torch.randn(n, 3, dtype=torch.float64)


class TinySimNet(torch.nn.Module):
    """``(img1, img2) -> (N,)``: mean squared difference of tanh conv features."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 2, 3)

    def forward(self, a, b):
        return ((torch.tanh(self.conv(a)) - torch.tanh(self.conv(b))) ** 2).mean((1, 2, 3))


def _arniqa_nets():
    torch.manual_seed(0)
    enc = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1)).double()
    return {"encoder": enc, "regressor": torch.nn.Linear(8, 1).double()}


def _dists_net():
    from fmetrics.image.dists import DISTSBackbone
    torch.manual_seed(0)
    return DISTSBackbone(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                                             torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 5, 3, padding=1),
                                             torch.nn.ReLU()).double())


def _single_imgs(seed):
    return [(p,) for p, _ in _lpips_batches(seed)]


def _latents(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, 3, generator=g, dtype=torch.float64), torch.randn(n, 3, generator=g, dtype=torch.float64))
            for n in (5, 1, 0, 6)]


def _ppl_sorted(v):
    return v[0], v[1], torch.sort(v[2]).values


CASES += [
    Case("arniqa", fi.arniqa, _arniqa_nets(), _single_imgs),
    Case("arniqa-none-kadid", fi.arniqa, {**_arniqa_nets(), "reduction": "none", "regressor_dataset": "kadid10k"},
         _single_imgs, check=SORTED),
    Case("dists", fi.deep_image_structure_and_texture_similarity, {"net": _dists_net()}, _lpips_batches),
    Case("dists-none", fi.deep_image_structure_and_texture_similarity, {"net": _dists_net(), "reduction": None},
         _lpips_batches, check=SORTED),
    Case("ppl", fi.perceptual_path_length,
         {"generator": _tiny(TinyPPLGenerator), "sim_net": _tiny(TinySimNet), "resize": 4, "epsilon": 1e-2,
          "batch_size": 4, "lower_discard": 0.1, "upper_discard": 0.9}, _latents, check={"canonical": _ppl_sorted}),
    Case("ppl-slerp", fi.perceptual_path_length,
         {"generator": _tiny(TinyPPLGenerator), "sim_net": _tiny(TinySimNet), "resize": None, "epsilon": 1e-2,
          "interpolation_method": "slerp_unit"}, _latents, check={"canonical": _ppl_sorted}),
]
