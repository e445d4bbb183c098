"""Audio metrics (torchmetrics' functional names and options): the SNR family, BSS-eval SDR,
permutation-invariant training, STOI/ESTOI and SRMR (in torch), PESQ, and the
model-based DNSMOS and NISQA (the user's networks). See docs/audio.md.

Every metric averages a per-example value over the stream (a float64 sum and
an int64 count, beside the deferred record of non-finite input);
``per_example=True`` returns the values instead. Bad input (zero-length
signals, NaN / inf per ``nan_strategy``, no examples): docs/audio.md.
"""
from fmetrics.audio.dnsmos import deep_noise_suppression_mean_opinion_score
from fmetrics.audio.nisqa import non_intrusive_speech_quality_assessment
from fmetrics.audio.pesq import perceptual_evaluation_speech_quality
from fmetrics.audio.pit import permutation_invariant_training, pit_permutate
from fmetrics.audio.sdr import signal_distortion_ratio
from fmetrics.audio.stoi import short_time_objective_intelligibility
from fmetrics.audio.srmr import speech_reverberation_modulation_energy_ratio
from fmetrics.audio.snr import (
    complex_scale_invariant_signal_noise_ratio,
    scale_invariant_signal_distortion_ratio,
    scale_invariant_signal_noise_ratio,
    signal_noise_ratio,
    source_aggregated_signal_distortion_ratio,
)

__all__ = [
    "complex_scale_invariant_signal_noise_ratio",
    "deep_noise_suppression_mean_opinion_score",
    "non_intrusive_speech_quality_assessment",
    "perceptual_evaluation_speech_quality",
    "permutation_invariant_training",
    "pit_permutate",
    "scale_invariant_signal_distortion_ratio",
    "scale_invariant_signal_noise_ratio",
    "short_time_objective_intelligibility",
    "signal_distortion_ratio",
    "signal_noise_ratio",
    "source_aggregated_signal_distortion_ratio",
    "speech_reverberation_modulation_energy_ratio",
]
