"""`spearman_corrcoef`: Pearson's r of the average ranks."""
from __future__ import annotations

import warnings

import torch

from fmetrics.metric import Metric
from fmetrics.regression import _moments
from fmetrics.regression._pairs import average_ranks, pairs_metric
from fmetrics.recipe import factory


@factory
def spearman_corrcoef(*, num_outputs: int = 1) -> Metric:
    """Spearman's ``rho = r(rank(x), rank(y))`` with ties at their average rank (as SciPy).

    The state concatenates the data (O(total) memory); ranking happens once
    in `finalize`. A column with a NaN gives NaN; a constant column (or fewer
    than 2 samples) gives NaN and a warning (as SciPy; torchmetrics returns 0).

    Example::

        >>> fmetrics.spearman_corrcoef()(torch.tensor([2.5, 0.0, 2, 8]), torch.tensor([3, -0.5, 2, 7]))
        tensor(1., dtype=torch.float64)
    """
    name = "spearman_corrcoef"

    def finalize(x, y):
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

    return pairs_metric(name, num_outputs, finalize)
