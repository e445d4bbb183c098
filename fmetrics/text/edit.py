"""`edit_distance`: character Levenshtein distance per pair (rapidfuzz), reduced by mean, sum or none."""
from __future__ import annotations

from typing import Any, Literal, NamedTuple, Optional

import numpy as np
import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import cat_chunks
from fmetrics.text._common import counts_family, empty, nan, pair_lists, require

__all__ = ["edit_distance"]


class EditDistanceState(NamedTuple):
    total: torch.Tensor
    sentences: torch.Tensor


class EditDistanceAll(NamedTuple):
    total: torch.Tensor
    sentences: torch.Tensor
    scores: Any  # per-pair distances (chunks), for reduction='none'


# The widest cutoff whose band (2k + 1 diagonals) fits one 64-bit word: rapidfuzz's single-word banded kernel.
_BAND = 31


def _distances(name: str, cost: int, preds: Any, target: Any) -> np.ndarray:
    """The distance of every pair (a uint32 array), in rapidfuzz calls over the whole batch.

    At cost 1 with predictions longer than a machine word (over 64 characters on average in the batch's
    first 64), a first pass caps the distance at ``_BAND`` (exact up to it, ``_BAND + 1`` beyond: rapidfuzz's
    banded kernel, one word per character instead of a block of words); the pairs past the cap are then
    computed in full. Either way each distance is rapidfuzz's exact one.
    """
    p, t = pair_lists(name, preds, target)
    rf = require(name, "rapidfuzz")
    cpdist, lev = rf.process.cpdist, rf.distance.Levenshtein.distance
    if cost != 1:
        return cpdist(p, t, scorer=lev, workers=1, scorer_kwargs={"weights": (1, 1, cost)})
    head = p[:64]  # stands for the batch (a pass over all lengths costs ~3% of the kernel)
    if sum(map(len, head)) <= 64 * len(head):  # short strings: one word holds a whole row, no band to gain
        return cpdist(p, t, scorer=lev, workers=1)  # rapidfuzz's uniform kernel
    d = cpdist(p, t, scorer=lev, workers=1, score_cutoff=_BAND)
    far = np.flatnonzero(d > _BAND).tolist()
    if far:
        d[far] = cpdist([p[i] for i in far], [t[i] for i in far], scorer=lev, workers=1)
    return d


@factory
def edit_distance(*, substitution_cost: int = 1, reduction: Optional[Literal["mean", "sum", "none"]] = "mean"
                  ) -> Metric:
    """Levenshtein distance between each prediction and its reference, over characters.

    Insertions and deletions cost 1, a substitution ``substitution_cost``
    (rapidfuzz's weighted Levenshtein, as torchmetrics' `edit_distance`).

    Args:
      substitution_cost: cost of one substitution, a non-negative integer (default 1).
      reduction: ``'mean'`` (default) average distance per pair; ``'sum'``
        total distance; ``'none'`` (or ``None``) the distance of every pair in
        the order seen.

    Inputs:
      ``update(state, preds, target)``: prediction and reference strings (one
      string or equally long lists).

    Returns:
      ``'mean'``: float64 scalar; ``'sum'``: int64 scalar; ``'none'``: int64 vector.
      On empty input: ``'mean'`` NaN with a warning, ``'sum'`` 0, ``'none'`` an empty vector.

    Example::

        >>> fmetrics.edit_distance()(["rain", "lnaguaeg"], ["shine", "language"])
        tensor(3.5000, dtype=torch.float64)
    """
    name = "edit_distance"
    if isinstance(substitution_cost, bool) or not isinstance(substitution_cost, int) or substitution_cost < 0:
        raise validation.fail(name, "substitution_cost", "a non-negative integer", repr(substitution_cost))
    if reduction is None:
        reduction = "none"
    validation.check_policy(name, "reduction", reduction, ("mean", "sum", "none"))

    def update(preds, target):
        d = _distances(name, substitution_cost, preds, target)
        # Python ints, which add to the state as scalars; a C sum over the buffer (numpy's reduction costs more cold)
        out = {"total": sum(memoryview(d)), "sentences": len(d)}
        if reduction == "none":
            out["scores"] = d
        return out

    if reduction == "none":
        fam = counts_family("edit_distance", (substitution_cost, "all"), EditDistanceAll, update, cats=("scores",))

        def finish(s):
            return cat_chunks(s.scores, torch.zeros(0, dtype=torch.float64)).to(torch.int64)
    else:
        fam = counts_family("edit_distance", (substitution_cost,), EditDistanceState, update)

        def finish(s):
            if reduction == "sum":
                return s.total.clone()
            return nan() if empty(name, s.sentences) else s.total / s.sentences.double()

    return fam.metric(name, finish, higher_is_better=False, is_differentiable=False, bounds=(0.0, None))
