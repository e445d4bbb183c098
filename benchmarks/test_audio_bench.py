"""Hot paths of the audio metrics (pytest-benchmark): fmetrics vs torchmetrics on identical data, values checked."""
import pytest
import torch

import fmetrics
from benchmarks._checks import assert_agrees, workload_tolerance

F = pytest.importorskip("torchmetrics.functional.audio")


def _pair(shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    t = torch.randn(shape, generator=g, dtype=dtype)
    return 0.9 * t + 0.3 * torch.randn(shape, generator=g, dtype=dtype), t


@pytest.mark.parametrize("name", ["scale_invariant_signal_distortion_ratio", "signal_noise_ratio"])
def test_snr_family(benchmark, name):
    benchmark.group = f"audio-{name}"
    p, t = _pair((16, 16000))
    m = getattr(fmetrics.audio, name)()
    value = benchmark(m, p, t)
    torch.testing.assert_close(value, getattr(F, name)(p, t).double().mean(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["scale_invariant_signal_distortion_ratio", "signal_noise_ratio"])
def test_snr_family_torchmetrics(benchmark, name):
    benchmark.group = f"audio-{name}"
    p, t = _pair((16, 16000))
    value = benchmark(lambda: getattr(F, name)(p, t).mean())
    assert_agrees(value, getattr(fmetrics.audio, name)()(p, t), workload_tolerance(f"audio/{name}"))


def test_sdr(benchmark):
    benchmark.group = "audio-signal_distortion_ratio"
    p, t = _pair((4, 16000), torch.float64)
    value = benchmark(fmetrics.audio.signal_distortion_ratio(), p, t)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # torchmetrics' batched LU solve fails with 2 threads under torch 2.13
    try:
        want = F.signal_distortion_ratio(p, t).mean()
    finally:
        torch.set_num_threads(threads)
    torch.testing.assert_close(value, want, rtol=1e-9, atol=1e-9)


def test_pit(benchmark):
    benchmark.group = "audio-permutation_invariant_training"
    p, t = _pair((4, 3, 16000))
    m = fmetrics.audio.permutation_invariant_training(fmetrics.audio.scale_invariant_signal_distortion_ratio())
    value = benchmark(m, p, t)
    want = F.permutation_invariant_training(p, t, F.scale_invariant_signal_distortion_ratio)[0].double().mean()
    torch.testing.assert_close(value, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("extended", [False, True], ids=["stoi", "estoi"])
def test_stoi(benchmark, extended):
    pystoi = pytest.importorskip("pystoi")
    benchmark.group = "audio-short_time_objective_intelligibility"
    p, t = _pair((4, 32000))
    value = benchmark(fmetrics.audio.short_time_objective_intelligibility(fs=16000, extended=extended), p, t)
    want = sum(pystoi.stoi(a, b, 16000, extended) for a, b in zip(t.double().numpy(), p.double().numpy())) / 4
    assert abs(value.item() - want) < 1e-5


def test_pit_si_snr_fast_path(benchmark):
    benchmark.group = "audio-permutation_invariant_training"
    p, t = _pair((4, 4, 16000))
    m = fmetrics.audio.permutation_invariant_training(fmetrics.audio.scale_invariant_signal_noise_ratio())
    value = benchmark(m, p, t)
    want = F.permutation_invariant_training(p, t, F.scale_invariant_signal_noise_ratio)[0].double().mean()
    torch.testing.assert_close(value, want, rtol=1e-4, atol=1e-4)
