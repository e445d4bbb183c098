"""N-gram counting with array operations.

Sentences become integer ids (words through a dictionary built per batch,
characters through their code points), laid end to end in one int64 array.
An n-gram starting at position ``i`` gets a compact id from the pair
``(id of the (n-1)-gram at i, token at i + n - 1)`` with one `numpy.unique`
per order, so no Python loop runs over n-grams. Counting n-grams per sentence
and clipping them against references are sorts and searches over
``segment * G + gram`` keys (``G``: the number of distinct n-grams).
"""
from __future__ import annotations

from collections import defaultdict
from itertools import chain, count
from typing import Iterable, Sequence

import numpy as np

__all__ = ["encode_words", "encode_texts", "encode_chars", "ngram_orders", "counts", "clipped_orders", "pair_matches"]


def encode_words(sents: Iterable[Sequence[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (end to end) and lengths of tokenized sentences; ids are compact per call.

    Every loop over tokens runs in C (``dict.fromkeys``, ``map``, ``np.fromiter``).
    """
    sents = sents if isinstance(sents, list) else list(sents)
    lens = np.fromiter(map(len, sents), dtype=np.int64, count=len(sents))
    vocab = defaultdict(count().__next__)  # a new word gets the next id: one pass, no Python frame per token
    ids = np.fromiter(map(vocab.__getitem__, chain.from_iterable(sents)), dtype=np.int64, count=int(lens.sum()))
    return ids, lens


def encode_texts(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`encode_words` of ``[t.split() for t in texts]`` without a list per sentence: the texts joined by a marker
    token ``"\\x00"`` are split once, the markers' positions giving the lengths (a text holding the marker: one
    split per text gives them). Ids are compact but for the marker's."""
    vocab = defaultdict(count().__next__)
    joined = " \x00 ".join(texts)
    if joined.count("\x00") != len(texts) - 1 or not texts:
        lens = np.fromiter(map(len, map(str.split, texts)), dtype=np.int64, count=len(texts))
        return np.fromiter(map(vocab.__getitem__, " ".join(texts).split()), dtype=np.int64), lens
    ids = np.fromiter(map(vocab.__getitem__, joined.split()), dtype=np.int64)
    marker = ids == vocab["\x00"]
    return ids[~marker], np.diff(np.flatnonzero(marker), prepend=-1, append=ids.size) - 1


def encode_chars(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Code points (end to end) and lengths of strings.

    A lone surrogate (``"\\ud800"``, e.g. from ``errors="surrogateescape"`` decoding) is one code point like
    any other, as in sacrebleu's Python strings.
    """
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    joined = "".join(strings)
    tok = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
    return tok, lens


def ngram_orders(tok: np.ndarray, lens: np.ndarray, n_max: int) -> list:
    """For n = 1..n_max: ``(segment, gram id, G)`` of every n-gram (``G``: bound on the gram ids)."""
    T = tok.size
    seg = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    remaining = np.repeat(np.cumsum(lens), lens) - np.arange(T, dtype=np.int64)
    out = []
    if T:
        uniq, tok = np.unique(tok, return_inverse=True)
        tok = tok.astype(np.int64, copy=False)
        V = uniq.size
    else:
        V = 1
    prev = tok
    G = V
    for n in range(1, n_max + 1):
        valid = remaining >= n
        if n == 1:
            gid = tok
        else:
            idx = np.flatnonzero(valid)
            key = prev[idx] * V + tok[idx + (n - 1)]
            uniq, inv = np.unique(key, return_inverse=True)
            gid = np.zeros(T, dtype=np.int64)
            gid[idx] = inv
            G = max(uniq.size, 1)
        out.append((seg[valid], gid[valid], G))
        prev = gid
    return out


def counts(seg: np.ndarray, gid: np.ndarray, G: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``seg * G + gid`` keys (sorted) and how often each occurs."""
    return np.unique(seg * G + gid, return_counts=True)


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` in sorted ``keys``; 0 where absent."""
    if keys.size == 0:
        return np.zeros(query.size, dtype=np.int64)
    pos = np.minimum(np.searchsorted(keys, query), keys.size - 1)
    return np.where(keys[pos] == query, values[pos], 0)


def _changes(x: np.ndarray) -> np.ndarray:
    """``True`` where a sorted array's value differs from the one before (and at 0)."""
    out = np.empty(x.size, dtype=bool)
    out[:1] = True
    np.not_equal(x[1:], x[:-1], out=out[1:])
    return out


def clipped_orders(tok: np.ndarray, lens: np.ndarray, owner: np.ndarray, n_hyp: int, n_max: int,
                   hyp_set: np.ndarray | None = None) -> np.ndarray:
    """BLEU's clipped matches ``(n_hyp, n_max)``: per hypothesis and order n, ``sum_g min(count of g in the
    hypothesis, max over its references of the count of g)`` over its n-grams ``g``.

    ``tok``: non-negative word ids (``T * (max id + 1) < 2**63``) of the segments end to end, the ``n_hyp``
    hypotheses first, then the references. ``owner[r]``: the reference set of reference ``r`` (non-decreasing);
    ``hyp_set[h]``: the set that clips hypothesis ``h`` (default ``h``: ``owner[r]`` is then the hypothesis of
    ``r``), so hypotheses sharing references (two systems) count those once. One argsort per order of
    ``(gram, set, slot)`` keys (slots ``0 .. M-1``: the set's hypotheses, ``M + k``: its k-th reference) gives
    the counts by run lengths and the compact gram ids of the next order; the next order only extends the
    n-grams found in both a hypothesis and a reference of one set (no other can match).
    """
    H, T = n_hyp, tok.size
    num = np.zeros((H, n_max), dtype=np.int64)
    if H == 0 or T == 0:
        return num
    hyp_set = np.arange(H, dtype=np.int64) if hyp_set is None else hyp_set
    by_set = np.argsort(hyp_set, kind="stable")
    rank = np.empty(H, dtype=np.int64)  # a hypothesis' slot among those of its set
    rank[by_set] = np.arange(H) - np.searchsorted(hyp_set[by_set], hyp_set[by_set])
    M = int(rank.max()) + 1
    ref_slot = M + np.arange(owner.size) - np.searchsorted(owner, owner)
    K = int(ref_slot.max(initial=M - 1)) + 1
    S = int(max(hyp_set.max(), owner.max(initial=0))) + 1
    seg = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    remaining = np.repeat(np.cumsum(lens), lens) - np.arange(T, dtype=np.int64)
    group = np.r_[hyp_set * K + rank, owner * K + ref_slot][seg]  # (set, slot) of a position
    SK = S * K
    group_hyp = np.full(SK, -1, dtype=np.int64)  # the hypothesis of a (set, slot) group; -1: a reference
    group_hyp[hyp_set * K + rank] = np.arange(H)
    group_set = np.repeat(np.arange(S, dtype=np.int64), K)
    V = int(tok.max()) + 1
    idx, gid, bound = np.arange(T, dtype=np.int64), np.empty(T, dtype=np.int64), V
    for n in range(1, n_max + 1):
        if n > 1:  # the n-grams that start where an (n-1)-gram that may match did
            idx = idx[remaining[idx] >= n]
        if idx.size == 0:
            break
        key = tok[idx] if n == 1 else gid[idx] * V + tok[idx + n - 1]
        bound = V if n == 1 else bound * V
        if bound * SK >= 1 << 62:  # compact the keys first (ids < T) so that the packed key fits in int64
            _, key = np.unique(key, return_inverse=True)
            bound = int(key.max()) + 1
        packed = key * SK + group[idx]
        order = np.argsort(packed)
        pos, key, packed = idx[order], key[order], packed[order]
        new_gram = _changes(key)
        gid[pos] = np.cumsum(new_gram)  # compact gram ids (in sorted order) for the next order
        bound = int(gid[pos[-1]]) + 1
        starts = np.flatnonzero(_changes(packed))  # runs of one (gram, set, slot)
        counts = np.diff(starts, append=key.size)
        grp = group[pos[starts]]
        hyp, gset = group_hyp[grp], group_set[grp]
        first = new_gram[starts]  # the first run of a (gram, set): a hypothesis' run if it has one
        first[1:] |= gset[1:] != gset[:-1]
        heads = np.flatnonzero(first)
        block = np.cumsum(first) - 1  # a run's (gram, set)
        if K - M == 1:  # one reference per set: a block's reference run is its last run, if any
            last = np.append(heads[1:], starts.size) - 1
            in_refs = np.where(hyp[last] < 0, counts[last], 0)
        else:
            in_refs = np.maximum.reduceat(np.where(hyp < 0, counts, 0), heads)
        # a reference's run (hypothesis -1) lands in bin 0, dropped
        num[:, n - 1] = np.bincount(hyp + 1, weights=np.minimum(counts, in_refs[block]), minlength=H + 1)[1:]
        # only an n-gram found in a hypothesis and a reference of one set can start a longer one that matches
        both = (in_refs > 0) & (hyp[heads] >= 0)
        idx = pos[np.repeat(both[block], counts)]
    return num


def pair_matches(hyp: tuple, ref: tuple, owner: np.ndarray, n_ref: int) -> np.ndarray:
    """Per reference segment ``r``: ``sum_g min(count in hyp owner[r], count in r)``."""
    (hs, hg), (rs, rg), G = hyp[:2], ref[:2], hyp[2]
    hk, hc = counts(hs, hg, G)
    rk, rc = counts(rs, rg, G)
    r = rk // G
    m = np.minimum(rc, _lookup(hk, hc, owner[r] * G + rk % G))
    return np.bincount(r, weights=m, minlength=n_ref).astype(np.int64)
