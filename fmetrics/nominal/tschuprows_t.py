"""Tschuprow's T: association of two categorical variables.

``T = sqrt(phi2 / sqrt((r - 1)(c - 1)))`` with ``phi2 = chi2 / n`` (Bergsma's bias correction by default).
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

__all__ = ["tschuprows_t", "tschuprows_t_matrix"]

@factory
def tschuprows_t(*, bias_correction: bool = True, nan_strategy: NanStrategy = "replace", nan_replace_value: Optional[float] = 0.0,
                    num_categories: Optional[int] = None) -> Metric:
    """Tschuprow's T between two categorical variables.

    Args:
      bias_correction: apply Bergsma's bias correction (and Yates' correction
        of chi2 for 2 x 2 tables); default ``True``.
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
        >>> fmetrics.tschuprows_t(bias_correction=False)(preds, target)
        tensor(0.7454, dtype=torch.float64)
    """
    check_nan_options("tschuprows_t", nan_strategy, nan_replace_value)
    fam = contingency_family("tschuprows_t", num_categories, prepare(nan_strategy, nan_replace_value),
                             key=("nominal", nan_strategy, nan_replace_value), allow_float=True)
    return fam.metric("tschuprows_t", lambda t: torch.tensor(_association.tschuprows_t(t, bias_correction), dtype=torch.float64),
                      higher_is_better=True, bounds=(0.0, 1.0))


@factory
def tschuprows_t_matrix(*, bias_correction: bool = True, nan_strategy: NanStrategy = "replace",
                           nan_replace_value: Optional[float] = 0.0, num_categories: Optional[int] = None) -> Metric:
    """Tschuprow's T between every pair of columns of a categorical matrix.

    Args:
      bias_correction: apply Bergsma's bias correction (and Yates' correction
        of chi2 for 2 x 2 tables); default ``True``.
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
        >>> fmetrics.tschuprows_t_matrix(bias_correction=False)(m)[0]
        tensor([1., 1., 0.], dtype=torch.float64)
    """
    check_nan_options("tschuprows_t_matrix", nan_strategy, nan_replace_value)
    fam = matrix_family("tschuprows_t_matrix", nan_strategy, nan_replace_value, num_categories)
    return fam.metric("tschuprows_t_matrix", lambda pairs: assemble(pairs, lambda t: _association.tschuprows_t(t, bias_correction)),
                      higher_is_better=True, bounds=(0.0, 1.0))
