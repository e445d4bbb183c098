"""`perceptual_evaluation_speech_quality` through the ``pesq`` package (ITU-T P.862; a host-input metric)."""
from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from fmetrics import validation
from fmetrics.audio._mean import NanStrategy, check_choice, per_example_mean, signal_pair
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["perceptual_evaluation_speech_quality"]


def _backend():
    try:
        import pesq
    except ModuleNotFoundError:
        raise ModuleNotFoundError("perceptual_evaluation_speech_quality needs pesq: pip install pesq (in a "
                                  "checkout of this repository: pip install -e '.[audio]')") from None
    return pesq


@factory
def perceptual_evaluation_speech_quality(*, fs: Literal[8000, 16000], mode: Literal["wb", "nb"],
                                         n_processes: int = 1, per_example: bool = False,
                                         nan_strategy: NanStrategy = "error") -> Metric:
    """PESQ (ITU-T P.862 MOS-LQO) of each example from the ``pesq`` package, averaged over examples.

    A host-input metric (DESIGN §2.5): ``update`` copies the signals to the
    host and calls the C library once per example; the state holds only a
    float64 sum and an int64 count (or the values), so it merges and reduces
    across ranks like any metric. Values are the ``pesq`` package's, identical.

    Args:
      fs: sampling rate, 8000 or 16000 (Hz).
      mode: ``"wb"`` (wide band, needs ``fs=16000``) or ``"nb"`` (narrow band).
      n_processes: worker processes for ``pesq.pesq_batch`` (default 1: in process).
      per_example: ``False`` (default): the mean over all examples seen;
        ``True``: every example's value, concatenated along the first axis.
      nan_strategy: NaN / inf in ``preds`` or ``target``: ``"error"`` (default:
        raised by ``update``, quoting the values, the state untouched; inputs
        off the CPU or under ``validation.mode("deferred")``: counted and raised
        by ``finalize``), ``"warn"`` / ``"ignore"`` (the example is left out,
        with / without a warning from ``finalize``) or ``"disable"`` (the
        example's value is NaN). ``pesq`` is never called on such an example.

    Inputs:
      ``update(state, preds, target)``: real floating tensors of one shape
      ``(..., time)`` (degraded and reference speech).

    Returns:
      A float64 0-d tensor (or the per-example values).

    Raises:
      ModuleNotFoundError: without the ``pesq`` package (``pip install pesq``).
      ValueError: from ``update`` when ``pesq`` cannot score an example (e.g.
        no utterance detected in silence), naming the example; for a
        zero-length signal; for NaN / inf per ``nan_strategy``.

    Example::

        >>> import math
        >>> t = torch.arange(16000) / 16000
        >>> target = torch.sin(2 * math.pi * 440 * t) * torch.sin(2 * math.pi * 3 * t)
        >>> pesq16 = fmetrics.perceptual_evaluation_speech_quality(fs=16000, mode="wb")
        >>> round(float(pesq16(target[None], target[None])), 2)
        4.64
    """
    name = "perceptual_evaluation_speech_quality"
    check_choice(name, "fs", fs, (8000, 16000))
    check_choice(name, "mode", mode, ("wb", "nb"))
    if mode == "wb" and fs != 16000:
        raise validation.fail(name, "fs", "16000 with mode='wb'", fs)
    if isinstance(n_processes, bool) or not isinstance(n_processes, int) or n_processes < 1:
        raise validation.fail(name, "n_processes", "a positive int", repr(n_processes))
    _backend()

    def values(preds, target):
        signal_pair(name, preds, target)
        backend = _backend()
        shape = preds.shape[:-1]
        p = preds.detach().reshape(-1, preds.shape[-1]).cpu().double().numpy()
        t = target.detach().reshape(-1, target.shape[-1]).cpu().double().numpy()
        scored = np.flatnonzero(np.isfinite(p).all(-1) & np.isfinite(t).all(-1))  # the others stay NaN
        out = np.full(len(p), np.nan)
        if n_processes > 1 and len(scored) > 1:
            out[scored] = backend.pesq_batch(fs, t[scored], p[scored], mode, n_processor=n_processes,
                                             on_error=backend.PesqError.RETURN_VALUES)
        else:
            for i in scored:
                try:
                    out[i] = backend.pesq(fs, t[i], p[i], mode)
                except Exception as err:  # noqa: BLE001 - the C library's errors, re-raised with context
                    raise ValueError(f"{name}: pesq could not score example {i} of this batch: "
                                     f"{type(err).__name__}: {err}") from None
        if np.any(out < -1):  # pesq_batch's error codes
            raise ValueError(f"{name}: pesq could not score examples {np.flatnonzero(out < -1).tolist()} "
                             "of this batch (e.g. no utterance detected)")
        return torch.from_numpy(out).reshape(shape).to(preds.device)

    return per_example_mean(name, values, per_example, ("pesq", fs, mode), nan_strategy, host_input=True,
                            higher_is_better=True, is_differentiable=False, bounds=(-0.5, 4.5))
