"""`translation_edit_rate`: TER (Snover et al. 2006) with sacrebleu's tokenizer and shift search.

Per sentence: the fewest edits (insertions, deletions, substitutions and
block shifts) turning the hypothesis into its closest reference, and the
average reference length. Corpus TER is ``sum edits / sum average lengths``.
The state holds both sums (float64: the average length is fractional with
several references) and, when asked, the sentence scores.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import torch

from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.text._common import cat_scores, counts_family, empty, nan, references, require, sentences

__all__ = ["translation_edit_rate"]


class TerState(NamedTuple):
    edits: torch.Tensor
    ref_length: torch.Tensor
    sentences: torch.Tensor


class TerSentenceState(NamedTuple):
    edits: torch.Tensor
    ref_length: torch.Tensor
    sentences: torch.Tensor
    scores: Any


def _segment(words_hyp: list, refs: list) -> tuple:
    """sacrebleu's ``TER._compute_segment_statistics``: the fewest edits over the references, their mean length."""
    from fmetrics.text._ter_search import translation_edit_rate

    edits, lengths = zip(*(translation_edit_rate(words_hyp, r) for r in refs))
    return min(edits), sum(lengths) / len(refs)


def _score(edits: float, length: float) -> float:
    if length > 0:
        return edits / length
    return 1.0 if edits > 0 else 0.0


@factory
def translation_edit_rate(*, normalize: bool = False, no_punctuation: bool = False, lowercase: bool = True,
                          asian_support: bool = False, return_sentence_level_score: bool = False) -> Metric:
    """Translation edit rate ``sum edits / sum reference lengths`` (sacrebleu's ``TER`` / 100).

    Edits are insertions, deletions, substitutions and shifts of word blocks
    (sacrebleu's TERCOM port) against the reference needing the fewest; the
    length is the average over the sentence's references.

    Args:
      normalize: apply TERCOM's general normalization (punctuation and
        number tokenization), default ``False``.
      no_punctuation: remove punctuation (default ``False``).
      lowercase: case-insensitive (default ``True``, as torchmetrics; sacrebleu's
        ``case_sensitive=not lowercase``).
      asian_support: split CJK characters and Japanese kana (with ``normalize``
        or ``no_punctuation``), default ``False``.
      return_sentence_level_score: also return each sentence's TER.

    Inputs:
      ``update(state, preds, target)``: hypothesis strings and, per
      hypothesis, a list of reference strings (or one string).

    Returns:
      A float64 scalar >= 0; with ``return_sentence_level_score``, the tuple
      ``(corpus TER, sentence TERs)``. An empty reference with a non-empty
      hypothesis scores 1; an empty corpus gives NaN with a warning.

    Example::

        >>> preds = ['the cat is on the mat']
        >>> target = [['there is a cat on the mat', 'a cat is on the mat']]
        >>> fmetrics.translation_edit_rate()(preds, target)
        tensor(0.1538, dtype=torch.float64)
    """
    name = "translation_edit_rate"
    opts = (bool(normalize), bool(no_punctuation), bool(lowercase), bool(asian_support))
    sent = bool(return_sentence_level_score)
    require(name, "sacrebleu")
    from sacrebleu.metrics.ter import TER

    ter = TER(normalized=opts[0], no_punct=opts[1], case_sensitive=not opts[2], asian_support=opts[3])

    def update(preds, target):
        hyps = sentences(name, "preds", preds)
        refs = references(name, "target", target, len(hyps))
        edits = length = 0.0
        scores = []
        for h, rs in zip(hyps, refs):
            e, n = _segment(ter._preprocess_segment(h).split(), ter._extract_reference_info(rs)["ref_words"])
            edits += e
            length += n
            if sent:
                scores.append(_score(e, n))
        out = {"edits": edits, "ref_length": length, "sentences": len(hyps)}
        if sent:
            out["scores"] = scores
        return out

    dt = {"edits": torch.float64, "ref_length": torch.float64}
    if sent:
        fam = counts_family("ter", opts + ("sentences",), TerSentenceState, update, dtypes=dt, cats=("scores",))
    else:
        fam = counts_family("ter", opts, TerState, update, dtypes=dt)

    def finish(s):
        v = nan() if empty(name, s.sentences) else torch.tensor(_score(float(s.edits), float(s.ref_length)),
                                                                 dtype=torch.float64)
        return (v, cat_scores(s.scores)) if sent else v

    return fam.metric(name, finish, higher_is_better=False, is_differentiable=False, bounds=(0.0, None))
