"""Speech-recognition error rates: WER, CER (edit counts) and MER, WIL, WIP (alignment counts).

WER and CER keep ``(edits, reference length)``: any minimal alignment gives
the same Levenshtein distance, computed by rapidfuzz for a whole batch at
once (`rapidfuzz.process.cpdist`). MER, WIL and WIP need the hits ``H``,
substitutions ``S``, deletions ``D`` and insertions ``I`` of one alignment;
they keep those four counts, from rapidfuzz's edit operations of reference
to hypothesis, which is the alignment jiwer uses, and apply jiwer's
corpus-level definitions (Morris et al. 2004)::

    MER = (S + D + I) / (H + S + D + I)
    WIP = H / N_ref * H / N_hyp,   WIL = 1 - WIP
"""
from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np
import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.text._common import counts_family, empty, nan, pair_lists, require

__all__ = ["word_error_rate", "char_error_rate", "match_error_rate", "word_information_lost",
           "word_information_preserved"]


class EditCounts(NamedTuple):
    errors: torch.Tensor     # Levenshtein distance, summed
    total: torch.Tensor      # reference tokens, summed
    sentences: torch.Tensor


class AlignCounts(NamedTuple):
    hits: torch.Tensor
    substitutions: torch.Tensor
    deletions: torch.Tensor
    insertions: torch.Tensor
    sentences: torch.Tensor


def _tokens(level: str):
    return str.split if level == "word" else (lambda s: s)


def edit_counts(name: str, level: str, preds: Any, target: Any) -> dict:
    p, t = pair_lists(name, preds, target)
    rf = require(name, "rapidfuzz")
    tok = _tokens(level)
    hyp = [tok(s) for s in p]
    ref = [tok(s) for s in t]
    if p:
        dist = rf.process.cpdist(hyp, ref, scorer=rf.distance.Levenshtein.distance, workers=1)
        errors = int(np.asarray(dist, dtype=np.int64).sum())
    else:
        errors = 0
    return {"errors": errors, "total": sum(map(len, ref)), "sentences": len(p)}


def align_counts(name: str, preds: Any, target: Any) -> dict:
    p, t = pair_lists(name, preds, target)
    rf = require(name, "rapidfuzz")
    editops = rf.distance.Levenshtein.editops
    n_ref = n_hyp = subs = dist = 0
    for h, r in zip(p, t):
        hw, rw = h.split(), r.split()
        n_ref += len(rw)
        n_hyp += len(hw)
        ops = editops(rw, hw).as_list()
        dist += len(ops)
        subs += sum(1 for op in ops if op[0] == "replace")
    # D - I = N_ref - N_hyp and S + D + I = distance
    d_minus_i = n_ref - n_hyp
    dels = (dist - subs + d_minus_i) // 2
    ins = dist - subs - dels
    return {"hits": n_ref - subs - dels, "substitutions": subs, "deletions": dels, "insertions": ins,
            "sentences": len(p)}


def _edit_family(name: str, level: str):
    return counts_family("edit_counts", (level,), EditCounts, lambda p, t: edit_counts(name, level, p, t))


def _rate(name: str, unit: str):
    def finish(s: EditCounts) -> torch.Tensor:
        if empty(name, s.sentences):
            return nan()
        if int(s.total) == 0:
            warnings.warn(f"{name}: the references hold no {unit}; the rate is undefined (inf with an edit, NaN "
                          "without)", UserWarning, stacklevel=2)
        return s.errors.double() / s.total.double()
    return finish


@factory
def word_error_rate() -> Metric:
    """Word error rate ``(S + D + I) / N_ref``: word-level Levenshtein distance over reference words.

    Words are ``str.split()`` tokens. Summed over the corpus, so long
    sentences weigh more (jiwer's and torchmetrics' definition).

    Args:
      none: the metric has no options (as torchmetrics' ``WordErrorRate()``).

    Inputs:
      ``update(state, preds, target)``: hypothesis and reference strings (one
      string or equally long lists).

    Returns:
      A float64 scalar >= 0 (it exceeds 1 when insertions are many). A corpus
      whose references have no word gives ``inf`` (or ``nan`` with no edit),
      and an empty corpus NaN, each with a warning.

    Example::

        >>> fmetrics.word_error_rate()(["this is the prediction", "there is an other sample"],
        ...                            ["this is the reference", "there is another one"])
        tensor(0.5000, dtype=torch.float64)
    """
    return _edit_family("word_error_rate", "word").metric(
        "word_error_rate", _rate("word_error_rate", "word"), higher_is_better=False, is_differentiable=False,
        bounds=(0.0, None))


@factory
def char_error_rate() -> Metric:
    """Character error rate: character-level Levenshtein distance over reference characters.

    Characters are the strings' code points, spaces included and nothing
    stripped (torchmetrics' `char_error_rate`; jiwer strips leading and
    trailing whitespace first, see docs/text.md).

    Args:
      none: the metric has no options (as torchmetrics' ``CharErrorRate()``).

    Inputs:
      ``update(state, preds, target)``: hypothesis and reference strings.

    Returns:
      A float64 scalar >= 0; references without a character give ``inf`` (or
      ``nan`` with no edit), and an empty corpus NaN, each with a warning.

    Example::

        >>> fmetrics.char_error_rate()(["this is the prediction", "there is an other sample"],
        ...                            ["this is the reference", "there is another one"])
        tensor(0.3415, dtype=torch.float64)
    """
    return _edit_family("char_error_rate", "char").metric(
        "char_error_rate", _rate("char_error_rate", "character"), higher_is_better=False, is_differentiable=False,
        bounds=(0.0, None))


def _align_family(name: str):
    return counts_family("align_counts", ("word",), AlignCounts, lambda p, t: align_counts(name, p, t))


def _mer(s: AlignCounts) -> float:
    h, sub, d, i = (int(x) for x in s[:4])
    if h + sub + d == 0:
        return 0.0 if i == 0 else 1.0
    return (sub + d + i) / (h + sub + d + i)


def _wip(s: AlignCounts) -> float:
    h, sub, d, i = (int(x) for x in s[:4])
    n_ref, n_hyp = h + sub + d, h + sub + i
    if n_ref == 0:
        return 1.0 if n_hyp == 0 else 0.0
    if n_hyp == 0:
        return 0.0
    return (h / n_ref) * (h / n_hyp)


def _align_metric(name: str, fn, higher: bool) -> Metric:
    def finish(s: AlignCounts) -> torch.Tensor:
        return nan() if empty(name, s.sentences) else torch.tensor(fn(s), dtype=torch.float64)
    return _align_family(name).metric(name, finish, higher_is_better=higher, is_differentiable=False,
                                      bounds=(0.0, 1.0))


@factory
def match_error_rate() -> Metric:
    """Match error rate ``(S + D + I) / (H + S + D + I)`` over the corpus (jiwer's definition).

    ``H, S, D, I`` are the hits, substitutions, deletions and insertions of
    rapidfuzz's minimal word alignment of each reference to its hypothesis
    (the one jiwer uses). torchmetrics divides by ``sum max(N_ref, N_hyp)``
    instead, which equals ``H + S + D + I`` only for alignments without both
    deletions and insertions: see docs/text.md.

    Args:
      none: the metric has no options (as torchmetrics' ``MatchErrorRate()``).

    Inputs:
      ``update(state, preds, target)``: hypothesis and reference strings.

    Returns:
      A float64 scalar in [0, 1]; references and hypotheses all empty give 0;
      an empty corpus (no sentence) gives NaN with a warning.

    Example::

        >>> fmetrics.match_error_rate()(["this is the prediction", "there is an other sample"],
        ...                             ["this is the reference", "there is another one"])
        tensor(0.4444, dtype=torch.float64)
    """
    return _align_metric("match_error_rate", _mer, False)


@factory
def word_information_preserved() -> Metric:
    """Word information preserved ``WIP = (H / N_ref) * (H / N_hyp)`` over the corpus.

    ``H`` are the hits of rapidfuzz's (jiwer's) minimal word alignment,
    ``N_ref = H + S + D`` and ``N_hyp = H + S + I``; 0 when the hypotheses are
    all empty, 1 when both sides are.

    Args:
      none: the metric has no options (as torchmetrics' ``WordInfoPreserved()``).

    Inputs:
      ``update(state, preds, target)``: hypothesis and reference strings.

    Returns:
      A float64 scalar in [0, 1] (NaN with a warning on an empty corpus).

    Example::

        >>> fmetrics.word_information_preserved()(["this is the prediction", "there is an other sample"],
        ...                                       ["this is the reference", "there is another one"])
        tensor(0.3472, dtype=torch.float64)
    """
    return _align_metric("word_information_preserved", _wip, True)


@factory
def word_information_lost() -> Metric:
    """Word information lost ``WIL = 1 - (H / N_ref) * (H / N_hyp)`` over the corpus (see `word_information_preserved`).

    Args:
      none: the metric has no options (as torchmetrics' ``WordInfoLost()``).

    Inputs:
      ``update(state, preds, target)``: hypothesis and reference strings.

    Returns:
      A float64 scalar in [0, 1] (NaN with a warning on an empty corpus).

    Example::

        >>> fmetrics.word_information_lost()(["this is the prediction", "there is an other sample"],
        ...                                  ["this is the reference", "there is another one"])
        tensor(0.6528, dtype=torch.float64)
    """
    return _align_metric("word_information_lost", lambda s: 1.0 - _wip(s), False)
