"""Fleiss' kappa: agreement of many raters over categorical ratings, corrected for chance (Fleiss, 1971).

With ``N`` subjects, ``n`` raters per subject and ``n_ij`` the raters putting
subject i in category j::

    P_i  = (sum_j n_ij^2 - n) / (n (n - 1))      agreement on subject i
    p_j  = sum_i n_ij / (N n)                     share of category j
    kappa = (mean_i P_i - sum_j p_j^2) / (1 - sum_j p_j^2)

The state is mergeable by tags: per-category totals, the sum of squared
counts, the number of subjects, and the fewest / most raters of a subject
(min / max: they must agree). Negative counts and non-finite scores are
rejected (eager on CPU; counted and raised by `finalize` elsewhere, their
subjects left out).
"""
from __future__ import annotations

import warnings
from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.family import Family
from fmetrics.metric import Metric
from fmetrics.recipe import factory

__all__ = ["fleiss_kappa"]


class FleissState(NamedTuple):
    totals: torch.Tensor    # int64 [C]: sum over subjects of n_ij (C fixed by the first batch)
    squares: torch.Tensor   # int64 (): sum over subjects and categories of n_ij^2
    subjects: torch.Tensor  # int64 ()
    raters: torch.Tensor    # int64 (): most raters of a subject
    fewest: torch.Tensor    # int64 (): fewest raters of a subject (int64 max before any)
    invalid: validation.Invalid  # negative counts / non-finite scores (deferred check)


_INT_MAX = torch.iinfo(torch.int64).max


def _rule(mode: str) -> str:
    return "rater counts must be >= 0" if mode == "counts" else "scores must be finite (no NaN or inf)"


def _flawed(ratings: torch.Tensor, mode: str) -> torch.Tensor:
    """Bool mask of the offending entries (negative counts, non-finite scores)."""
    return ratings < 0 if mode == "counts" else ~torch.isfinite(ratings)


def _counts(ratings, mode: str) -> torch.Tensor:
    name = "fleiss_kappa"
    if not isinstance(ratings, torch.Tensor):
        raise validation.fail(name, "ratings", "a tensor (convert lists with torch.as_tensor)", type(ratings).__name__)
    if mode == "probs":
        if ratings.dim() != 3 or not ratings.is_floating_point():
            raise validation.fail(name, "ratings", "a float tensor [n_subjects, n_categories, n_raters] with "
                                  "mode='probs'", f"{ratings.dtype} of shape {tuple(ratings.shape)}")
        choice = ratings.argmax(1)  # [N, R]
        return torch.nn.functional.one_hot(choice, ratings.shape[1]).sum(1)
    if ratings.dim() != 2 or ratings.is_floating_point() or ratings.is_complex():
        raise validation.fail(name, "ratings", "an integer tensor [n_subjects, n_categories] of counts with "
                              "mode='counts'", f"{ratings.dtype} of shape {tuple(ratings.shape)}")
    return ratings.to(torch.int64)


@factory
def fleiss_kappa(*, mode: Literal["counts", "probs"] = "counts") -> Metric:
    """Fleiss' kappa for ``n`` raters assigning subjects to categories.

    Args:
      mode: ``"counts"`` (default): ``update`` takes ``[N, C]`` integer counts
        of raters per subject and category; ``"probs"``: ``[N, C, R]`` float
        scores of ``R`` raters, each rater's category being its argmax.

    Inputs:
      ``update(state, ratings)`` as described by ``mode``; every subject has
      the same number of raters.

    Returns:
      A float64 scalar <= 1 (1: perfect agreement; 0: chance level). Unlike
      torchmetrics, no 1e-5 is added to the denominator (see docs/nominal.md).

    Example::

        >>> counts = torch.tensor([[3, 0], [0, 3], [2, 1], [3, 0]])
        >>> fmetrics.fleiss_kappa()(counts)
        tensor(0.6250, dtype=torch.float64)
    """
    validation.check_policy("fleiss_kappa", "mode", mode, ("counts", "probs"))

    def init():
        z = torch.zeros((), dtype=torch.int64)
        return FleissState(torch.zeros(0, dtype=torch.int64), z, z.clone(), z.clone(),
                           torch.full((), _INT_MAX, dtype=torch.int64), validation.invalid_init())

    def update(state, ratings):
        c = _counts(ratings, mode).detach()
        flawed = _flawed(ratings.detach(), mode)
        ok = ~flawed.flatten(1).any(1)  # subjects left out when one entry is bad
        c = torch.where(ok[:, None], c, 0)
        totals = state.totals if state.totals.numel() == c.shape[1] else state.totals.new_zeros(c.shape[1])
        per = c.sum(1)
        raters = per.amax() if c.shape[0] else c.new_zeros(())
        fewest = torch.where(ok, per, _INT_MAX).amin() if c.shape[0] else torch.full_like(raters, _INT_MAX)
        return FleissState(totals + c.sum(0), state.squares + (c * c).sum(), state.subjects + ok.sum(),
                           torch.maximum(state.raters, raters), torch.minimum(state.fewest, fewest),
                           validation.invalid_flag(state.invalid, flawed, ratings.detach()))

    def merge(a, b):
        ta = a.totals if a.totals.numel() else b.totals.new_zeros(b.totals.shape)
        tb = b.totals if b.totals.numel() else a.totals.new_zeros(a.totals.shape)
        return FleissState(ta + tb, a.squares + b.squares, a.subjects + b.subjects, torch.maximum(a.raters, b.raters),
                           torch.minimum(a.fewest, b.fewest), validation.invalid_merge(a.invalid, b.invalid))

    def check(ratings):
        c = _counts(ratings, mode)
        flawed = _flawed(ratings, mode)
        if bool(flawed.any()):
            raise ValueError(f"fleiss_kappa: {_rule(mode)} in `ratings`; found {validation.quote(ratings[flawed])}")
        per = c.sum(1)
        if c.shape[0] and bool((per != per[0]).any()):
            raise ValueError(f"fleiss_kappa: every subject in `ratings` must have the same number of raters; "
                             f"found {validation.quote(per)} raters")

    def finish(s: FleissState) -> torch.Tensor:
        validation.invalid_report("fleiss_kappa", _rule(mode), s.invalid)
        n_subj, n = int(s.subjects), int(s.raters)
        if n_subj and int(s.fewest) != n:
            raise ValueError(f"fleiss_kappa: every subject in `ratings` must have the same number of raters; "
                             f"found from {int(s.fewest)} to {n} raters")
        if n_subj == 0 or n < 2:
            warnings.warn("fleiss_kappa: needs subjects rated by at least 2 raters; the value is NaN",
                          UserWarning, stacklevel=3)
            return torch.tensor(float("nan"), dtype=torch.float64)
        p_bar = (int(s.squares) - n_subj * n) / (n_subj * n * (n - 1))
        p = s.totals.to(torch.float64) / (n_subj * n)
        pe = float((p * p).sum())
        if pe == 1:
            warnings.warn("fleiss_kappa: every rating falls in one category (chance agreement 1); the value is NaN",
                          UserWarning, stacklevel=3)
            return torch.tensor(float("nan"), dtype=torch.float64)
        return torch.tensor((p_bar - pe) / (1 - pe), dtype=torch.float64)

    fam = Family(name="fleiss_kappa", key=(mode,), init=init, update=update, merge=merge, check=check,
                 reductions=FleissState(totals=None, squares="sum", subjects="sum", raters="max", fewest="min",
                                        invalid=None))
    return fam.metric("fleiss_kappa", finish, higher_is_better=True, bounds=(-1.0, 1.0))
