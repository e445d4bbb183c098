"""The state of the ``*_matrix`` forms: every pair of columns of an ``[N, V]`` matrix of categories.

* ``num_categories`` given -- dense int64 tables ``[P, K, K]`` for the
  ``P = V (V - 1) / 2`` column pairs (sum-mergeable);
* otherwise the matrix itself as chunks; each pair's table is built in `finalize`.

For the pair ``(i, j)``, ``i < j``, column ``i`` plays ``preds`` and column
``j`` ``target`` (torchmetrics' orientation).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import torch

from fmetrics import validation
from fmetrics.clustering._contingency import _dense_ids, _dense_table, _off_grid
from fmetrics.family import Family
from fmetrics.state import cat_chunks

__all__ = ["matrix_family", "assemble"]


class MatrixChunks(NamedTuple):
    rows: tuple  # chunks [n, V]
    invalid: validation.Invalid  # infinite categories (deferred check)


class PairTables(NamedTuple):
    counts: torch.Tensor  # int64 [P, K, K]: counts[pair, target = column j, preds = column i]
    invalid: validation.Invalid


def _check(name: str, matrix) -> None:
    if not isinstance(matrix, torch.Tensor) or matrix.dim() != 2 or matrix.shape[1] < 2:
        raise validation.fail(name, "matrix", "a tensor of shape (N, V) with V >= 2 columns of categories",
                              tuple(matrix.shape) if isinstance(matrix, torch.Tensor) else type(matrix).__name__)


def matrix_family(name: str, nan_strategy: str, nan_replace_value, num_categories: Optional[int]) -> Family:
    replace = nan_strategy == "replace"

    def clean(m: torch.Tensor) -> torch.Tensor:
        """NaN replaced under "replace" (inf stays: it is rejected, not a category)."""
        return torch.where(m.isnan(), float(nan_replace_value), m) if replace and m.is_floating_point() else m

    def counted(m: torch.Tensor) -> torch.Tensor:
        """Entries that count (NaN is left out under "drop")."""
        return torch.ones_like(m, dtype=torch.bool) if replace or not m.is_floating_point() else ~m.isnan()

    if num_categories is None:
        rule = "categories must be finite (no inf; NaN follows nan_strategy)"

        def update(state, matrix):
            _check(name, matrix)
            m = clean(matrix.detach())
            dtype = torch.float64 if m.is_floating_point() else torch.int64
            bad = m.isinf() if m.is_floating_point() else torch.zeros(0, dtype=torch.bool, device=m.device)
            return MatrixChunks((m.to(dtype, copy=True),), validation.invalid_flag(state.invalid, bad, m))

        def merge(a, b):
            return MatrixChunks(a.rows + b.rows, validation.invalid_merge(a.invalid, b.invalid))

        def check(matrix):
            _check(name, matrix)
            if matrix.is_floating_point() and bool(matrix.isinf().any()):
                raise ValueError(f"{name}: {rule}; found {validation.quote(matrix[matrix.isinf()])}")

        def shared(state):
            validation.invalid_report(name, rule, state.invalid)
            m = cat_chunks(state.rows, torch.zeros(0, 0))
            if m.numel() == 0:
                return []
            columns = [_column_ids(m[:, c]) for c in range(m.shape[1])]  # each column renumbered once
            return [(i, j, _pair_table(columns[i], columns[j])) for i, j in _pairs(m.shape[1])]

        return Family(name="nominal_matrix", key=(nan_strategy, nan_replace_value),
                      init=lambda: MatrixChunks((), validation.invalid_init()), update=update, merge=merge,
                      check=check, reductions=MatrixChunks(rows="cat", invalid=None), shared=shared)

    if isinstance(num_categories, bool) or not isinstance(num_categories, int) or num_categories < 1:
        raise validation.fail(name, "num_categories", "a positive int or None", repr(num_categories))
    k = num_categories
    range_rule = f"categories must be whole numbers in [0, {k}) (num_categories={k})"

    def init():
        return PairTables(torch.zeros(0, k, k, dtype=torch.int64), validation.invalid_init())

    def update(state, matrix):
        _check(name, matrix)
        m = clean(matrix.detach())
        v = m.shape[1]
        i, j = torch.triu_indices(v, v, 1, device=m.device)
        xi, xj = m[:, i], m[:, j]
        bad = _off_grid(xi, k) | _off_grid(xj, k)
        keep = None
        if m.is_floating_point() and not replace:
            keep = ~(xi.isnan() | xj.isnan())
            bad = bad & keep
        good = ~bad if keep is None else keep & ~bad
        zero = torch.zeros((), dtype=m.dtype, device=m.device)
        pair = torch.arange(i.numel(), device=m.device)[None, :] * (k * k)
        flat = pair + torch.where(good, xj, zero).to(torch.int64) * k + torch.where(good, xi, zero).to(torch.int64)
        counts = state.counts if state.counts.shape[0] == i.numel() else state.counts.new_zeros(i.numel(), k, k)
        counts = counts.reshape(-1).index_add(0, flat.reshape(-1), good.reshape(-1).to(torch.int64))
        return PairTables(counts.reshape(-1, k, k), validation.invalid_flag(state.invalid, bad, torch.where(
            _off_grid(xi, k), xi, xj)))

    def merge(a, b):
        ca = a.counts if a.counts.shape[0] else b.counts.new_zeros(b.counts.shape)
        cb = b.counts if b.counts.shape[0] else a.counts.new_zeros(a.counts.shape)
        return PairTables(ca + cb, validation.invalid_merge(a.invalid, b.invalid))

    def check(matrix):
        _check(name, matrix)
        m = clean(matrix)
        bad = _off_grid(m, k) & counted(m)
        if bool(bad.any()):
            raise ValueError(f"{name}: {range_rule}; found {validation.quote(m[bad])}")

    def shared(state):
        validation.invalid_report(name, range_rule, state.invalid)
        p = state.counts.shape[0]
        v = int(round((1 + (1 + 8 * p) ** 0.5) / 2)) if p else 0
        return [(i, j, _dense_table(state.counts[n])) for n, (i, j) in enumerate(_pairs(v))]

    return Family(name="nominal_matrix_tables", key=(k, nan_strategy, nan_replace_value), init=init,
                  update=update, merge=merge, shared=shared, check=check,
                  reductions=PairTables(counts=None, invalid=None))


def _pairs(v: int) -> list:
    return [(i, j) for i in range(v) for j in range(i + 1, v)]


def _column_ids(x: torch.Tensor) -> tuple[torch.Tensor, int, Optional[torch.Tensor]]:
    """``(ids 0..L-1, L, NaN mask or None)``; NaN rows get id 0 and are masked out per pair."""
    nan = x.isnan() if x.is_floating_point() else None
    if nan is not None:
        if bool(nan.all()):
            return torch.zeros_like(x, dtype=torch.int64), 1, nan
        x = torch.where(nan, x[~nan].min(), x)
    ids, n = _dense_ids(x)
    return ids, n, nan


def _pair_table(col_i, col_j) -> torch.Tensor:
    """The table [categories of column j (target), categories of column i (preds)], empty rows/columns removed."""
    (pi, ci, nan_i), (tj, cj, nan_j) = col_i, col_j
    weights = None
    if nan_i is not None or nan_j is not None:
        drop = (nan_i if nan_i is not None else False) | (nan_j if nan_j is not None else False)
        weights = (~drop).to(torch.float64)
    flat = torch.bincount(tj * ci + pi, weights=weights, minlength=ci * cj).to(torch.float64)
    return _dense_table(flat.reshape(cj, ci))


def assemble(pairs: list, value: Callable[[torch.Tensor], float], symmetric: bool = True) -> torch.Tensor:
    """The ``[V, V]`` float64 matrix with ones on the diagonal from per-pair tables."""
    v = max((j for _, j, _ in pairs), default=0) + 1 if pairs else 0
    out = torch.eye(v, dtype=torch.float64)
    for i, j, t in pairs:
        out[i, j] = value(t)
        out[j, i] = out[i, j] if symmetric else value(t.T)
    return out
