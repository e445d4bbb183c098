"""Pearson's contingency coefficient.

``C = sqrt(phi2 / (1 + phi2))`` with ``phi2 = chi2 / n``.
See `fmetrics.nominal._association` for the table conventions.
"""
from __future__ import annotations

from typing import Optional

import torch

from fmetrics.clustering._contingency import contingency_family
from fmetrics.metric import Metric
from fmetrics.nominal import _association
from fmetrics.nominal._inputs import NanStrategy, check_nan_options, prepare
from fmetrics.nominal._matrix import assemble, matrix_family
from fmetrics.recipe import factory

__all__ = ["pearsons_contingency_coefficient", "pearsons_contingency_coefficient_matrix"]

@factory
def pearsons_contingency_coefficient(*, nan_strategy: NanStrategy = "replace", nan_replace_value: Optional[float] = 0.0,
                                        num_categories: Optional[int] = None) -> Metric:
    """Pearson's contingency coefficient between two categorical variables.

    Args:
      nan_strategy: ``"replace"`` (default: NaN becomes ``nan_replace_value``)
        or ``"drop"`` (observations with a NaN in either variable are left out).
      nan_replace_value: the category NaN becomes under ``"replace"`` (default 0.0).
      num_categories: ``None`` (default) keeps the observations and builds the
        table in `finalize` (any category ids); an int ``K`` keeps dense int64
        tables (categories must be integers in ``[0, K)``): sum-mergeable.

    Inputs:
      ``update(state, preds, target)``: two categorical variables, 1-D tensors
      of category ids (float allowed, NaN handled by ``nan_strategy``), or 2-D
      one-hot / probability rows (their argmax).

    Returns:
      A float64 scalar in [0, 1] (NaN with a warning where undefined).

    Example::

        >>> preds = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
        >>> target = torch.tensor([0, 0, 1, 1, 2, 2, 1, 0])
        >>> fmetrics.pearsons_contingency_coefficient()(preds, target)
        tensor(0.7255, dtype=torch.float64)
    """
    check_nan_options("pearsons_contingency_coefficient", nan_strategy, nan_replace_value)
    fam = contingency_family("pearsons_contingency_coefficient", num_categories, prepare(nan_strategy, nan_replace_value),
                             key=("nominal", nan_strategy, nan_replace_value), allow_float=True)
    return fam.metric("pearsons_contingency_coefficient", lambda t: torch.tensor(_association.pearson_c(t), dtype=torch.float64),
                      higher_is_better=True, bounds=(0.0, 1.0))


@factory
def pearsons_contingency_coefficient_matrix(*, nan_strategy: NanStrategy = "replace",
                                               nan_replace_value: Optional[float] = 0.0, num_categories: Optional[int] = None) -> Metric:
    """Pearson's contingency coefficient between every pair of columns.

    Args:
      nan_strategy: ``"replace"`` (default: NaN becomes ``nan_replace_value``)
        or ``"drop"`` (observations with a NaN in either variable are left out).
      nan_replace_value: the category NaN becomes under ``"replace"`` (default 0.0).
      num_categories: ``None`` (default) keeps the observations and builds the
        table in `finalize` (any category ids); an int ``K`` keeps dense int64
        tables (categories must be integers in ``[0, K)``): sum-mergeable.

    Inputs:
      ``update(state, matrix)``: ``(N, V)`` categories of ``V >= 2`` variables (columns).

    Returns:
      A float64 ``(V, V)`` matrix with ones on the diagonal.

    Example::

        >>> m = torch.tensor([[0, 0, 1], [0, 0, 0], [1, 1, 1], [1, 1, 0], [2, 2, 1], [2, 2, 0]])
        >>> fmetrics.pearsons_contingency_coefficient_matrix()(m)[0]
        tensor([1.0000, 0.8165, 0.0000], dtype=torch.float64)
    """
    check_nan_options("pearsons_contingency_coefficient_matrix", nan_strategy, nan_replace_value)
    fam = matrix_family("pearsons_contingency_coefficient_matrix", nan_strategy, nan_replace_value, num_categories)
    return fam.metric("pearsons_contingency_coefficient_matrix", lambda pairs: assemble(pairs, lambda t: _association.pearson_c(t)),
                      higher_is_better=True, bounds=(0.0, 1.0))
