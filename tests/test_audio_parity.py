"""Audio parity: torchmetrics' functional audio, fast-bss-eval, mir_eval, pesq, and a brute-force PIT search.

Every difference from torchmetrics is explained in docs/audio.md; here values
agree to float32 precision (float32 inputs) or ~1e-10 (float64 inputs).
"""
import doctest
import itertools
import math

import numpy as np
import pytest
import torch

import fmetrics
from fmetrics import audio as A

F = pytest.importorskip("torchmetrics.functional.audio", reason="torchmetrics is the SNR/SDR/PIT oracle")


def _pair(shape, seed=0, dtype=torch.float32, noise=0.3):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    p = 0.9 * t + noise * torch.randn(shape, generator=g, dtype=torch.float64)
    return p.to(dtype), t.to(dtype)


SNR = [
    ("signal_noise_ratio", {}, {}),
    ("signal_noise_ratio", {"zero_mean": True}, {"zero_mean": True}),
    ("scale_invariant_signal_distortion_ratio", {}, {}),
    ("scale_invariant_signal_distortion_ratio", {"zero_mean": True}, {"zero_mean": True}),
    ("scale_invariant_signal_noise_ratio", {}, {}),
    ("source_aggregated_signal_distortion_ratio", {}, {}),
    ("source_aggregated_signal_distortion_ratio", {"scale_invariant": False, "zero_mean": True},
     {"scale_invariant": False, "zero_mean": True}),
]
SHAPES = [(4, 1000), (3, 2, 257), (2, 3, 1), (5, 2, 2), (2, 2, 16000 * 4)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name,kw,tm_kw", SNR, ids=[f"{n}-{k}" for n, k, _ in SNR])
def test_snr_family_vs_torchmetrics(name, kw, tm_kw, shape, dtype):
    p, t = _pair(shape, dtype=dtype)
    got = getattr(A, name)(per_example=True, **kw)(p, t)
    want = getattr(F, name)(p, t, **tm_kw).double()
    want = want.reshape(1) if want.dim() == 0 else want  # a single example counts as a batch of one
    tol = 1e-9 if dtype == torch.float64 else 2e-3  # torchmetrics computes float32 sums in float32
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    torch.testing.assert_close(getattr(A, name)(**kw)(p, t), want.mean(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["signal_noise_ratio", "scale_invariant_signal_distortion_ratio",
                                  "scale_invariant_signal_noise_ratio"])
def test_snr_edge_cases(name):
    silence = torch.zeros(2, 100)
    x = torch.randn(2, 100, generator=torch.Generator().manual_seed(0))
    for p, t in [(silence, silence), (x, silence), (silence, x), (x, 2.5 * x), (2.5 * x, x), (x, x)]:
        got = getattr(A, name)(per_example=True)(p, t)
        want = getattr(F, name)(p, t).double()
        finite = torch.isfinite(want)
        assert torch.equal(finite, torch.isfinite(got)), (p, t, got, want)
        # a scaled copy: both are ~ +140 dB (the eps floor); agree to 0.1% of the value
        torch.testing.assert_close(got[finite], want[finite], rtol=1e-3, atol=1e-3)


def test_complex_si_snr_vs_torchmetrics():
    g = torch.Generator().manual_seed(0)
    t = torch.randn(3, 129, 20, dtype=torch.complex64, generator=g)
    p = t + 0.5 * torch.randn(3, 129, 20, dtype=torch.complex64, generator=g)
    for zm in (False, True):
        got = A.complex_scale_invariant_signal_noise_ratio(zero_mean=zm, per_example=True)(p, t)
        want = F.complex_scale_invariant_signal_noise_ratio(p, t, zero_mean=zm).double()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        got2 = A.complex_scale_invariant_signal_noise_ratio(zero_mean=zm, per_example=True)(
            torch.view_as_real(p), torch.view_as_real(t))
        torch.testing.assert_close(got2, got)


def test_snr_is_differentiable_one_shot():
    p, t = _pair((2, 50), dtype=torch.float64)
    p.requires_grad_(True)
    A.scale_invariant_signal_noise_ratio()(p, t).backward()
    assert p.grad is not None and torch.isfinite(p.grad).all()


# ---------------------------------------------------------------- SDR

@pytest.mark.parametrize("kw", [{}, {"zero_mean": True}, {"filter_length": 64, "load_diag": 1e-5},
                                {"use_cg_iter": 10}], ids=["default", "zero_mean", "L64-load_diag", "cg10"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_sdr_vs_torchmetrics(kw, dtype):
    p, t = _pair((3, 2, 4000), dtype=dtype)
    got = A.signal_distortion_ratio(per_example=True, **kw)(p, t)
    # torchmetrics' batched torch.linalg.solve raises "Pivots given to lu_solve must all be greater or equal
    # to 1" with 2 threads under torch 2.13 (CPU); with 1 thread it runs
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want = F.signal_distortion_ratio(p, t, **kw).double()
    finally:
        torch.set_num_threads(threads)
    tol = 1e-8 if dtype == torch.float64 else 1e-4  # torchmetrics casts its float64 result to float32
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_sdr_vs_fast_bss_eval():
    fbe = pytest.importorskip("fast_bss_eval", reason="fast-bss-eval is the SDR oracle")
    for shape, noise in [((4, 16000), 0.3), ((2, 600), 1.0), ((3, 48000), 0.01)]:
        p, t = _pair(shape, dtype=torch.float64, noise=noise)
        got = A.signal_distortion_ratio(per_example=True)(p, t)
        want = fbe.sdr(t[:, None].numpy(), p[:, None].numpy(), filter_length=512)[:, 0]
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-9)


def test_sdr_vs_mir_eval():
    mir = pytest.importorskip("mir_eval.separation", reason="mir_eval is an SDR oracle")
    p, t = _pair((2, 8000), dtype=torch.float64, noise=0.5)
    got = A.signal_distortion_ratio(per_example=True)(p, t)
    for i in range(2):
        sdr, _, _, _ = mir.bss_eval_sources(t[i:i + 1].numpy(), p[i:i + 1].numpy(), compute_permutation=False)
        # mir_eval's projection uses 512 lags as well; it solves by least squares (scipy) on un-normalized signals
        assert abs(got[i].item() - sdr[0]) < 1e-3, (got[i], sdr)


# ---------------------------------------------------------------- PIT

def _brute_force(preds, target, fn, mode, eval_func):
    best_v, best_p = [], []
    for pb, tb in zip(preds, target):
        s = pb.shape[0]
        scored = []
        for perm in itertools.permutations(range(s)):
            if mode == "speaker-wise":
                v = np.mean([fn(pb[j][None], tb[i][None]).item() for i, j in enumerate(perm)])
            else:
                v = fn(pb[list(perm)][None], tb[None]).double().mean().item()
            scored.append((v, perm))
        v, perm = (max if eval_func == "max" else min)(scored, key=lambda x: x[0])
        best_v.append(v)
        best_p.append(perm)
    return torch.tensor(best_v, dtype=torch.float64), torch.tensor(best_p)


@pytest.mark.parametrize("speakers", [2, 3, 4, 5])
@pytest.mark.parametrize("mode,eval_func", [("speaker-wise", "max"), ("speaker-wise", "min"),
                                            ("permutation-wise", "max")])
def test_pit_vs_brute_force(speakers, mode, eval_func):
    g = torch.Generator().manual_seed(speakers)
    t = torch.randn(4, speakers, 200, generator=g, dtype=torch.float64)
    perm = torch.argsort(torch.rand(4, speakers, generator=g), -1)
    p = t[torch.arange(4)[:, None], perm] + 0.8 * torch.randn(4, speakers, 200, generator=g, dtype=torch.float64)
    inner, fn = ((A.scale_invariant_signal_distortion_ratio(), F.scale_invariant_signal_distortion_ratio)
                 if mode == "speaker-wise" else
                 (A.source_aggregated_signal_distortion_ratio(), F.source_aggregated_signal_distortion_ratio))
    if speakers == 5 and mode == "permutation-wise":
        pytest.skip("120 permutations x 4 examples of brute force in Python: covered by 2-4 speakers")
    got_v, got_p = A.permutation_invariant_training(inner, mode=mode, eval_func=eval_func, per_example=True)(p, t)
    want_v, want_p = _brute_force(p, t, fn, mode, eval_func)
    torch.testing.assert_close(got_v, want_v, rtol=1e-9, atol=1e-9)
    assert torch.equal(got_p, want_p)
    tm_v, tm_p = F.permutation_invariant_training(p, t, fn, mode=mode, eval_func=eval_func)
    torch.testing.assert_close(got_v, tm_v.double(), rtol=1e-9, atol=1e-9)
    assert torch.equal(got_p, tm_p.cpu())
    torch.testing.assert_close(A.pit_permutate(p, got_p), F.pit_permutate(p, tm_p))


def test_pit_hungarian_many_speakers():
    pytest.importorskip("scipy")
    g = torch.Generator().manual_seed(0)
    s = 10
    t = torch.randn(2, s, 100, generator=g, dtype=torch.float64)
    perm = torch.argsort(torch.rand(2, s, generator=g), -1)
    p = t[torch.arange(2)[:, None], perm] + 0.1 * torch.randn(2, s, 100, generator=g, dtype=torch.float64)
    v, best = A.permutation_invariant_training(A.signal_noise_ratio(), per_example=True)(p, t)
    tm_v, tm_p = F.permutation_invariant_training(p, t, F.signal_noise_ratio)
    torch.testing.assert_close(v, tm_v.double(), rtol=1e-9, atol=1e-9)
    assert torch.equal(A.pit_permutate(p, best), A.pit_permutate(p, tm_p))


def test_pit_rejects_bad_input():
    pit = A.permutation_invariant_training(A.signal_noise_ratio())
    with pytest.raises(ValueError, match="permutation_invariant_training"):
        pit(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="mode"):
        A.permutation_invariant_training(A.signal_noise_ratio(), mode="x")


# ---------------------------------------------------------------- PESQ

@pytest.mark.parametrize("fs,mode", [(16000, "wb"), (8000, "nb"), (16000, "nb")])
def test_pesq_identical(fs, mode):
    pesq = pytest.importorskip("pesq", reason="the pesq package is the PESQ oracle (pip install pesq)")
    g = torch.Generator().manual_seed(0)
    time = torch.arange(fs) / fs
    t = torch.sin(2 * math.pi * 3 * time).abs() * torch.sin(2 * math.pi * 220 * time)
    t = torch.stack([t, t.roll(300)])
    p = t + 0.05 * torch.randn(t.shape, generator=g)
    got = A.perceptual_evaluation_speech_quality(fs=fs, mode=mode, per_example=True)(p, t)
    want = [pesq.pesq(fs, ti, pi, mode) for pi, ti in zip(p.double().numpy(), t.double().numpy())]
    np.testing.assert_array_equal(got.numpy(), np.array(want))


def test_pesq_errors():
    pytest.importorskip("pesq")
    with pytest.raises(ValueError, match="fs"):
        A.perceptual_evaluation_speech_quality(fs=8000, mode="wb")
    m = A.perceptual_evaluation_speech_quality(fs=8000, mode="nb")
    with pytest.raises(ValueError, match="could not score"):
        m(torch.zeros(1, 8000), torch.zeros(1, 8000))


# ---------------------------------------------------------------- docs

@pytest.mark.parametrize("module", ["snr", "sdr", "pit", "pesq"])
def test_docstring_examples(module):
    import importlib

    mod = importlib.import_module(f"fmetrics.audio.{module}")
    if module == "pesq":
        pytest.importorskip("pesq")
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(mod, globs={"torch": torch, "fmetrics": fmetrics, **vars(mod)}):
        runner.run(test)
    assert runner.failures == 0 and runner.tries > 0


def test_errors_name_metric_and_argument():
    with pytest.raises(ValueError, match="signal_noise_ratio.*target"):
        A.signal_noise_ratio()(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="filter_length"):
        A.signal_distortion_ratio(filter_length=0)
    with pytest.raises(ValueError, match="speakers"):
        A.source_aggregated_signal_distortion_ratio()(torch.zeros(3), torch.zeros(3))
