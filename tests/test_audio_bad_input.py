"""Bad input to the audio metrics (issue 28; docs/audio.md, "Bad input").

Zero-length signals are rejected naming the metric and the argument, the
caller's state intact; a batch of no signals gives NaN with the empty-input
warning; NaN / inf follow ``nan_strategy`` (default "error": raised at once on
CPU in eager mode, else counted and raised by ``finalize``). Expected values
come from torchmetrics' functional audio, fast-bss-eval, pystoi and pesq.
"""
import math
import re
import sys
import typing
import warnings

import numpy as np
import pytest
import torch

import fmetrics
from fmetrics import audio as fm

TMF = pytest.importorskip("torchmetrics.functional.audio", reason="torchmetrics is the SNR/PIT oracle")


def _noisy(shape, dtype=torch.float64, complex_=False):
    """Batches ``seed -> (preds, target)``: noisy copies of random targets, 3 examples each."""
    def batches(seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.randn(shape, generator=g, dtype=torch.float64)
        p = 0.9 * t + 0.3 * torch.randn(shape, generator=g, dtype=torch.float64)
        if complex_:
            return torch.view_as_complex(p.to(dtype)), torch.view_as_complex(t.to(dtype))
        return p.to(dtype), t.to(dtype)
    return batches


def _speech(seed, fs=8000):
    """Three amplitude-modulated tones with noise (pesq finds utterances in them)."""
    g = torch.Generator().manual_seed(seed)
    time = torch.arange(fs, dtype=torch.float64) / fs
    f0 = 150 + 300 * torch.rand(3, 1, generator=g, dtype=torch.float64)
    env = torch.sin(2 * math.pi * (2 + 3 * torch.rand(3, 1, generator=g, dtype=torch.float64)) * time).abs()
    t = env * torch.sin(2 * math.pi * f0 * time)
    return t + 0.05 * torch.randn(3, fs, generator=g, dtype=torch.float64), t


def _tm(name, **kw):
    return lambda p, t: float(getattr(TMF, name)(p, t, **kw).double().mean())


def _sdr_oracle(p, t):
    fbe = pytest.importorskip("fast_bss_eval", reason="fast-bss-eval is the SDR oracle")
    return float(np.mean(fbe.sdr(t[:, None].numpy(), p[:, None].numpy(), filter_length=16)))


def _pit_oracle(p, t):
    best, _ = TMF.permutation_invariant_training(p, t, TMF.scale_invariant_signal_distortion_ratio,
                                                 mode="speaker-wise", eval_func="max")
    return float(best.double().mean())


def _stoi_oracle(p, t):
    stoi = pytest.importorskip("pystoi").stoi
    return float(np.mean([stoi(ti, pi, 8000) for pi, ti in zip(p.numpy(), t.numpy())]))


def _estoi_oracle(p, t):
    stoi = pytest.importorskip("pystoi").stoi
    return float(np.mean([stoi(ti, pi, 8000, extended=True) for pi, ti in zip(p.numpy(), t.numpy())]))


def _pesq_oracle(p, t):
    pesq = pytest.importorskip("pesq", reason="the pesq package is the PESQ oracle")
    return float(np.mean([pesq.pesq(8000, ti, pi, "nb") for pi, ti in zip(p.numpy(), t.numpy())]))


def _pesq_metric(**kw):
    pytest.importorskip("pesq", reason="PESQ needs the pesq package")
    return fm.perceptual_evaluation_speech_quality(fs=8000, mode="nb", **kw)


# id -> (factory(**kw), batches(seed) of 3 examples, oracle(preds, target) -> mean, name in messages,
#        a zero-length input shape)
CASES = {
    "snr": (fm.signal_noise_ratio, _noisy((3, 256)), _tm("signal_noise_ratio"), "signal_noise_ratio", (3, 0)),
    "si_snr": (fm.scale_invariant_signal_noise_ratio, _noisy((3, 256), torch.float32),
               _tm("scale_invariant_signal_noise_ratio"), "scale_invariant_signal_noise_ratio", (3, 0)),
    "si_sdr": (fm.scale_invariant_signal_distortion_ratio, _noisy((3, 256)),
               _tm("scale_invariant_signal_distortion_ratio"), "scale_invariant_signal_distortion_ratio", (3, 0)),
    "c_si_snr": (fm.complex_scale_invariant_signal_noise_ratio, _noisy((3, 5, 16, 2), complex_=True),
                 _tm("complex_scale_invariant_signal_noise_ratio"), "complex_scale_invariant_signal_noise_ratio",
                 (3, 5, 0)),
    "sa_sdr": (fm.source_aggregated_signal_distortion_ratio, _noisy((3, 2, 256)),
               _tm("source_aggregated_signal_distortion_ratio"), "source_aggregated_signal_distortion_ratio",
               (3, 2, 0)),
    "sdr": (lambda **kw: fm.signal_distortion_ratio(filter_length=16, **kw), _noisy((3, 256)), _sdr_oracle,
            "signal_distortion_ratio", (3, 0)),
    "pit": (lambda **kw: fm.permutation_invariant_training(fm.scale_invariant_signal_distortion_ratio(), **kw),
            _noisy((3, 2, 256)), _pit_oracle, "permutation_invariant_training(scale_invariant_signal_distortion_ratio)",
            (3, 2, 0)),
    "stoi": (lambda **kw: fm.short_time_objective_intelligibility(fs=8000, **kw), _noisy((3, 4800)), _stoi_oracle,
             "short_time_objective_intelligibility", (3, 0)),
    "estoi": (lambda **kw: fm.short_time_objective_intelligibility(fs=8000, extended=True, **kw), _noisy((3, 4800)),
              _estoi_oracle, "short_time_objective_intelligibility", (3, 0)),
    "pesq": (_pesq_metric, _speech, _pesq_oracle, "perceptual_evaluation_speech_quality", (3, 0)),
}


def _cat(*batches):
    return tuple(torch.cat(xs) for xs in zip(*batches))


def _spoil(x, value, example=1):
    """A copy of ``x`` with one entry of ``example`` set to ``value``."""
    x = x.clone()
    x[example].view(-1)[5] = value
    return x


def _close(got, want):
    assert math.isclose(float(got), want, rel_tol=1e-5, abs_tol=1e-5), (float(got), want)


# ---------------------------------------------------------------- zero-length signals, empty batches

@pytest.mark.parametrize("case", CASES)
def test_zero_length_signal_is_rejected_and_the_state_kept(case):
    """The issue's scenario: three good examples, then three empty ones (today SI-SDR / SNR / PIT counted
    them as 0 dB: 20.1 dB became 10.06; SDR gave NaN; STOI and PESQ raised a reshape error)."""
    make, batches, oracle, name, shape = CASES[case]
    m = make()
    p, t = batches(0)
    s = m.update(m.init(), p, t)
    empty = torch.zeros(shape, dtype=p.dtype)
    expected = re.escape(f"{name}: argument `preds` expected signals of shape ") + r".*at least one sample.*" + \
        re.escape(f"got shape {shape}")
    with pytest.raises(ValueError, match=expected):
        m.update(s, empty, empty)
    _close(m.finalize(s), oracle(p, t))  # the three-example value
    _close(m.finalize(m.update(s, *batches(1))), oracle(*_cat((p, t), batches(1))))


@pytest.mark.parametrize("make,shape", [(fm.source_aggregated_signal_distortion_ratio, (3, 0, 64)),
                                        (lambda: fm.permutation_invariant_training(fm.signal_noise_ratio()),
                                         (3, 0, 64))], ids=["sa_sdr", "pit"])
def test_zero_speakers_are_rejected(make, shape):
    x = torch.zeros(shape)
    with pytest.raises(ValueError, match=r"argument `preds` expected signals of shape .*at least one sample"):
        make()(x, x)


@pytest.mark.parametrize("case", CASES)
def test_a_batch_of_no_signals_follows_the_empty_input_rule(case):
    """docs/conventions.md: NaN and a warning on no data (today: NaN without a word); per-example: empty."""
    make, batches, _, name, _ = CASES[case]
    p, _ = batches(0)
    none = torch.zeros(0, *p.shape[1:], dtype=p.dtype)
    m = make()
    with pytest.warns(UserWarning, match=re.escape(f"{name}: no samples were seen (empty input)")):
        assert torch.isnan(m.finalize(m.update(m.init(), none, none)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = make(per_example=True)(none, none)
    assert (out[0] if isinstance(out, tuple) else out).shape == (0,)


# ---------------------------------------------------------------- NaN / inf: nan_strategy

@pytest.mark.parametrize("case", CASES)
def test_nonfinite_input_raises_at_once_with_the_state_intact(case):
    """Default ``nan_strategy="error"`` on CPU: the update raises quoting the values (today: NaN, for good)."""
    make, batches, oracle, name, _ = CASES[case]
    m = make()
    (p, t), (p2, t2) = batches(0), batches(1)
    s = m.update(m.init(), p, t)
    for arg, bad, found in (("preds", (_spoil(p2, float("nan")), t2), "nan"),
                            ("target", (p2, _spoil(t2, -float("inf"))), "-inf")):
        with pytest.raises(ValueError, match=re.escape(f"{name}: {arg} must be finite (nan_strategy='error'); "
                                                       f"found {found}. Pass nan_strategy=")):
            m.update(s, *bad)
    _close(m.finalize(m.update(s, p2, t2)), oracle(*_cat((p, t), (p2, t2))))


@pytest.mark.parametrize("case", CASES)
def test_nonfinite_input_deferred_is_raised_by_finalize(case):
    """As on a GPU / under compile: counted in the state, ``finalize`` names the first offender and the call."""
    make, batches, _, name, _ = CASES[case]
    m = make()
    (p, t), (p2, t2) = batches(0), batches(1)
    with fmetrics.validation.mode("deferred"):
        s = m.update(m.init(), p, t)
        s = m.update(s, p2, _spoil(t2, float("inf")))
        s = m.update(s, p, t)
    rule = "preds and target must be finite (no NaN or inf)"
    with pytest.raises(ValueError, match=re.escape(f"{name}: 1 input entry broke the rule: {rule}; the first was "
                                                   "inf in update call 2")):
        m.finalize(s)


@pytest.mark.parametrize("case", CASES)
def test_nan_strategy_warn_ignore_leave_the_example_out_and_disable_propagates(case):
    make, batches, oracle, name, _ = CASES[case]
    p, t = batches(0)
    bad = _spoil(p, float("nan"))
    good = (torch.stack([p[0], p[2]]), torch.stack([t[0], t[2]]))
    want = oracle(*good)
    with pytest.warns(UserWarning, match=re.escape(f"{name}: 1 input entry broke the rule")):
        _close(make(nan_strategy="warn")(bad, t), want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _close(make(nan_strategy="ignore")(bad, t), want)
        out = make(nan_strategy="ignore", per_example=True)(bad, t)
        values = out[0] if isinstance(out, tuple) else out
        assert torch.isnan(values[1]) and torch.isfinite(values[[0, 2]]).all()
        assert torch.isnan(make(nan_strategy="disable")(bad, t))


def test_large_finite_samples_are_not_taken_for_inf():
    """Entries whose float32 sum overflows are finite: the example is kept and nothing is reported."""
    m = fm.signal_noise_ratio(nan_strategy="warn")
    x = torch.full((2, 8), 3e38)
    with fmetrics.validation.mode("deferred"), warnings.catch_warnings():
        warnings.simplefilter("error")
        s = m.update(m.init(), x, x)
        m.finalize(s)
    assert int(s.count) == 2 and int(s.invalid.count) == 0


def test_vmapped_update_defers_the_error_to_finalize():
    """Under ``torch.func.vmap`` (bootstrap / grouped replicates) the update counts; ``finalize`` raises."""
    m = fm.scale_invariant_signal_distortion_ratio()
    p, t = _noisy((3, 64))(0)
    states = fmetrics.state.stack([m.init(), m.init()])
    out = torch.func.vmap(m.update)(states, torch.stack([p, _spoil(p, float("nan"))]), torch.stack([t, t]))
    first, second = fmetrics.state.unstack(out)
    _close(m.finalize(first), _tm("scale_invariant_signal_distortion_ratio")(p, t))
    with pytest.raises(ValueError, match=r"1 input entry broke the rule: .*the first was nan in update call 1"):
        m.finalize(second)


@pytest.mark.parametrize("factory", [f for f in fm.__all__ if f != "pit_permutate"])
def test_every_audio_factory_takes_a_literal_nan_strategy(factory):
    fn = getattr(fm, factory)
    hint = typing.get_type_hints(fn)["nan_strategy"]
    assert typing.get_args(hint) == ("error", "warn", "ignore", "disable")
    assert "nan_strategy" in fn.__doc__
    kw = {"fs": 8000} if "objective" in factory or "reverberation" in factory \
        else {"fs": 16000, "personalized": False, "p808": None, "p835": None} if "noise_suppression" in factory \
        else {"fs": 16000, "net": None} if "non_intrusive" in factory \
        else {"fs": 8000, "mode": "nb"} if "speech" in factory else {}
    if factory == "perceptual_evaluation_speech_quality":
        pytest.importorskip("pesq")
    args = (fm.signal_noise_ratio(),) if factory == "permutation_invariant_training" else ()
    with pytest.raises(ValueError, match=rf"^{factory}: argument `nan_strategy` expected one of"):
        fn(*args, nan_strategy="raise", **kw)


# ---------------------------------------------------------------- PIT's shapes, SciPy

@pytest.mark.parametrize("shape", [(2, 7), (2, 200)])
def test_pit_rejects_an_input_without_a_speaker_axis(shape):
    """Today a 2-d ``(batch, time)`` input was scored with every sample as a speaker (27 s at 200 samples)."""
    pit = fm.permutation_invariant_training(fm.scale_invariant_signal_distortion_ratio())
    x = torch.randn(shape)
    with pytest.raises(ValueError, match=re.escape("permutation_invariant_training(scale_invariant_signal_distortion_"
                                                   "ratio): argument `preds` expected a tensor of shape (batch, "
                                                   "speakers, time, ...)")):
        pit(x, x)


def test_pit_without_scipy_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)  # `from scipy.optimize import ...` now fails
    pit = fm.permutation_invariant_training(fm.signal_noise_ratio())
    x = torch.randn(1, 9, 32)
    with pytest.raises(ModuleNotFoundError, match=r"^permutation_invariant_training: 9 speakers .*pip install scipy$"):
        pit(x, x)
