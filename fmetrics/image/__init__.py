"""Image metrics (torchmetrics' functional names and options).

Full-reference quality metrics keep float64 sums and counts (sum-mergeable);
SSIM-type metrics filter four local-moment planes in one separable pass with
"valid" borders (Wang et al.; scikit-image, pytorch-msssim). Feature-based
metrics (FID, KID, IS, MiFID, LPIPS, ARNIQA, DISTS, PPL) take their network as a parameter of the
metric; see docs/image.md.
"""
from fmetrics.image.arniqa import arniqa
from fmetrics.image.dists import deep_image_structure_and_texture_similarity
from fmetrics.image.features import (frechet_inception_distance, inception_score, kernel_inception_distance,
                                     learned_perceptual_image_patch_similarity,
                                     memorization_informed_frechet_inception_distance)
from fmetrics.image.misc import image_gradients, total_variation, visual_information_fidelity
from fmetrics.image.ppl import perceptual_path_length
from fmetrics.image.psnr import peak_signal_noise_ratio, peak_signal_noise_ratio_with_blocked_effect
from fmetrics.image.spectral import (error_relative_global_dimensionless_synthesis, quality_with_no_reference,
                                     relative_average_spectral_error,
                                     root_mean_squared_error_using_sliding_window, spatial_correlation_coefficient,
                                     spatial_distortion_index, spectral_angle_mapper, spectral_distortion_index)
from fmetrics.image.ssim import (multiscale_structural_similarity_index_measure,
                                 structural_similarity_index_measure, universal_image_quality_index)

__all__ = [
    "arniqa",
    "deep_image_structure_and_texture_similarity",
    "error_relative_global_dimensionless_synthesis",
    "frechet_inception_distance",
    "image_gradients",
    "inception_score",
    "kernel_inception_distance",
    "learned_perceptual_image_patch_similarity",
    "memorization_informed_frechet_inception_distance",
    "multiscale_structural_similarity_index_measure",
    "peak_signal_noise_ratio",
    "peak_signal_noise_ratio_with_blocked_effect",
    "perceptual_path_length",
    "quality_with_no_reference",
    "relative_average_spectral_error",
    "root_mean_squared_error_using_sliding_window",
    "spatial_correlation_coefficient",
    "spatial_distortion_index",
    "spectral_angle_mapper",
    "spectral_distortion_index",
    "structural_similarity_index_measure",
    "total_variation",
    "universal_image_quality_index",
    "visual_information_fidelity",
]
