"""`spearman_corrcoef`: Pearson's r of the average ranks."""
from __future__ import annotations

import warnings
from typing import Literal

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _inputs, _moments, _paired
from fmetrics.regression._pairs import average_ranks
from fmetrics.recipe import factory


@factory
def spearman_corrcoef(*, num_outputs: int = 1,
                      nan_strategy: Literal["error", "warn", "ignore", "disable"] = "error") -> Metric:
    """Spearman's ``rho = r(rank(x), rank(y))`` with ties at their average rank (as SciPy).

    The state concatenates copies of the data (O(total) memory); ranking
    happens once in `finalize`. A constant column (or fewer than 2 samples)
    gives NaN and a warning (as SciPy; torchmetrics returns 0).

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
        x, y = _paired.data(name, joined, nan_strategy)
        rx, ry = average_ranks(x), average_ranks(y)
        n = torch.tensor(x.shape[0], device=x.device)
        (mx, cx), (my, cy) = _moments.centre_(rx), _moments.centre_(ry)
        m2x, m2y = (cx * cx).sum(0), (cy * cy).sum(0)
        bad = _moments.degenerate(n, mx, m2x) | _moments.degenerate(n, my, m2y)
        nan = torch.isnan(x).any(0) | torch.isnan(y).any(0)
        bad = bad & ~nan
        if bool(bad.any()):
            warnings.warn(f"{name}: preds or target is constant (or there are fewer than 2 samples) for "
                          f"{int(bad.sum())} of {bad.numel()} outputs; the correlation is undefined there and set "
                          "to NaN", UserWarning, stacklevel=3)
        rho = torch.clamp((cx * cy).sum(0) / (torch.sqrt(m2x) * torch.sqrt(m2y)), -1, 1)
        rho = torch.where(bad | nan, torch.nan, rho)
        return rho[0] if num_outputs == 1 else rho

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=False, bounds=(-1.0, 1.0))
