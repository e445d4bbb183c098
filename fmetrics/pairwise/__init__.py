"""Pairwise similarities and distances between the rows of two matrices (stateless functions).

As in ``torchmetrics.functional.pairwise``: ``f(x, y=None, reduction=None,
zero_diagonal=None)`` returns the ``[N, M]`` matrix between the rows of ``x``
``[N, d]`` and ``y`` ``[M, d]`` (``y = x`` when omitted, with the diagonal
zeroed unless ``zero_diagonal=False``), reduced over its last axis by
``reduction="mean" | "sum"``. These are plain functions, not metrics: there is
nothing to accumulate. Computation is in float64 (the distance matrix of
float32 inputs through a float32 Gram matrix loses digits to cancellation);
the result keeps the input's floating dtype, as torchmetrics does.
"""
from __future__ import annotations

from typing import Literal, Optional

import torch

from fmetrics import validation

__all__ = [
    "pairwise_cosine_similarity",
    "pairwise_euclidean_distance",
    "pairwise_linear_similarity",
    "pairwise_manhattan_distance",
    "pairwise_minkowski_distance",
]

Reduction = Optional[Literal["mean", "sum", "none"]]


_ARGS = """Args:
      x: ``[N, d]`` tensor, one row a point (any real dtype).
      y: ``[M, d]`` tensor, or ``None`` (default) for ``y = x``.
      reduction: ``None`` / ``"none"`` (default: the ``[N, M]`` matrix),
        ``"mean"`` or ``"sum"`` over its last axis (``[N]``).
      zero_diagonal: zero the diagonal; ``None`` (default) does when ``y`` is
        omitted.{extra}

    Returns:
      The matrix (or its reduction) in the input's floating dtype (computed in float64)."""


def _documented(extra: str = ""):
    """Fills a function's ``{args}`` docstring line with the arguments every pairwise function shares."""
    def deco(fn):
        if fn.__doc__:  # None under python -OO
            fn.__doc__ = fn.__doc__.replace("{args}", _ARGS.format(extra=extra))
        return fn
    return deco


def _inputs(name: str, x, y, zero_diagonal):
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise validation.fail(name, "x", "a 2-D tensor [N, d]",
                              tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__)
    if y is None:
        y, zero = x, True if zero_diagonal is None else zero_diagonal
    else:
        if not isinstance(y, torch.Tensor) or y.dim() != 2 or y.shape[1] != x.shape[1]:
            raise validation.fail(name, "y", f"a 2-D tensor [M, {x.shape[1]}] (the width of x)",
                                  tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__)
        zero = False if zero_diagonal is None else zero_diagonal
    dtype = x.dtype if x.is_floating_point() else torch.get_default_dtype()
    return x.to(torch.float64), y.to(torch.float64), zero, dtype


def _finish(name: str, d: torch.Tensor, zero: bool, reduction, dtype) -> torch.Tensor:
    if zero:
        d = d.clone()
        d.fill_diagonal_(0)
    if reduction == "mean":
        d = d.mean(-1)
    elif reduction == "sum":
        d = d.sum(-1)
    elif reduction not in (None, "none"):
        raise validation.fail(name, "reduction", "'mean', 'sum', 'none' or None", repr(reduction))
    return d.to(dtype)


@_documented()
def pairwise_cosine_similarity(x: torch.Tensor, y: Optional[torch.Tensor] = None, reduction: Reduction = None,
                               zero_diagonal: Optional[bool] = None) -> torch.Tensor:
    """``s_ij = <x_i, y_j> / (|x_i| |y_j|)``.

    {args}

    Example::

        >>> fmetrics.pairwise_cosine_similarity(torch.tensor([[1., 0.], [1., 1.]]), torch.tensor([[0., 2.]]))
        tensor([[0.0000],
                [0.7071]])
    """
    a, b, zero, dtype = _inputs("pairwise_cosine_similarity", x, y, zero_diagonal)
    a = a / torch.linalg.vector_norm(a, dim=1, keepdim=True)
    b = b / torch.linalg.vector_norm(b, dim=1, keepdim=True)
    return _finish("pairwise_cosine_similarity", a @ b.T, zero, reduction, dtype)


@_documented()
def pairwise_linear_similarity(x: torch.Tensor, y: Optional[torch.Tensor] = None, reduction: Reduction = None,
                               zero_diagonal: Optional[bool] = None) -> torch.Tensor:
    """``s_ij = <x_i, y_j>``.

    {args}

    Example::

        >>> fmetrics.pairwise_linear_similarity(torch.tensor([[1., 2.], [3., 4.]]), torch.tensor([[1., 1.]]))
        tensor([[3.],
                [7.]])
    """
    a, b, zero, dtype = _inputs("pairwise_linear_similarity", x, y, zero_diagonal)
    return _finish("pairwise_linear_similarity", a @ b.T, zero, reduction, dtype)


@_documented()
def pairwise_euclidean_distance(x: torch.Tensor, y: Optional[torch.Tensor] = None, reduction: Reduction = None,
                                zero_diagonal: Optional[bool] = None) -> torch.Tensor:
    """``d_ij = |x_i - y_j|_2``.

    {args}

    Example::

        >>> fmetrics.pairwise_euclidean_distance(torch.tensor([[0., 0.], [3., 4.]]))
        tensor([[0., 5.],
                [5., 0.]])
    """
    a, b, zero, dtype = _inputs("pairwise_euclidean_distance", x, y, zero_diagonal)
    return _finish("pairwise_euclidean_distance", torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
                   zero, reduction, dtype)


@_documented()
def pairwise_manhattan_distance(x: torch.Tensor, y: Optional[torch.Tensor] = None, reduction: Reduction = None,
                                zero_diagonal: Optional[bool] = None) -> torch.Tensor:
    """``d_ij = |x_i - y_j|_1``.

    {args}

    Example::

        >>> fmetrics.pairwise_manhattan_distance(torch.tensor([[0., 0.], [3., 4.]]))
        tensor([[0., 7.],
                [7., 0.]])
    """
    a, b, zero, dtype = _inputs("pairwise_manhattan_distance", x, y, zero_diagonal)
    return _finish("pairwise_manhattan_distance", torch.cdist(a, b, p=1.0), zero, reduction, dtype)


@_documented("\n      exponent: the ``p`` of the distance, a float >= 1 (default 2).")
def pairwise_minkowski_distance(x: torch.Tensor, y: Optional[torch.Tensor] = None, exponent: float = 2,
                                reduction: Reduction = None, zero_diagonal: Optional[bool] = None) -> torch.Tensor:
    """``d_ij = (sum_k |x_ik - y_jk|^p)^(1/p)`` with ``p = exponent >= 1``.

    {args}

    Example::

        >>> fmetrics.pairwise_minkowski_distance(torch.tensor([[0., 0.], [3., 4.]]), exponent=3)
        tensor([[0.0000, 4.4979],
                [4.4979, 0.0000]])
    """
    if isinstance(exponent, bool) or not isinstance(exponent, (int, float)) or exponent < 1:
        raise validation.fail("pairwise_minkowski_distance", "exponent", "a number >= 1", repr(exponent))
    a, b, zero, dtype = _inputs("pairwise_minkowski_distance", x, y, zero_diagonal)
    return _finish("pairwise_minkowski_distance", torch.cdist(a, b, p=float(exponent)), zero, reduction, dtype)
