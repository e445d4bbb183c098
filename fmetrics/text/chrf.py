"""`chrf_score`: chrF / chrF++ (Popović 2015, 2017) as in sacrebleu.

Per sentence and reference, the statistics are, for each character order
1..n_char_order and word order 1..n_word_order, the hypothesis n-grams, the
reference n-grams and their clipped matches. The reference with the best
sentence F-score is kept (the first on ties); the corpus score is the
F-score of the summed statistics::

    P = mean_n P_n,  R = mean_n R_n  (over orders with n-grams on both sides)
    chrF = (1 + beta^2) P R / (beta^2 P + R)

The state holds the summed statistics (int64) and, when sentence scores are
asked for, the per-sentence scores (float64 chunks).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.text import _ngrams
from fmetrics.text._common import cat_scores, counts_family, empty, nan, references, sentences

__all__ = ["chrf_score"]

_PUNCTS = set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~')


class ChrfState(NamedTuple):
    stats: torch.Tensor  # (order, 3): hypothesis n-grams, reference n-grams, matches
    sentences: torch.Tensor


class ChrfSentenceState(NamedTuple):
    stats: torch.Tensor
    sentences: torch.Tensor
    scores: Any  # per-sentence chrF (chunks)


def _words(sent: str) -> list:
    """sacrebleu's chrF++ word split: one leading or trailing ASCII punctuation mark becomes its own word."""
    out = []
    for w in sent.split():
        if len(w) == 1:
            out.append(w)
        elif w[-1] in _PUNCTS:
            out += [w[:-1], w[-1]]
        elif w[0] in _PUNCTS:
            out += [w[0], w[1:]]
        else:
            out.append(w)
    return out


def f_scores(stats: np.ndarray, beta: float) -> np.ndarray:
    """sacrebleu's ``CHRF._compute_f_score`` (x100) over rows of ``stats`` (rows, order, 3), same float steps."""
    factor = beta ** 2
    rows, order = stats.shape[0], stats.shape[1]
    avg_p = np.zeros(rows)
    avg_r = np.zeros(rows)
    eff = np.zeros(rows, dtype=np.int64)
    eps = 1e-16
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(order):
            n_hyp, n_ref, n_match = (stats[:, i, k].astype(np.float64) for k in range(3))
            prec = np.where(n_hyp > 0, n_match / n_hyp, eps)
            rec = np.where(n_ref > 0, n_match / n_ref, eps)
            both = (n_hyp > 0) & (n_ref > 0)
            avg_p = np.where(both, avg_p + prec, avg_p)
            avg_r = np.where(both, avg_r + rec, avg_r)
            eff += both
        avg_p = np.where(eff > 0, avg_p / eff, 0.0)
        avg_r = np.where(eff > 0, avg_r / eff, 0.0)
        score = (1 + factor) * avg_p * avg_r
        score = score / ((factor * avg_p) + avg_r)
    return np.where(avg_p + avg_r != 0, 100 * score, 0.0)


def chrf_stats(hyps: list, refs: list, n_char: int, n_word: int, beta: float, whitespace: bool):
    """Best-reference statistics per hypothesis, shape (H, n_char + n_word, 3), and their sentence scores."""
    H = len(hyps)
    counts_per = [len(r) for r in refs]
    owner = np.repeat(np.arange(H, dtype=np.int64), counts_per)
    flat = [r for rs in refs for r in rs]
    R = len(flat)
    stats = np.zeros((R, n_char + n_word, 3), dtype=np.int64)

    def fill(orders, offset):
        for n, (seg, gid, G) in enumerate(orders):
            is_hyp = seg < H
            hyp = (seg[is_hyp], gid[is_hyp], G)
            ref = (seg[~is_hyp] - H, gid[~is_hyp], G)
            n_ref = np.bincount(ref[0], minlength=R)
            # sacrebleu counts no hypothesis n-grams of an order the reference has none of
            stats[:, offset + n, 0] = np.where(n_ref > 0, np.bincount(hyp[0], minlength=H)[owner], 0)
            stats[:, offset + n, 1] = n_ref
            stats[:, offset + n, 2] = _ngrams.pair_matches(hyp, ref, owner, R)

    texts = [*hyps, *flat]
    if n_char:
        chars = texts if whitespace else ["".join(s.split()) for s in texts]
        tok, lens = _ngrams.encode_chars(chars)
        fill(_ngrams.ngram_orders(tok, lens, n_char), 0)
    if n_word:
        tok, lens = _ngrams.encode_words(_words(s) for s in texts)
        fill(_ngrams.ngram_orders(tok, lens, n_word), n_char)
    f = f_scores(stats, beta)
    # the first reference with the highest score, per hypothesis
    order = np.lexsort((np.arange(R), -f, owner))
    first = np.r_[True, owner[order][1:] != owner[order][:-1]] if R else np.zeros(0, dtype=bool)
    best = order[first]
    return stats[best], f[best] / 100


@factory
def chrf_score(*, n_char_order: int = 6, n_word_order: int = 2, beta: float = 2.0, lowercase: bool = False,
               whitespace: bool = False, return_sentence_level_score: bool = False) -> Metric:
    """chrF (``n_word_order=0``) and chrF++ (default): F-beta of character and word n-gram precision and recall.

    Identical to sacrebleu's ``CHRF`` (score / 100): per order, precision and
    recall of clipped n-gram matches; the averages over orders with n-grams on
    both sides; ``F = (1 + beta^2) P R / (beta^2 P + R)`` of the corpus sums.
    With several references the best one per sentence (by sentence chrF) is
    used. Character n-grams skip whitespace unless ``whitespace``; chrF++ word
    n-grams split one leading or trailing punctuation mark off each word.

    Args:
      n_char_order: character n-gram order (default 6).
      n_word_order: word n-gram order (default 2: chrF++; 0: chrF).
      beta: weight of recall (default 2).
      lowercase: lowercase both sides first (default ``False``).
      whitespace: keep whitespace in character n-grams (default ``False``).
      return_sentence_level_score: also return each sentence's chrF.

    Inputs:
      ``update(state, preds, target)``: hypothesis strings and, per
      hypothesis, a list of reference strings (or one string).

    Returns:
      A float64 scalar in [0, 1]; with ``return_sentence_level_score``, the
      tuple ``(corpus score, sentence scores)``. An empty corpus gives NaN
      with a warning. A lone surrogate code point counts as one character.

    Example::

        >>> preds = ['the cat is on the mat']
        >>> target = [['there is a cat on the mat', 'a cat is on the mat']]
        >>> fmetrics.chrf_score()(preds, target)
        tensor(0.8648, dtype=torch.float64)
    """
    name = "chrf_score"
    for arg, v, lo in (("n_char_order", n_char_order, 1), ("n_word_order", n_word_order, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise validation.fail(name, arg, f"an integer >= {lo}", repr(v))
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or beta < 0:
        raise validation.fail(name, "beta", "a non-negative number", repr(beta))
    beta = float(beta)
    order = n_char_order + n_word_order
    lowercase, whitespace, sent = bool(lowercase), bool(whitespace), bool(return_sentence_level_score)

    def update(preds, target):
        hyps = sentences(name, "preds", preds)
        refs = references(name, "target", target, len(hyps))
        if lowercase:
            hyps = [h.lower() for h in hyps]
            refs = [[r.lower() for r in rs] for rs in refs]
        stats, scores = chrf_stats(hyps, refs, n_char_order, n_word_order, beta, whitespace)
        out = {"stats": stats.sum(0) if len(hyps) else np.zeros((order, 3), dtype=np.int64),
               "sentences": len(hyps)}
        if sent:
            out["scores"] = scores
        return out

    key = (n_char_order, n_word_order, beta, lowercase, whitespace)
    if sent:
        fam = counts_family("chrf", key + ("sentences",), ChrfSentenceState, update, shapes={"stats": (order, 3)},
                            cats=("scores",))
    else:
        fam = counts_family("chrf", key, ChrfState, update, shapes={"stats": (order, 3)})

    def finish(s):
        if empty(name, s.sentences):
            v = nan()
        else:
            v = torch.tensor(f_scores(s.stats.numpy()[None], beta)[0] / 100, dtype=torch.float64)
        return (v, cat_scores(s.scores)) if sent else v

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))
