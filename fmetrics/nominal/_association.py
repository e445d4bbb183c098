"""Association statistics of one contingency table (float64, empty rows and columns removed).

Rows are the target's categories, columns the prediction's (torchmetrics'
orientation). With ``n`` observations, ``r x c`` table and Pearson's
``chi2`` (Yates-corrected when ``bias_correction`` and one degree of freedom)::

    phi2       = chi2 / n
    Cramér's V = sqrt(phi2 / min(r - 1, c - 1))
    Tschuprow  = sqrt(phi2 / sqrt((r - 1)(c - 1)))
    Pearson C  = sqrt(phi2 / (1 + phi2))
    Theil's U  = (H(preds) - H(preds | target)) / H(preds)

With ``bias_correction`` V and T use Bergsma's (2013) corrected ``phi2``,
``r`` and ``c``: ``phi2~ = max(0, phi2 - (r-1)(c-1)/(n-1))``,
``r~ = r - (r-1)^2/(n-1)``, ``c~ = c - (c-1)^2/(n-1)``.
"""
from __future__ import annotations

import math
import warnings

import torch

__all__ = ["chi_squared", "cramers_v", "tschuprows_t", "pearson_c", "theils_u"]

_NAN = float("nan")


def chi_squared(t: torch.Tensor, bias_correction: bool) -> float:
    expected = t.sum(1, keepdim=True) * t.sum(0, keepdim=True) / t.sum()
    dof = t.numel() - sum(t.shape) + t.dim() - 1
    if dof == 0:
        return 0.0
    if dof == 1 and bias_correction:
        diff = expected - t
        t = t + diff.sign() * torch.minimum(torch.full_like(diff, 0.5), diff.abs())
    return float(((t - expected) ** 2 / expected).sum())


def _phi2(t: torch.Tensor, bias_correction: bool) -> tuple[float, int, int, float]:
    n = float(t.sum())
    r, c = t.shape
    return chi_squared(t, bias_correction) / n, r, c, n


def _empty(name: str, t: torch.Tensor) -> bool:
    if t.numel() == 0:
        warnings.warn(f"{name}: no observations; the value is NaN", UserWarning, stacklevel=4)
        return True
    return False


def _one_observation(name: str, t: torch.Tensor) -> bool:
    """Warns (and returns True) for a single observation: the bias correction divides by ``n - 1 = 0``."""
    if float(t.sum()) < 2:
        warnings.warn(f"{name}: the bias correction needs at least 2 observations, got 1; the value is NaN",
                      UserWarning, stacklevel=4)
        return True
    return False


def _one_category(name: str, r: int, c: int) -> bool:
    """Warns (and returns True) when a variable has one category: the normalizer ``r - 1`` or ``c - 1`` is 0."""
    if min(r, c) == 1:
        warnings.warn(f"{name}: a variable has a single category (table {r} x {c}); the value is NaN",
                      UserWarning, stacklevel=4)
        return True
    return False


def cramers_v(t: torch.Tensor, bias_correction: bool, name: str = "cramers_v") -> float:
    if _empty(name, t) or (bias_correction and _one_observation(name, t)):
        return _NAN
    phi2, r, c, n = _phi2(t, bias_correction)
    if bias_correction:
        phi2 = max(0.0, phi2 - (r - 1) * (c - 1) / (n - 1))
        rc, cc = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
        if min(rc, cc) == 1:
            warnings.warn(f"{name}: the bias correction is undefined for this table (a corrected dimension is 1); "
                          "the value is NaN. Consider bias_correction=False", UserWarning, stacklevel=3)
            return _NAN
        return min(max(math.sqrt(phi2 / min(rc - 1, cc - 1)), 0.0), 1.0)
    if _one_category(name, r, c):
        return _NAN
    return min(max(math.sqrt(phi2 / min(r - 1, c - 1)), 0.0), 1.0)


def tschuprows_t(t: torch.Tensor, bias_correction: bool, name: str = "tschuprows_t") -> float:
    if _empty(name, t) or (bias_correction and _one_observation(name, t)):
        return _NAN
    phi2, r, c, n = _phi2(t, bias_correction)
    if bias_correction:
        phi2 = max(0.0, phi2 - (r - 1) * (c - 1) / (n - 1))
        rc, cc = r - (r - 1) ** 2 / (n - 1), c - (c - 1) ** 2 / (n - 1)
        if min(rc, cc) == 1:
            warnings.warn(f"{name}: the bias correction is undefined for this table (a corrected dimension is 1); "
                          "the value is NaN. Consider bias_correction=False", UserWarning, stacklevel=3)
            return _NAN
        return min(max(math.sqrt(phi2 / math.sqrt((rc - 1) * (cc - 1))), 0.0), 1.0)
    if _one_category(name, r, c):
        return _NAN
    return min(max(math.sqrt(phi2 / math.sqrt((r - 1) * (c - 1))), 0.0), 1.0)


def pearson_c(t: torch.Tensor, name: str = "pearsons_contingency_coefficient") -> float:
    if _empty(name, t):
        return _NAN
    phi2 = chi_squared(t, False) / float(t.sum())
    return min(max(math.sqrt(phi2 / (1 + phi2)), 0.0), 1.0)


def theils_u(t: torch.Tensor, name: str = "theils_u") -> float:
    if _empty(name, t):
        return _NAN
    n = t.sum()
    p_xy = t / n
    p_y = (t.sum(1) / n)[:, None]  # target rows
    nz = p_xy > 0
    h_x_given_y = float(-(p_xy[nz] * torch.log(p_xy[nz] / p_y.expand_as(p_xy)[nz])).sum())
    p_x = t.sum(0) / n
    p_x = p_x[p_x > 0]
    h_x = float(-(p_x * torch.log(p_x)).sum())
    if h_x == 0:
        return 0.0
    return min(max((h_x - h_x_given_y) / h_x, 0.0), 1.0)
