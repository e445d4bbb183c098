"""BLEU over whole batches: the batch form of sacrebleu's 13a tokenizer, reference sets shared by two systems
(the paired tests' one `host_rows` call) and the one-split text encoding, against sacrebleu and per-text splits."""
from __future__ import annotations

import random

import numpy as np
import pytest

import fmetrics
import fmetrics.text as ft
from fmetrics.text import _ngrams, bleu
from tests.cases.text import multi_refs

sacrebleu = pytest.importorskip("sacrebleu", reason="sacrebleu is the BLEU oracle")

# periods, commas and dashes next to digits and to each other, entities, <skipped>, line breaks, unicode
PIECES = list("ab1 9.,-&;<>'\"!?()[]{}/\\:\t\r\u00e9\u2028\u3000") + [
    "&amp;", "&quot;", "&lt;", "&gt;", "<skipped>", "-\n", "\n", "..", "1.5", "a.b", "1,000", "e.g.", "3-4"]


def _lines(rng: random.Random, breaks: bool, adjacent: bool) -> list:
    pieces = [p for p in PIECES if (breaks or "\n" not in p) and (adjacent or p not in ("..", "e.g."))]
    lines = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 15))) for _ in range(rng.randint(0, 12))]
    if not adjacent:  # no period or comma next to another one anywhere
        lines = [line.replace(".", " . ").replace(",", " , ") for line in lines]
    return lines


@pytest.mark.parametrize("breaks", [False, True], ids=["one-line", "line-breaks"])
@pytest.mark.parametrize("adjacent", [False, True], ids=["apart", "adjacent"])
def test_batch_13a_tokens_are_sacrebleus(breaks, adjacent):
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tok, steps = Tokenizer13a(), bleu._v13a_steps()
    assert steps is not None  # the installed sacrebleu has the four steps the batch form was written from
    rng = random.Random(7 + 2 * breaks + adjacent)
    for _ in range(400):
        lines = [s.rstrip() for s in _lines(rng, breaks, adjacent)]
        got = [t.split() for t in bleu._batch_13a(lines, tok, steps)]
        assert got == [tok(s).split() for s in lines], lines


@pytest.mark.parametrize("tokenize", ["13a", "none", "intl"])
def test_two_systems_sharing_references_in_one_call(tokenize):
    """Both systems' rows from one call (references shared) equal sacrebleu's per-sentence statistics."""
    from sacrebleu.metrics import BLEU

    preds, refs = multi_refs(3, 60)
    other, _ = multi_refs(4, 60)
    rows = ft.sacre_bleu_score(tokenize=tokenize).host_rows(preds + other, refs + refs)
    got = np.concatenate([rows.preds_len[:, None], rows.target_len[:, None], rows.numerator, rows.denominator], 1)
    k = max(map(len, refs))
    streams = [[r[i] if i < len(r) else None for r in refs] for i in range(k)]
    oracle = BLEU(tokenize=tokenize)
    want = oracle._extract_corpus_statistics(preds, streams) + oracle._extract_corpus_statistics(other, streams)
    assert got.tolist() == want


def test_encode_texts_with_the_marker_in_a_text():
    texts = ["a \x00 b", "\x00", "", "c  a", "\x00x a"]
    ids, lens = _ngrams.encode_texts(texts)
    assert lens.tolist() == [len(t.split()) for t in texts]
    words = " ".join(texts).split()  # one id per distinct word
    assert len(ids) == len(words) and len(set(zip(words, ids.tolist()))) == len(set(words)) == len(set(ids.tolist()))
    ids, lens = _ngrams.encode_texts(["a b", "b", "", "a"])  # the marker path
    assert lens.tolist() == [2, 1, 0, 1] and ids[0] == ids[3] and ids[1] == ids[2] and ids[0] != ids[1]


def test_paired_bad_second_system_names_its_own_position():
    m = fmetrics.wrappers.paired_bootstrap(ft.sacre_bleu_score(), num_samples=4)
    with pytest.raises(ValueError, match=r"sacre_bleu_score.*preds.*position 1\b"):
        m.update(m.init(), ["a b", "c"], ["a b", 3], [["a b"], ["c"]])
