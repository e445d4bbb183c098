"""PIT's all-pairs fast path (SNR, SI-SDR, SI-SNR: one Gram product chooses, the chosen pairs are scored with
explicit residuals) against the generic vmapped path and a brute-force search with torchmetrics' functions."""
import itertools

import numpy as np
import pytest
import torch

from fmetrics import audio as A
from fmetrics.audio.pit import _pairwise_plan
from fmetrics.metric import Metric

F = pytest.importorskip("torchmetrics.functional.audio", reason="torchmetrics is the PIT oracle")

INNER = [
    ("signal_noise_ratio", {}, lambda p, t: F.signal_noise_ratio(p, t)),
    ("signal_noise_ratio", {"zero_mean": True}, lambda p, t: F.signal_noise_ratio(p, t, zero_mean=True)),
    ("scale_invariant_signal_distortion_ratio", {}, F.scale_invariant_signal_distortion_ratio),
    ("scale_invariant_signal_distortion_ratio", {"zero_mean": True},
     lambda p, t: F.scale_invariant_signal_distortion_ratio(p, t, zero_mean=True)),
    ("scale_invariant_signal_noise_ratio", {}, F.scale_invariant_signal_noise_ratio),
]


def _mixtures(b, s, n, noise, dtype, seed=0, dc=0.0):
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(b, s, n, generator=g, dtype=torch.float64)
    perm = torch.argsort(torch.rand(b, s, generator=g), -1)
    p = t[torch.arange(b)[:, None], perm] + noise * torch.randn(b, s, n, generator=g, dtype=torch.float64) + dc
    return p.to(dtype), t.to(dtype)


def _brute(p, t, fn, eval_func):
    vals, perms = [], []
    for pb, tb in zip(p, t):
        s = pb.shape[0]
        m = torch.stack([torch.stack([fn(pb[j], tb[i]).double() for j in range(s)]) for i in range(s)])
        scored = [(m[torch.arange(s), list(q)].mean().item(), q) for q in itertools.permutations(range(s))]
        v, q = (max if eval_func == "max" else min)(scored, key=lambda x: x[0])
        vals.append(v)
        perms.append(q)
    return torch.tensor(vals, dtype=torch.float64), torch.tensor(perms)


@pytest.mark.parametrize("name,kw,fn", INNER, ids=[f"{n}-{k}" for n, k, _ in INNER])
@pytest.mark.parametrize("speakers", [2, 4])
@pytest.mark.parametrize("noise,dc", [(0.8, 0.0), (1e-3, 0.0), (1e-2, 0.5)], ids=["noisy", "near-perfect", "dc"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
def test_fast_path_vs_brute_force(name, kw, fn, speakers, noise, dc, dtype):
    inner = getattr(A, name)(**kw)
    assert _pairwise_plan(inner) is not None
    p, t = _mixtures(3, speakers, 800, noise, dtype, seed=speakers, dc=dc)
    for eval_func in ("max", "min"):
        got_v, got_p = A.permutation_invariant_training(inner, eval_func=eval_func, per_example=True)(p, t)
        want_v, want_p = _brute(p, t, fn, eval_func)
        tol = 1e-9 if dtype == torch.float64 else 2e-3  # torchmetrics sums float32 in float32
        torch.testing.assert_close(got_v, want_v, rtol=tol, atol=tol)
        assert torch.equal(got_p, want_p)
        # the generic path (vmapped one-shot values of every pair) agrees as well
        generic = Metric(init=inner.init, update=inner.update, merge=inner.merge, finalize=inner.finalize,
                         name=inner.name)
        assert _pairwise_plan(generic) is None
        gen_v, gen_p = A.permutation_invariant_training(generic, eval_func=eval_func, per_example=True)(p, t)
        # float32: <p, t> from the Gram product vs vecdot: different float32 summation orders
        torch.testing.assert_close(got_v, gen_v, rtol=2e-5 if dtype == torch.float32 else 1e-12, atol=1e-9)
        assert torch.equal(got_p, gen_p)


def test_fast_path_many_speakers_hungarian():
    pytest.importorskip("scipy")
    p, t = _mixtures(2, 10, 300, 0.1, torch.float64, seed=7)
    v, perm = A.permutation_invariant_training(A.scale_invariant_signal_noise_ratio(), per_example=True)(p, t)
    tm_v, tm_p = F.permutation_invariant_training(p, t, F.scale_invariant_signal_noise_ratio)
    torch.testing.assert_close(v, tm_v.double(), rtol=1e-9, atol=1e-9)
    assert torch.equal(A.pit_permutate(p, perm), A.pit_permutate(p, tm_p))


def test_fast_path_is_differentiable_and_streams():
    p, t = _mixtures(4, 3, 200, 0.5, torch.float64)
    p.requires_grad_(True)
    pit = A.permutation_invariant_training(A.scale_invariant_signal_noise_ratio())
    pit(p, t).backward()
    assert p.grad is not None and torch.isfinite(p.grad).all()
    s = pit.init()
    s = pit.update(s, p[:1].detach(), t[:1])
    s = pit.update(s, p[1:].detach(), t[1:])
    torch.testing.assert_close(pit.finalize(s), pit(p.detach(), t), rtol=1e-12, atol=1e-12)
    want, _ = F.permutation_invariant_training(p.detach(), t, F.scale_invariant_signal_noise_ratio)
    np.testing.assert_allclose(pit(p.detach(), t).item(), want.mean().item(), rtol=1e-9)


def test_permutations_built_on_a_device_match_itertools():
    from fmetrics.audio.pit import _permutations, permutations_built_on

    for s in range(1, 7):
        want = torch.tensor(list(itertools.permutations(range(s)))).reshape(-1, s)
        assert torch.equal(_permutations(s, "cpu"), want)
        assert torch.equal(permutations_built_on(s, "cpu"), want)
