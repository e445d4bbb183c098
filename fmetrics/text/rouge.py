"""`rouge_score`: ROUGE-N, ROUGE-L and ROUGE-Lsum (Lin 2004) as in Google's rouge-score.

Per sentence and key: precision, recall and F1 of n-gram overlap (ROUGE-N),
of the longest common subsequence (ROUGE-L) or of the union LCS over
newline-separated sentences (ROUGE-Lsum). With several references the best
one by F1 (``accumulate='best'``) or the mean over them (``'avg'``) is kept.
The corpus value is the mean over sentences; the state holds the float64
sums of the sentence scores and the sentence count.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Literal, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.text._common import counts_family, empty, references, require, sentences

__all__ = ["rouge_score"]

ALLOWED_KEYS = tuple(f"rouge{n}" for n in range(1, 10)) + ("rougeL", "rougeLsum")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_SPACES = re.compile(r"\s+")
_VALID = re.compile(r"^[a-z0-9]+$")


class RougeState(NamedTuple):
    sums: torch.Tensor  # (keys, 3): precision, recall, F1 summed over sentences
    sentences: torch.Tensor


def _tokenizer(name, use_stemmer: bool, normalizer, tokenizer):
    stem = None
    if use_stemmer:
        porter = require(name, "nltk.stem.porter", "nltk", " for the Porter stemmer")
        stemmer = porter.PorterStemmer()
        cache: dict = {}

        def stem(w):
            s = cache.get(w)
            if s is None:
                s = cache[w] = stemmer.stem(w)
            return s

    def tokenize(text: str) -> list:
        text = normalizer(text) if normalizer is not None else _NON_ALNUM.sub(" ", text.lower())
        tokens = tokenizer(text) if tokenizer is not None else _SPACES.split(text)
        if stem is not None:
            tokens = [stem(x) if len(x) > 3 else x for x in tokens]
        if normalizer is None and tokenizer is None:
            return [x for x in tokens if _VALID.match(x)]
        return [x for x in tokens if isinstance(x, str) and len(x) > 0]

    return tokenize


def _prf(hits: int, n_pred: int, n_ref: int) -> tuple:
    p = hits / max(n_pred, 1)
    r = hits / max(n_ref, 1)
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return p, r, f


def _ngrams(tokens: list, n: int) -> Counter:
    return Counter(zip(*(tokens[i:] for i in range(n))))


def _rouge_n(pred: list, ref: list, n: int, cache: dict) -> tuple:
    pn = cache.setdefault(("p", n), _ngrams(pred, n))
    rn = _ngrams(ref, n)
    hits = sum(min(c, pn[g]) for g, c in rn.items() if g in pn)
    return _prf(hits, sum(pn.values()), sum(rn.values()))


def _lcs_table(ref: list, can: list) -> list:
    rows, cols = len(ref), len(can)
    t = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(1, rows + 1):
        ri, prev, cur = ref[i - 1], t[i - 1], t[i]
        for j in range(1, cols + 1):
            cur[j] = prev[j - 1] + 1 if ri == can[j - 1] else max(prev[j], cur[j - 1])
    return t


def _lcs_indices(ref: list, can: list) -> list:
    """rouge-score's ``lcs_ind``: one LCS (its backtracking order) as indices into ``ref``."""
    t = _lcs_table(ref, can)
    i, j, out = len(ref), len(can), []
    while i > 0 and j > 0:
        if ref[i - 1] == can[j - 1]:
            out.append(i - 1)
            i -= 1
            j -= 1
        elif t[i][j - 1] > t[i - 1][j]:
            j -= 1
        else:
            i -= 1
    return out


def _rouge_l(pred: list, ref: list, lcs) -> tuple:
    if not pred or not ref:
        return 0.0, 0.0, 0.0
    n = lcs(ref, pred)
    return _prf(n, len(pred), len(ref))


def _rouge_lsum(pred_sents: list, ref_sents: list) -> tuple:
    if not pred_sents or not ref_sents:
        return 0.0, 0.0, 0.0
    m = sum(map(len, ref_sents))
    n = sum(map(len, pred_sents))
    if not n or not m:
        return 0.0, 0.0, 0.0
    cnt_r, cnt_c = Counter(), Counter()
    for s in ref_sents:
        cnt_r.update(s)
    for s in pred_sents:
        cnt_c.update(s)
    hits = 0
    for r in ref_sents:
        union = sorted(set().union(*(_lcs_indices(r, c) for c in pred_sents)))
        for t in (r[i] for i in union):
            if cnt_c[t] > 0 and cnt_r[t] > 0:
                hits += 1
                cnt_c[t] -= 1
                cnt_r[t] -= 1
    return _prf(hits, n, m)


@factory
def rouge_score(*, rouge_keys: Union[str, Sequence[str]] = ("rouge1", "rouge2", "rougeL", "rougeLsum"),
                use_stemmer: bool = False, accumulate: Literal["best", "avg"] = "best",
                normalizer: Optional[Callable[[str], str]] = None,
                tokenizer: Optional[Callable[[str], Sequence[str]]] = None) -> Metric:
    """ROUGE precision, recall and F1, averaged over sentences (Google's rouge-score, torchmetrics' keys).

    Text is lowercased, every non-alphanumeric run becomes a space, words are
    whitespace tokens (optionally Porter-stemmed when longer than 3
    characters). ROUGE-N: clipped n-gram overlap; ROUGE-L: longest common
    subsequence; ROUGE-Lsum: union LCS of the newline-separated sentences of
    the summary (rouge-score's convention; put one sentence per line).

    Args:
      rouge_keys: a key or keys among ``rouge1`` .. ``rouge9``, ``rougeL``,
        ``rougeLsum`` (default ``("rouge1", "rouge2", "rougeL", "rougeLsum")``).
      use_stemmer: Porter stemmer (nltk's, as rouge-score), default ``False``.
      accumulate: with several references per prediction, ``'best'`` (default)
        keeps, per key, the reference with the highest F1 (the first on
        ties); ``'avg'`` averages precision, recall and F1 over them.
      normalizer: ``str -> str`` replacing the default lowercasing and
        non-alphanumeric removal.
      tokenizer: ``str -> list of str`` replacing the whitespace split.

    Inputs:
      ``update(state, preds, target)``: prediction strings and, per
      prediction, a list of reference strings (or one string).

    Returns:
      A dict ``{'<key>_fmeasure', '<key>_precision', '<key>_recall'}`` of
      float64 scalars in [0, 1] (NaN with a warning on an empty corpus).

    Example::

        >>> v = fmetrics.rouge_score(rouge_keys="rouge1")(["My name is John"], [["Is your name John"]])
        >>> {k: round(float(x), 4) for k, x in v.items()}
        {'rouge1_fmeasure': 0.75, 'rouge1_precision': 0.75, 'rouge1_recall': 0.75}
    """
    name = "rouge_score"
    keys = (rouge_keys,) if isinstance(rouge_keys, str) else tuple(rouge_keys)
    if not keys or any(k not in ALLOWED_KEYS for k in keys):
        raise validation.fail(name, "rouge_keys", f"keys among {ALLOWED_KEYS}", repr(rouge_keys))
    validation.check_policy(name, "accumulate", accumulate, ("best", "avg"))
    for arg, fn in (("normalizer", normalizer), ("tokenizer", tokenizer)):
        if fn is not None and not callable(fn):
            raise validation.fail(name, arg, "a callable or None", type(fn).__name__)
    tokenize = _tokenizer(name, bool(use_stemmer), normalizer, tokenizer)
    lcs_len = None
    if "rougeL" in keys:
        rf = require(name, "rapidfuzz")
        lcs_len = rf.distance.LCSseq.similarity

    def sentence_scores(pred: str, refs: list) -> np.ndarray:
        p_tok = tokenize(pred) if any(k != "rougeLsum" for k in keys) else None
        p_sum = [tokenize(s) for s in pred.split("\n") if s] if "rougeLsum" in keys else None
        cache: dict = {}
        out = np.zeros((len(refs), len(keys), 3))
        for j, ref in enumerate(refs):
            r_tok = tokenize(ref) if p_tok is not None else None
            for i, k in enumerate(keys):
                if k == "rougeL":
                    out[j, i] = _rouge_l(p_tok, r_tok, lcs_len)
                elif k == "rougeLsum":
                    out[j, i] = _rouge_lsum(p_sum, [tokenize(s) for s in ref.split("\n") if s])
                else:
                    out[j, i] = _rouge_n(p_tok, r_tok, int(k[5:]), cache)
        if accumulate == "avg":
            return out.mean(0)
        best = np.argmax(out[:, :, 2], axis=0)  # first max per key
        return out[best, np.arange(len(keys))]

    def update(preds, target):
        hyps = sentences(name, "preds", preds)
        refs = references(name, "target", target, len(hyps))
        sums = np.zeros((len(keys), 3))
        for h, rs in zip(hyps, refs):
            sums += sentence_scores(h, rs)
        return {"sums": sums, "sentences": len(hyps)}

    # a callable by identity, in the form the distributed fingerprint reads without its id (no address in a key)
    fns = tuple(None if fn is None else ("object", id(fn)) for fn in (normalizer, tokenizer))
    fam = counts_family("rouge", (keys, bool(use_stemmer), accumulate) + fns, RougeState, update,
                        dtypes={"sums": torch.float64}, shapes={"sums": (len(keys), 3)})

    def finish(s: RougeState) -> dict:
        mean = torch.full_like(s.sums, float("nan")) if empty(name, s.sentences) else s.sums / s.sentences.double()
        out = {}
        for i, k in enumerate(keys):
            out[f"{k}_fmeasure"] = mean[i, 2].clone()
            out[f"{k}_precision"] = mean[i, 0].clone()
            out[f"{k}_recall"] = mean[i, 1].clone()
        return out

    return fam.metric(name, finish, higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))
