"""Cluster accuracy: accuracy under the best one-to-one mapping of clusters to classes.

``acc = max_sigma sum_k n_{k, sigma(k)} / N`` over the ``num_classes x
num_classes`` contingency table, the mapping found by the Hungarian method in
`finalize`.
"""
from __future__ import annotations

import numpy as np
import torch

from fmetrics import validation
from fmetrics.clustering._assignment import max_weight_assignment
from fmetrics.clustering._contingency import contingency_family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["cluster_accuracy"]


@factory
def cluster_accuracy(*, num_classes: int) -> Metric:
    """Accuracy of cluster labels after mapping each cluster to one class (Hungarian matching).

    Args:
      num_classes: number of classes and of clusters ``K``; labels must be in
        ``[0, K)``. The state is a dense ``K x K`` int64 table (sum-mergeable).

    Inputs:
      ``update(state, preds, target)``: predicted cluster ids and class labels, 1-D integer tensors.

    Returns:
      A float64 scalar in [0, 1] (NaN, with a warning, before any sample).

    Example::

        >>> m = fmetrics.cluster_accuracy(num_classes=3)
        >>> m(torch.tensor([2, 2, 0, 0, 1]), torch.tensor([0, 0, 1, 1, 1]))
        tensor(0.8000, dtype=torch.float64)
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise validation.fail("cluster_accuracy", "num_classes", "a positive int", repr(num_classes))
    fam = contingency_family("cluster_accuracy", num_classes, arg="num_classes")

    def finish(table: torch.Tensor) -> torch.Tensor:
        n = float(table.sum())
        if n == 0:
            import warnings

            warnings.warn("cluster_accuracy: no samples; the value is NaN", UserWarning, stacklevel=3)
            return torch.tensor(float("nan"), dtype=torch.float64, device=table.device)
        side = max(table.shape)
        square = np.zeros((side, side))
        square[: table.shape[0], : table.shape[1]] = table.cpu().numpy()
        col = max_weight_assignment(square)
        # the assignment is a sequential algorithm on the (k x k) table's host copy; the value goes back
        return torch.tensor(square[np.arange(side), col].sum() / n, dtype=torch.float64, device=table.device)

    return fam.metric("cluster_accuracy", finish, higher_is_better=True, bounds=(0.0, 1.0))
