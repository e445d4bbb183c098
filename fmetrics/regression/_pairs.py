"""Ranking helpers of the rank correlations (`spearman_corrcoef`, `kendall_rank_corrcoef`).

Their state (the concatenated data) is the family in `fmetrics.regression._paired`.
"""
from __future__ import annotations

import numpy as np
import torch

from fmetrics import _keys


def runs(sorted_x: torch.Tensor) -> torch.Tensor:
    """Bool ``(N, D)``: True where a run of equal values starts in each sorted column."""
    start = torch.ones_like(sorted_x, dtype=torch.bool)
    start[1:] = sorted_x[1:] != sorted_x[:-1]
    return start


def average_ranks(x: torch.Tensor) -> torch.Tensor:
    """Column-wise float64 ranks 1..N of ``(N, D)`` ``x``, ties sharing their average rank (SciPy's ``rankdata``).

    float32 CPU columns take `_packed_ranks` (one vectorized integer sort on the
    host); other inputs one stable torch sort on their device.
    """
    n, d = x.shape
    if x.dtype == torch.float32 and x.device.type == "cpu" and 0 < n < 2**32:
        return torch.from_numpy(np.stack([_packed_ranks(c) for c in x.detach().numpy().T], 1))
    sorted_x, order = torch.sort(x, dim=0, stable=True)
    group = torch.cumsum(runs(sorted_x), 0) - 1 + torch.arange(d, device=x.device) * n  # unique per column
    pos = torch.arange(n, device=x.device, dtype=torch.float64)[:, None].expand(n, d).reshape(-1)
    flat = group.reshape(-1)
    first = torch.full((n * d,), float(n), dtype=torch.float64, device=x.device).scatter_reduce(
        0, flat, pos, "amin")
    last = torch.zeros(n * d, dtype=torch.float64, device=x.device).scatter_reduce(0, flat, pos, "amax")
    avg = ((first + last) / 2 + 1)[flat].reshape(n, d)
    return torch.empty_like(avg).scatter_(0, order, avg)


def _packed_ranks(column: np.ndarray) -> np.ndarray:
    """Average ranks of a float32 column from one sort of int64 keys ``(ordered value bits << 32) | index``.

    The IEEE bits with the magnitude bits of negatives flipped order like the
    values (``+ 0`` folds -0.0 into +0.0; NaN sorts last, as in torch), so the
    sorted keys give the order (low half) and the runs of equal values (high
    half) without an argsort. Numpy's integer sort is vectorized (~5x a stable torch argsort).
    """
    n = column.shape[0]
    keys = _keys.ascending32(column)  # fmetrics._keys: -0.0 == +0.0, NaN last
    _keys.pack_into(keys, [(keys, None), (np.arange(n, dtype=np.int64), 32)])
    keys.sort()
    order = _keys.field(keys, 0, 32)
    values = np.right_shift(keys, 32, out=keys)  # the value field in place (bounded memory)
    start = np.concatenate(([True], values[1:] != values[:-1]))
    ranks = np.empty(n)
    if np.count_nonzero(start) == n:  # no ties: the ranks are the positions
        ranks[order] = np.arange(1, n + 1, dtype=np.float64)
        return ranks
    bounds = np.append(np.flatnonzero(start), n)
    ranks[order] = np.repeat((bounds[:-1] + bounds[1:] + 1) / 2.0, np.diff(bounds))
    return ranks
