"""`extended_edit_distance`: EED (Stanchev, Wang and Ney, WMT 2019), torchmetrics' port of the RWTH code.

A character-level CDER-style edit distance with jumps at blanks (cost
``alpha``) and a coverage penalty ``rho`` for characters of the hypothesis
visited more or less than once; per sentence the best (lowest) reference is
kept; the corpus value is the mean sentence score. The state holds the sum of
sentence scores (float64) and their count, plus the scores when asked for.
"""
from __future__ import annotations

import re
import unicodedata
from math import inf
from typing import Any, Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.text._common import cat_scores, counts_family, empty, nan, references, sentences

__all__ = ["extended_edit_distance"]


class EedState(NamedTuple):
    total: torch.Tensor
    sentences: torch.Tensor


class EedSentenceState(NamedTuple):
    total: torch.Tensor
    sentences: torch.Tensor
    scores: Any


def eed_sentence(hyp: str, ref: str, alpha: float, rho: float, deletion: float, insertion: float) -> float:
    """The EED of one (preprocessed) hypothesis against one reference (the RWTH recursion, row by row)."""
    n = len(hyp)
    visits = [-1] * (n + 1)
    row = [1.0] * (n + 1)
    row[0] = 0.0
    for r in ref:
        nxt = [0.0] * (n + 1)
        nxt[0] = row[0] + 1.0
        prev = nxt[0]
        for i in range(1, n + 1):
            a = prev + deletion
            b = row[i - 1] + (hyp[i - 1] != r)
            c = row[i] + insertion
            prev = a if a <= b and a <= c else (b if b <= c else c)
            nxt[i] = prev
        best = min(nxt)
        k = nxt.index(best)
        visits[k] += 1
        if r == " ":
            jump = alpha + best
            nxt = [x if x < jump else jump for x in nxt]
        row = nxt
    coverage = rho * sum(x if x >= 0 else 1 for x in visits)
    return min(1.0, (row[-1] + coverage) / (float(len(ref)) + coverage))


_EN_PUNCT = ((".", " ."), ("!", " !"), ("?", " ?"), (",", " ,"))
_EN_RE = ((re.compile(r"\s+"), " "), (re.compile(r"(\d) ([.,]) (\d)"), r"\1\2\3"),
          (re.compile(r"(Dr|Jr|Prof|Rev|Gen|Mr|Mt|Mrs|Ms) ."), r"\1."))
_EN_ABBR = (("e . g .", "e.g."), ("i . e .", "i.e."), ("U . S .", "U.S."))


def _preprocess_en(s: str) -> str:
    s = s.rstrip()
    for a, b in _EN_PUNCT:
        s = s.replace(a, b)
    for pattern, repl in _EN_RE:
        s = pattern.sub(repl, s)
    for a, b in _EN_ABBR:
        s = s.replace(a, b)
    return " " + s + " "


def _preprocess_ja(s: str) -> str:
    return unicodedata.normalize("NFKC", s.rstrip())


@factory
def extended_edit_distance(*, language: Literal["en", "ja"] = "en", return_sentence_level_score: bool = False,
                           alpha: float = 2.0, rho: float = 0.3, deletion: float = 0.2,
                           insertion: float = 1.0) -> Metric:
    """Extended edit distance, the mean over sentences of the best reference's EED (lower is better).

    Sentences are preprocessed as torchmetrics does (``'en'``: punctuation
    split off and padded with blanks; ``'ja'``: NFKC normalization); the
    score of one pair is ``min(1, (D + rho * V) / (len(ref) + rho * V))``
    with ``D`` the CDER-style character distance with jumps at blanks and
    ``V`` the coverage count.

    Args:
      language: ``'en'`` (default) or ``'ja'`` preprocessing.
      return_sentence_level_score: also return each sentence's score.
      alpha: cost of a jump at a blank (default 2.0).
      rho: coverage penalty weight (default 0.3).
      deletion: cost of a deletion (default 0.2).
      insertion: cost of an insertion (default 1.0).

    Inputs:
      ``update(state, preds, target)``: hypothesis strings and, per
      hypothesis, a list of reference strings (or one string).

    Returns:
      A float64 scalar in [0, 1]; with ``return_sentence_level_score``, the
      tuple ``(mean, sentence scores)``. An empty corpus gives NaN with a warning.

    Example::

        >>> preds = ["this is the prediction", "here is an other sample"]
        >>> target = ["this is the reference", "here is another one"]
        >>> fmetrics.extended_edit_distance()(preds, target)
        tensor(0.3078, dtype=torch.float64)
    """
    name = "extended_edit_distance"
    validation.check_policy(name, "language", language, ("en", "ja"))
    for arg, v in (("alpha", alpha), ("rho", rho), ("deletion", deletion), ("insertion", insertion)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise validation.fail(name, arg, "a non-negative number", repr(v))
    params = (float(alpha), float(rho), float(deletion), float(insertion))
    prep = _preprocess_en if language == "en" else _preprocess_ja
    sent = bool(return_sentence_level_score)

    def update(preds, target):
        hyps = sentences(name, "preds", preds)
        refs = references(name, "target", target, len(hyps))
        scores = []
        for h, rs in zip(hyps, refs):
            h = prep(h)
            best = inf
            for r in rs:
                best = min(best, eed_sentence(h, prep(r), *params))
            scores.append(best)
        out = {"total": sum(scores), "sentences": len(scores)}
        if sent:
            out["scores"] = scores
        return out

    dt = {"total": torch.float64}
    key = (language,) + params
    if sent:
        fam = counts_family("eed", key + ("sentences",), EedSentenceState, update, dtypes=dt, cats=("scores",))
    else:
        fam = counts_family("eed", key, EedState, update, dtypes=dt)

    def finish(s):
        v = nan() if empty(name, s.sentences) else s.total / s.sentences.double()
        return (v, cat_scores(s.scores)) if sent else v

    return fam.metric(name, finish, higher_is_better=False, is_differentiable=False, bounds=(0.0, 1.0))
