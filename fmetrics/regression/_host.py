"""Small CPU batches summed in numpy: the per-update overhead path of MSE, MAE, R², explained variance.

A batch of a few hundred entries costs its update almost nothing in arithmetic
and ~2 µs per torch operation in dispatch; numpy's ufuncs dispatch in under
1 µs and cast float32 to float64 inside the loop. So in eager mode, on CPU,
for batches of at most `LIMIT` entries per input, the batch's sums are
computed in numpy, in the dtype the torch path would use (float64, or the
inputs' float32 with ``exact=False``), and only the state's new fields are
torch operations. Under compile,
vmap, autograd (one-shot calls of differentiable metrics), on accelerators
and for larger batches the torch path runs; both give the same value up to
float64 rounding (tests/test_regression_host.py).

Example (16 x 16 batches, 1 thread): R² 62 -> 30 µs an update, MSE 23 -> 14 µs
(docs/benchmarks.md, "Exact or fast").
"""
from __future__ import annotations

import numpy as np
import torch

from fmetrics.regression import _inputs

LIMIT = 8192  # entries per input; above it torch's vectorized kernels win
DTYPES = (torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.int16, torch.int8,
          torch.uint8)


def applies(x: torch.Tensor, y: torch.Tensor, acc: torch.Tensor) -> bool:
    """Whether the batch ``(x, y)`` takes the numpy path (state field ``acc`` float64 on CPU)."""
    return (x.numel() <= LIMIT and x.dtype in DTYPES and y.dtype in DTYPES and acc.dtype == torch.float64
            and acc.is_cpu and not (x.requires_grad or y.requires_grad)
            and not _inputs.deferred(x, y))


NUMPY = {torch.float32: np.float32, torch.float64: np.float64}


def values(p: torch.Tensor, t: torch.Tensor, dtype: torch.dtype, fn, direct=None) -> np.ndarray:
    """``f(p, t)`` per element in ``dtype`` (float64 / float32) as a numpy array: ``direct(p, t)`` (one pass) for
    inputs of that dtype, else ``fn(p - t, p, t)`` with ``p - t`` one torch subtraction, or numpy's for a cast
    (inside its loop: one call, not three)."""
    if p.dtype == dtype and t.dtype == dtype:
        return (direct(p, t) if direct is not None else fn(torch.sub(p, t), p, t)).numpy()
    with np.errstate(all="ignore"):  # inf - inf: raised or propagated by the caller
        d = torch.from_numpy(np.subtract(p.numpy(), t.numpy(), dtype=NUMPY[dtype]))
    return fn(d, p, t).numpy()


def shifted(x: torch.Tensor, y: torch.Tensor, residual: bool, n: int, mean: torch.Tensor, dtype: torch.dtype):
    """``(k, z)``: ``z`` the ``(2, N, D)`` stack of ``x`` and ``y`` (``y - x`` with ``residual``) in ``dtype``
    less the shift ``k`` (``(2, D)``: the state's ``mean``, or the batch's first row when ``n == 0``; in
    ``dtype``)."""
    xs = x.numpy()
    z = np.empty((2, *xs.shape), dtype=NUMPY[dtype])
    z[0] = xs
    if residual:
        np.subtract(y.numpy(), xs, out=z[1], dtype=z.dtype)
    else:
        z[1] = y.numpy()
    k = mean.numpy().astype(z.dtype, copy=False) if n > 0 else z[:, 0].copy()
    z -= k[:, None]
    return k, z
