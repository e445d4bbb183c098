"""`spearman_corrcoef`: Pearson's r of the average ranks."""
from __future__ import annotations

import warnings
from typing import Literal

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _moments, _paired, _pairs
from fmetrics.regression._pairs import average_ranks
from fmetrics.recipe import factory


@factory
def spearman_corrcoef(*, num_outputs: int = 1,
                      nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """Spearman's ``rho = r(rank(x), rank(y))`` with ties at their average rank (as SciPy).

    The state keeps copies of the data (O(total) memory); ranking happens
    once in `finalize`: float32 CPU data by exact integer ranks from packed
    sort keys (`_pairs.rank_comoments`: about 1.5x the state's bytes of
    extra memory), other data by torch sorts of the joined data. A constant
    column (or fewer than 2 samples) gives NaN and a warning (as SciPy;
    torchmetrics returns 0).

    Args:
      num_outputs: number of columns (default ``1``: inputs ``(N,)`` or ``(N, 1)``).
      nan_strategy: NaN/inf in preds or target: ``"error"`` (default),
        ``"warn"``/``"ignore"`` (the row is left out) or ``"disable"`` (a
        column holding one gives NaN).

    Inputs:
      ``update(state, preds, target)``: real tensors ``(N,)`` or ``(N, num_outputs)``.

    Returns:
      float64 tensor in ``[-1, 1]``, 0-d or ``(num_outputs,)``.

    Example::

        >>> fmetrics.spearman_corrcoef()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(1.0000, dtype=torch.float64)
    """
    name = "spearman_corrcoef"
    _inputs.check_nan_strategy(name, nan_strategy)
    fam = _paired.family(num_outputs, name, check=nan_strategy == "error")

    def finish(joined):
        xs, ys = _paired.chunks(name, joined, nan_strategy)
        nan = _paired.nan_columns(joined, xs, ys)
        cov, m2x, m2y, bad = _packed(xs, ys, nan) if _pairs.packable(xs, ys) else _joined(xs, ys, num_outputs)
        bad = bad & ~nan
        if bool(bad.any()):
            warnings.warn(f"{name}: preds or target is constant (or there are fewer than 2 samples) for "
                          f"{int(bad.sum())} of {bad.numel()} outputs; the correlation is undefined there and set "
                          "to NaN", UserWarning, stacklevel=3)
        rho = torch.clamp(cov / (torch.sqrt(m2x) * torch.sqrt(m2y)), -1, 1)
        rho = torch.where(bad | nan, torch.nan, rho)
        return rho[0] if num_outputs == 1 else rho

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=False, bounds=(-1.0, 1.0))


def _packed(xs: tuple, ys: tuple, skip: torch.Tensor):
    """``(C, Vx, Vy, constant)`` float64 ``(D,)`` of float32 CPU chunks from `_pairs.rank_comoments` (exact
    integers: ``C = sum c_x c_y``, ``V = sum c^2`` of the centred doubled ranks ``c = 2 rank - (n + 1)``), column
    by column; the ``skip`` columns (NaN) are not ranked."""
    stats = [(0, 0, 0) if skip[j] else _pairs.rank_comoments([c.numpy()[:, j] for c in xs],
                                                             [c.numpy()[:, j] for c in ys])
             for j in range(skip.shape[0])]
    cov, m2x, m2y = (torch.tensor([float(s[i]) for s in stats], dtype=torch.float64) for i in range(3))
    return cov, m2x, m2y, (m2x == 0) | (m2y == 0)


def _joined(xs: tuple, ys: tuple, width: int):
    """``(C, M2x, M2y, constant)`` float64 ``(D,)`` from the joined data's `_pairs.average_ranks` on its device:
    ``C = sum (rx - mean)(ry - mean)``, ``M2 = sum (r - mean)^2``."""
    x, y = _paired.join(xs, ys, width)
    rx, ry = average_ranks(x), average_ranks(y)
    n = torch.tensor(x.shape[0], device=x.device)
    (mx, cx), (my, cy) = _moments.centre_(rx), _moments.centre_(ry)
    m2x, m2y = (cx * cx).sum(0), (cy * cy).sum(0)
    bad = _moments.degenerate(n, mx, m2x) | _moments.degenerate(n, my, m2y)
    return (cx * cy).sum(0), m2x, m2y, bad
