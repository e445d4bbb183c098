"""What the model-based audio metrics (DNSMOS, NISQA) share: running the user's network, checking the
signals, and the ``nan_strategy`` screen of one signal input.

A network is a torch ``nn.Module`` (run through `fmetrics.networks.eval_view` under ``torch.no_grad()``:
the user's module is never switched to eval mode) or, for DNSMOS, an ONNX Runtime ``InferenceSession``
(anything with ``run(None, {name: array})`` and ``get_inputs()``): it runs on the host, so an update
with a session copies its inputs to the CPU (a host sync; not traceable).
"""
from __future__ import annotations


import torch

from fmetrics import validation
from fmetrics.audio._mean import finite_check
from fmetrics.networks import eval_view

NAN_STRATEGIES = ("error", "warn", "ignore", "disable")
RULE = "preds must be finite (no NaN or inf); pass nan_strategy='ignore' to leave such signals out"


def runner(name: str, arg: str, net):
    """``x -> output`` for an ``nn.Module`` or an ONNX session ``net`` (float32 in, float64 out)."""
    if isinstance(net, torch.nn.Module):
        view = eval_view(net, name, arg)

        def run(*xs):
            with torch.no_grad():
                return view(*xs).detach().to(torch.float64)
        return run
    if callable(getattr(net, "run", None)) and callable(getattr(net, "get_inputs", None)):
        def run_session(x):
            feed = {net.get_inputs()[0].name: x.detach().cpu().numpy()}
            return torch.from_numpy(net.run(None, feed)[0]).to(device=x.device, dtype=torch.float64)
        return run_session
    raise validation.fail(name, arg, "a torch nn.Module or an onnxruntime InferenceSession", type(net).__name__)


def signals(name: str, preds) -> torch.Tensor:
    """``preds`` ``(..., time)`` as ``(N, time)`` rows (metadata checks only)."""
    if not isinstance(preds, torch.Tensor):
        raise validation.fail(name, "preds", "a tensor", type(preds).__name__)
    if not preds.is_floating_point():
        raise validation.fail(name, "preds", "a real floating-point tensor of shape (..., time)",
                              f"dtype {preds.dtype}")
    if preds.dim() < 1 or preds.shape[-1] == 0:
        raise validation.fail(name, "preds", "signals of shape (..., time) with at least one sample",
                              f"shape {tuple(preds.shape)}")
    return preds.reshape(-1, preds.shape[-1])


def check_fs(name: str, fs) -> int:
    if isinstance(fs, bool) or not isinstance(fs, int) or fs <= 0:
        raise validation.fail(name, "fs", "a positive int (the sampling rate in Hz)", repr(fs))
    return fs


def check_strategy(name: str, nan_strategy) -> str:
    return validation.check_policy(name, "nan_strategy", nan_strategy, NAN_STRATEGIES)


def eager_check(name: str, nan_strategy: str):
    """The metric's ``check=`` for ``nan_strategy="error"``: raises quoting the non-finite values (CPU, eager)."""
    return finite_check(name) if nan_strategy == "error" else None


def screen(nan_strategy: str, rows: torch.Tensor):
    """``(ok, n)``: True per finite signal and the int64 count of non-finite entries; ``None`` where the update
    does not look (``"disable"``, or ``"error"`` where the eager check ran). A branch on policy, mode and
    device only: traceable."""
    if nan_strategy == "disable" or (nan_strategy == "error" and validation.eager_check_applies_to(rows)):
        return None
    bad = (~torch.isfinite(rows)).sum(-1)
    return bad == 0, bad.sum()


def warn_empty(name: str, count: torch.Tensor) -> None:
    """The empty-input warning of ``finalize`` (the value is NaN)."""
    if int(count) == 0:
        validation.warn_empty(name, stacklevel=3)


def add_scores(state, scores: torch.Tensor, screened):
    """``state`` (``total``, ``count``, ``nonfinite``) plus the per-signal ``scores`` ``(N, K)``; the signals
    `screen` left out add nothing but their non-finite count."""
    scores = scores.to(state.total.dtype)
    if screened is None:
        return type(state)(state.total + scores.sum(0), state.count + scores.shape[0], state.nonfinite)
    scores = torch.where(screened[0][:, None], scores, 0)
    return type(state)(state.total + scores.sum(0), state.count + validation.count(screened[0]),
                       state.nonfinite + screened[1])


def mean_scores(name: str, nan_strategy: str, state) -> torch.Tensor:
    """``finalize`` of an `add_scores` state: the mean per output, after the policy's report."""
    if nan_strategy in ("error", "warn"):
        validation.report(name, {RULE: state.nonfinite}, nan_strategy)
    warn_empty(name, state.count)
    return state.total / state.count
