"""Association of categorical variables: Cramér's V, Tschuprow's T, Pearson's C, Theil's U.

Each statistic comes as a pair metric (``update(state, preds, target)``) over
one contingency table and as a ``*_matrix`` metric over every pair of columns
of an ``(N, V)`` matrix. The formulas and table conventions are in
`fmetrics.nominal._association`; the states in `fmetrics.clustering._contingency`
and `fmetrics.nominal._matrix`.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from fmetrics.clustering._contingency import contingency_family
from fmetrics.metric import Metric
from fmetrics.nominal import _association
from fmetrics.nominal._inputs import NanStrategy, check_nan_options, prepare
from fmetrics.nominal._matrix import assemble, matrix_family
from fmetrics.recipe import factory

__all__ = ["cramers_v", "cramers_v_matrix", "tschuprows_t", "tschuprows_t_matrix",
           "pearsons_contingency_coefficient", "pearsons_contingency_coefficient_matrix", "theils_u",
           "theils_u_matrix"]

_BIAS = """bias_correction: apply Bergsma's bias correction (and Yates' correction
        of chi2 for 2 x 2 tables); default ``True``.
      """
_ARGS = """nan_strategy: ``"replace"`` (default: NaN becomes ``nan_replace_value``)
        or ``"drop"`` (observations with a NaN in either variable are left out).
      nan_replace_value: the category NaN becomes under ``"replace"`` (default 0.0).
      num_categories: ``None`` (default) keeps the observations and builds the
        table in `finalize` (any category ids); an int ``K`` keeps dense int64
        tables (categories must be integers in ``[0, K)``): sum-mergeable."""
_PAIR_IO = """Inputs:
      ``update(state, preds, target)``: two categorical variables, 1-D tensors
      of category ids (float allowed, NaN handled by ``nan_strategy``), or 2-D
      one-hot / probability rows (their argmax).

    Returns:
      A float64 scalar in [0, 1] (NaN with a warning where undefined)."""
_MATRIX_IO = """Inputs:
      ``update(state, matrix)``: ``(N, V)`` categories of ``V >= 2`` variables (columns).

    Returns:
      A float64 ``(V, V)`` matrix with ones on the diagonal."""


def _documented(bias: bool, matrix: bool):
    """Fills the shared Args / Inputs / Returns sections into a factory's docstring."""
    def deco(fn):
        fn.__doc__ = fn.__doc__.replace("{args}", (_BIAS if bias else "") + _ARGS).replace(
            "{io}", _MATRIX_IO if matrix else _PAIR_IO)
        return fn

    return deco


def _pair(name: str, value: Callable[[torch.Tensor], float], nan_strategy: str, nan_replace_value,
          num_categories: Optional[int]) -> Metric:
    check_nan_options(name, nan_strategy, nan_replace_value)
    fam = contingency_family(name, num_categories, prepare(nan_strategy, nan_replace_value),
                             key=("nominal", nan_strategy, nan_replace_value), allow_float=True,
                             arg="num_categories", what="categories")
    return fam.metric(name, lambda t: torch.tensor(value(t), dtype=torch.float64), higher_is_better=True,
                      bounds=(0.0, 1.0))


def _matrix(name: str, value: Callable[[torch.Tensor], float], nan_strategy: str, nan_replace_value,
            num_categories: Optional[int], symmetric: bool = True) -> Metric:
    check_nan_options(name, nan_strategy, nan_replace_value)
    fam = matrix_family(name, nan_strategy, nan_replace_value, num_categories)
    return fam.metric(name, lambda pairs: assemble(pairs, value, symmetric=symmetric), higher_is_better=True,
                      bounds=(0.0, 1.0))


@factory
@_documented(bias=True, matrix=False)
def cramers_v(*, bias_correction: bool = True, nan_strategy: NanStrategy = "replace",
              nan_replace_value: Optional[float] = 0.0, num_categories: Optional[int] = None) -> Metric:
    """Cramér's V between two categorical variables (0: independent, 1: one determines the other).

    ``V = sqrt(phi2 / min(r - 1, c - 1))`` with ``phi2 = chi2 / n``.

    Args:
      {args}

    {io}

    Example::

        >>> preds = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
        >>> target = torch.tensor([0, 0, 1, 1, 2, 2, 1, 0])
        >>> fmetrics.cramers_v(bias_correction=False)(preds, target)  # scipy association(method="cramer")
        tensor(0.7454, dtype=torch.float64)
    """
    return _pair("cramers_v", lambda t: _association.cramers_v(t, bias_correction), nan_strategy,
                 nan_replace_value, num_categories)


@factory
@_documented(bias=True, matrix=True)
def cramers_v_matrix(*, bias_correction: bool = True, nan_strategy: NanStrategy = "replace",
                     nan_replace_value: Optional[float] = 0.0, num_categories: Optional[int] = None) -> Metric:
    """Cramér's V between every pair of columns of a categorical matrix.

    Args:
      {args}

    {io}

    Example::

        >>> m = torch.tensor([[0, 0, 1], [0, 0, 0], [1, 1, 1], [1, 1, 0], [2, 2, 1], [2, 2, 0]])
        >>> fmetrics.cramers_v_matrix(bias_correction=False)(m)[0]  # column 1 copies column 0; column 2 is independent
        tensor([1., 1., 0.], dtype=torch.float64)
    """
    return _matrix("cramers_v_matrix", lambda t: _association.cramers_v(t, bias_correction, "cramers_v_matrix"),
                   nan_strategy, nan_replace_value, num_categories)


@factory
@_documented(bias=True, matrix=False)
def tschuprows_t(*, bias_correction: bool = True, nan_strategy: NanStrategy = "replace",
                 nan_replace_value: Optional[float] = 0.0, num_categories: Optional[int] = None) -> Metric:
    """Tschuprow's T between two categorical variables.

    ``T = sqrt(phi2 / sqrt((r - 1)(c - 1)))`` with ``phi2 = chi2 / n``.

    Args:
      {args}

    {io}

    Example::

        >>> preds = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
        >>> target = torch.tensor([0, 0, 1, 1, 2, 2, 1, 0])
        >>> fmetrics.tschuprows_t(bias_correction=False)(preds, target)  # scipy association(method="tschuprow")
        tensor(0.7454, dtype=torch.float64)
    """
    return _pair("tschuprows_t", lambda t: _association.tschuprows_t(t, bias_correction), nan_strategy,
                 nan_replace_value, num_categories)


@factory
@_documented(bias=True, matrix=True)
def tschuprows_t_matrix(*, bias_correction: bool = True, nan_strategy: NanStrategy = "replace",
                        nan_replace_value: Optional[float] = 0.0, num_categories: Optional[int] = None) -> Metric:
    """Tschuprow's T between every pair of columns of a categorical matrix.

    Args:
      {args}

    {io}

    Example::

        >>> m = torch.tensor([[0, 0, 1], [0, 0, 0], [1, 1, 1], [1, 1, 0], [2, 2, 1], [2, 2, 0]])
        >>> fmetrics.tschuprows_t_matrix(bias_correction=False)(m)[0]
        tensor([1., 1., 0.], dtype=torch.float64)
    """
    return _matrix("tschuprows_t_matrix",
                   lambda t: _association.tschuprows_t(t, bias_correction, "tschuprows_t_matrix"), nan_strategy,
                   nan_replace_value, num_categories)


@factory
@_documented(bias=False, matrix=False)
def pearsons_contingency_coefficient(*, nan_strategy: NanStrategy = "replace",
                                     nan_replace_value: Optional[float] = 0.0,
                                     num_categories: Optional[int] = None) -> Metric:
    """Pearson's contingency coefficient between two categorical variables.

    ``C = sqrt(phi2 / (1 + phi2))`` with ``phi2 = chi2 / n``.

    Args:
      {args}

    {io}

    Example::

        >>> preds = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
        >>> target = torch.tensor([0, 0, 1, 1, 2, 2, 1, 0])
        >>> fmetrics.pearsons_contingency_coefficient()(preds, target)  # scipy association(method="pearson")
        tensor(0.7255, dtype=torch.float64)
    """
    return _pair("pearsons_contingency_coefficient", _association.pearson_c, nan_strategy, nan_replace_value,
                 num_categories)


@factory
@_documented(bias=False, matrix=True)
def pearsons_contingency_coefficient_matrix(*, nan_strategy: NanStrategy = "replace",
                                            nan_replace_value: Optional[float] = 0.0,
                                            num_categories: Optional[int] = None) -> Metric:
    """Pearson's contingency coefficient between every pair of columns of a categorical matrix.

    Args:
      {args}

    {io}

    Example::

        >>> m = torch.tensor([[0, 0, 1], [0, 0, 0], [1, 1, 1], [1, 1, 0], [2, 2, 1], [2, 2, 0]])
        >>> fmetrics.pearsons_contingency_coefficient_matrix()(m)[0]  # sqrt(2/3) for a copied 3-category column
        tensor([1.0000, 0.8165, 0.0000], dtype=torch.float64)
    """
    return _matrix("pearsons_contingency_coefficient_matrix",
                   lambda t: _association.pearson_c(t, "pearsons_contingency_coefficient_matrix"), nan_strategy,
                   nan_replace_value, num_categories)


@factory
@_documented(bias=False, matrix=False)
def theils_u(*, nan_strategy: NanStrategy = "replace", nan_replace_value: Optional[float] = 0.0,
             num_categories: Optional[int] = None) -> Metric:
    """Theil's U (uncertainty coefficient): the fraction of the entropy of ``preds`` explained by ``target``.

    ``U = (H(preds) - H(preds | target)) / H(preds)``; 0 when ``preds`` has one category. Asymmetric.

    Args:
      {args}

    {io}

    Example::

        >>> preds = torch.tensor([0, 0, 1, 1, 2, 2, 0, 1])
        >>> target = torch.tensor([0, 0, 1, 1, 2, 2, 1, 0])
        >>> fmetrics.theils_u()(preds, target)  # (H(X) - H(X|Y)) / H(X) = (1.0822 - 0.4774) / 1.0822
        tensor(0.5589, dtype=torch.float64)
    """
    return _pair("theils_u", _association.theils_u, nan_strategy, nan_replace_value, num_categories)


@factory
@_documented(bias=False, matrix=True)
def theils_u_matrix(*, nan_strategy: NanStrategy = "replace", nan_replace_value: Optional[float] = 0.0,
                    num_categories: Optional[int] = None) -> Metric:
    """Theil's U for every ordered pair of columns (``[i, j]``: column i explained by column j; asymmetric).

    Args:
      {args}

    {io}

    Example::

        >>> m = torch.tensor([[0, 0, 1], [0, 0, 0], [1, 1, 1], [1, 1, 0], [2, 2, 1], [2, 2, 0]])
        >>> fmetrics.theils_u_matrix()(m)[0]
        tensor([1., 1., 0.], dtype=torch.float64)
    """
    return _matrix("theils_u_matrix", lambda t: _association.theils_u(t, "theils_u_matrix"), nan_strategy,
                   nan_replace_value, num_categories, symmetric=False)
