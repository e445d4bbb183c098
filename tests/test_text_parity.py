"""Oracle parity of the text metrics: sacrebleu, jiwer, rouge-score, rapidfuzz, the SQuAD rules, torchmetrics.

Corpora are random sentences plus the nasty cases (empty hypotheses and
references, Unicode punctuation and CJK, digits with separators, one-word
sentences, different reference counts per sentence): `tests/cases/text.py`.
"""
import collections
import doctest
import re
import string
import types

import numpy as np
import pytest
import torch

import fmetrics
import fmetrics.text as ft
from tests.cases.text import batches, multi_refs, pairs

REL = 1e-9


def _streams(refs):
    """sacrebleu's reference streams (None where a sentence has fewer references)."""
    k = max(map(len, refs))
    return [[r[i] if i < len(r) else None for r in refs] for i in range(k)]


def _close(got, want, rel=REL, what=""):
    got, want = float(got), float(want)
    assert abs(got - want) <= rel * max(abs(want), 1e-12) + 1e-15, f"{what}: {got} vs {want}"


# --------------------------------------------------------------- sacrebleu


@pytest.mark.parametrize("tokenize", ["none", "13a", "zh", "intl", "char"])
@pytest.mark.parametrize("lowercase", [False, True])
@pytest.mark.parametrize("smooth", [False, True])
def test_sacre_bleu_vs_sacrebleu(tokenize, lowercase, smooth):
    sacrebleu = pytest.importorskip("sacrebleu", reason="sacrebleu is the BLEU oracle")
    for seed in range(2):
        preds, refs = multi_refs(seed, 60)
        want = sacrebleu.corpus_bleu(preds, _streams(refs), tokenize=tokenize, lowercase=lowercase,
                                     smooth_method="add-k" if smooth else "none").score / 100
        got = ft.sacre_bleu_score(tokenize=tokenize, lowercase=lowercase, smooth=smooth)(preds, refs)
        _close(got, want, what=f"sacre_bleu {tokenize} seed {seed}")


@pytest.mark.parametrize("n_gram", [1, 2, 4])
def test_bleu_vs_sacrebleu_no_tokenizer(n_gram):
    sacrebleu = pytest.importorskip("sacrebleu", reason="sacrebleu is the BLEU oracle")
    from sacrebleu.metrics import BLEU

    preds, refs = multi_refs(3, 80)
    want = BLEU(tokenize="none", max_ngram_order=n_gram).corpus_score(preds, _streams(refs)).score / 100
    _close(ft.bleu_score(n_gram=n_gram)(preds, refs), want)


def test_bleu_vs_torchmetrics():
    tm = pytest.importorskip("torchmetrics.functional.text")
    preds, refs = multi_refs(5, 80, nasty=False)
    got = ft.bleu_score()(preds, refs)
    assert abs(float(got) - float(tm.bleu_score(preds, refs))) < 1e-6  # float32 there
    preds = ["the cat is on the mat"]
    target = [["there is a cat on the mat", "a cat is on the mat"]]
    assert abs(float(ft.bleu_score(smooth=True)(preds, target)) - float(tm.bleu_score(preds, target, smooth=True))) < 1e-6


def test_bleu_tokenizers_needing_packages():
    for tok in ("ja-mecab", "ko-mecab"):
        try:
            ft.sacre_bleu_score(tokenize=tok)
        except ModuleNotFoundError as err:
            assert "sacre_bleu_score needs" in str(err) and "pip install" in str(err)
    with pytest.raises(ValueError, match="sacre_bleu_score: argument `tokenize`"):
        ft.sacre_bleu_score(tokenize="bogus")


@pytest.mark.parametrize("orders", [(6, 2), (6, 0), (3, 1), (1, 0)])
@pytest.mark.parametrize("lowercase,whitespace,beta", [(False, False, 2.0), (True, True, 1.0), (False, True, 3.0)])
def test_chrf_vs_sacrebleu(orders, lowercase, whitespace, beta):
    pytest.importorskip("sacrebleu", reason="sacrebleu is the chrF oracle")
    from sacrebleu.metrics import CHRF

    for seed in range(2):
        preds, refs = multi_refs(seed, 50)
        c = CHRF(char_order=orders[0], word_order=orders[1], beta=beta, lowercase=lowercase, whitespace=whitespace)
        got, sent = ft.chrf_score(n_char_order=orders[0], n_word_order=orders[1], beta=beta, lowercase=lowercase,
                                  whitespace=whitespace, return_sentence_level_score=True)(preds, refs)
        _close(got, c.corpus_score(preds, _streams(refs)).score / 100)
        want = torch.tensor([c.sentence_score(h, r).score / 100 for h, r in zip(preds, refs)], dtype=torch.float64)
        torch.testing.assert_close(sent, want, rtol=REL, atol=1e-15)


@pytest.mark.parametrize("opts", [(False, False, True, False), (True, False, False, False), (True, True, True, True),
                                  (False, True, False, True)])
def test_ter_vs_sacrebleu(opts):
    pytest.importorskip("sacrebleu", reason="sacrebleu is the TER oracle")
    from sacrebleu.metrics import TER

    preds, refs = multi_refs(7, 40)
    t = TER(normalized=opts[0], no_punct=opts[1], case_sensitive=not opts[2], asian_support=opts[3])
    got, sent = ft.translation_edit_rate(normalize=opts[0], no_punctuation=opts[1], lowercase=opts[2],
                                         asian_support=opts[3], return_sentence_level_score=True)(preds, refs)
    _close(got, t.corpus_score(preds, _streams(refs)).score / 100)
    want = torch.tensor([t.sentence_score(h, r).score / 100 for h, r in zip(preds, refs)], dtype=torch.float64)
    torch.testing.assert_close(sent, want, rtol=REL, atol=1e-15)


# --------------------------------------------------------------- jiwer, rapidfuzz


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_asr_rates_vs_jiwer(seed):
    jiwer = pytest.importorskip("jiwer", reason="jiwer is the WER/MER/WIL/WIP oracle")
    preds, target = pairs(seed, 200)
    o = jiwer.process_words(target, preds)
    assert float(ft.word_error_rate()(preds, target)) == pytest.approx(o.wer, rel=REL)
    assert float(ft.match_error_rate()(preds, target)) == pytest.approx(o.mer, rel=REL)
    assert float(ft.word_information_preserved()(preds, target)) == pytest.approx(o.wip, rel=REL)
    assert float(ft.word_information_lost()(preds, target)) == pytest.approx(o.wil, rel=REL)
    # jiwer's CER strips each string's ends first (torchmetrics and fmetrics do not): compare on stripped text
    ps, ts = [p.strip() for p in preds], [t.strip() for t in target]
    assert float(ft.char_error_rate()(ps, ts)) == pytest.approx(jiwer.cer(ts, ps), rel=REL)


def test_wer_cer_vs_torchmetrics_and_mer_wil_difference():
    tm = pytest.importorskip("torchmetrics.functional.text")
    jiwer = pytest.importorskip("jiwer")
    preds, target = pairs(11, 300)
    for name in ("word_error_rate", "char_error_rate"):
        assert abs(float(getattr(ft, name)()(preds, target)) - float(getattr(tm, name)(preds, target))) < 1e-6
    # torchmetrics' MER divides by sum max(N_ref, N_hyp) rather than H + S + D + I: they differ exactly when an
    # alignment holds both deletions and insertions. A pair where the minimal alignment has both:
    p, t = ["b c d e"], ["a b c d"]  # delete "a", keep "b c d", insert "e": H=3, S=0, D=1, I=1
    o = jiwer.process_words(t, p)
    assert (o.hits, o.substitutions, o.deletions, o.insertions) == (3, 0, 1, 1)
    assert float(ft.match_error_rate()(p, t)) == pytest.approx(o.mer) == pytest.approx(2 / 5)
    assert float(tm.match_error_rate(p, t)) == pytest.approx(2 / 4)  # / max(4, 4)
    # torchmetrics' WIL uses (errors - sum max(N_ref, N_hyp)) = min(D, I) - H in place of H
    assert float(ft.word_information_lost()(p, t)) == pytest.approx(o.wil) == pytest.approx(1 - 9 / 16)
    assert float(tm.word_information_lost(p, t)) == pytest.approx(1 - (2 / 4) ** 2)


@pytest.mark.parametrize("cost", [0, 1, 2, 5])
def test_edit_distance_vs_rapidfuzz_and_torchmetrics(cost):
    Levenshtein = pytest.importorskip("rapidfuzz.distance.Levenshtein")
    tm = pytest.importorskip("torchmetrics.functional.text")
    preds, target = pairs(4, 100)
    want = torch.tensor([Levenshtein.distance(p, t, weights=(1, 1, cost)) for p, t in zip(preds, target)])
    assert torch.equal(ft.edit_distance(substitution_cost=cost, reduction="none")(preds, target), want)
    assert int(ft.edit_distance(substitution_cost=cost, reduction="sum")(preds, target)) == int(want.sum())
    mean = ft.edit_distance(substitution_cost=cost)(preds, target)
    assert float(mean) == pytest.approx(float(want.double().mean()), rel=REL)
    if cost:  # torchmetrics' own DP
        assert float(mean) == pytest.approx(float(tm.edit_distance(preds, target, substitution_cost=cost)), rel=1e-6)


class _Str(str):
    pass


@pytest.mark.parametrize("cost", [1, 3])
def test_edit_distance_batches_and_nasty_strings_vs_a_rapidfuzz_loop(cost):
    """Batched updates (an empty one, tuples, str subclasses, strings across rapidfuzz's 64-character blocks,
    non-BMP characters) against one rapidfuzz call per pair."""
    Levenshtein = pytest.importorskip("rapidfuzz.distance.Levenshtein")
    preds, target = pairs(11, 60)
    rng = np.random.default_rng(cost)
    long = ["".join(rng.choice(list("ab c\u00e9\u6570\U0001f600"), size=n)) for n in (63, 64, 65, 130, 700)]
    preds += long + [_Str("subclass"), "x" * 200]
    target += long[::-1] + ["sub class", _Str("y" * 199)]
    want = [Levenshtein.distance(p, t, weights=(1, 1, cost)) for p, t in zip(preds, target)]
    for reduction in ("sum", "none", "mean"):
        m = ft.edit_distance(substitution_cost=cost, reduction=reduction)
        s = m.init()
        for p, t in batches(preds, target, sizes=(7, 0, 13, 1, 30)):
            s = m.update(s, tuple(p), t)
        got = m.finalize(s)
        if reduction == "none":
            assert got.dtype == torch.int64 and got.tolist() == want
        elif reduction == "sum":
            assert got.dtype == torch.int64 and int(got) == sum(want)
        else:
            assert got.dtype == torch.float64 and float(got) == pytest.approx(sum(want) / len(want), rel=REL)
    with pytest.raises(ValueError, match=r"edit_distance.*target.*a list of strings.*a bytes at position 1"):
        ft.edit_distance()(["a", "b"], ["a", b"b"])


def test_edit_distance_across_the_band_cap_vs_a_rapidfuzz_loop():
    """Long strings (the banded first pass, exact up to 31 edits, then the full kernel past it): distances on
    both sides of the cap, equal strings, a long and a short side, and a batch of short strings (one pass)."""
    Levenshtein = pytest.importorskip("rapidfuzz.distance.Levenshtein")
    rng = np.random.default_rng(5)
    alphabet = list("abcd \u00e9\U0001f600")

    def edited(s, k):  # k random substitutions, deletions and insertions
        s = list(s)
        for op in rng.integers(0, 3, size=k):
            i = int(rng.integers(0, len(s)))
            if op == 0:
                s[i] = str(rng.choice(alphabet))
            elif op == 1 and len(s) > 1:
                del s[i]
            else:
                s.insert(i, str(rng.choice(alphabet)))
        return "".join(s)

    refs = ["".join(rng.choice(alphabet, size=int(n))) for n in rng.integers(65, 400, size=120)]
    preds = [edited(r, k) for r, k in zip(refs, [*range(25, 45), *rng.integers(0, 120, size=100)])]
    preds += ["x" * 300, refs[0], "y"]
    refs += ["x" * 300, refs[0], "z" * 500]
    short = [("ab" * 20, "ba" * 20), ("a" * 40, "b" * 50)]
    for p, t in (preds, refs), tuple(map(list, zip(*short))):
        want = [Levenshtein.distance(a, b) for a, b in zip(p, t)]
        assert any(31 < w for w in want) and any(0 < w <= 31 for w in want)
        assert ft.edit_distance(reduction="none")(p, t).tolist() == want


@pytest.mark.parametrize("language", ["en", "ja"])
@pytest.mark.parametrize("kw", [{}, {"alpha": 1.0, "rho": 0.5, "deletion": 0.4, "insertion": 0.7}])
def test_extended_edit_distance_vs_torchmetrics(language, kw):
    """torchmetrics' port of the RWTH EED is the oracle (float32 there: 1e-6)."""
    tm = pytest.importorskip("torchmetrics.functional.text")
    preds, refs = multi_refs(1, 30)
    got, sent = ft.extended_edit_distance(language=language, return_sentence_level_score=True, **kw)(preds, refs)
    want, want_sent = tm.extended_edit_distance(preds, refs, language=language, return_sentence_level_score=True, **kw)
    assert abs(float(got) - float(want)) < 1e-6
    torch.testing.assert_close(sent, want_sent.double(), rtol=0, atol=1e-6)


# --------------------------------------------------------------- rouge-score


@pytest.mark.parametrize("use_stemmer", [False, True])
@pytest.mark.parametrize("accumulate", ["best", "avg"])
def test_rouge_vs_rouge_score(use_stemmer, accumulate):
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer", reason="rouge-score is the ROUGE oracle")
    keys = ["rouge1", "rouge2", "rouge4", "rougeL", "rougeLsum"]
    preds, refs = multi_refs(2, 50)
    preds = [p.replace(" . ", " .\n") for p in preds]  # several sentences per summary for Lsum
    refs = [[r.replace(" , ", " ,\n") for r in rs] for rs in refs]
    refs[5] = ["Running runs RAN quickly\nthe houses were running"]  # stemming matters
    preds[5] = "the house runs quickly\nran"
    sc = rouge_scorer.RougeScorer(keys, use_stemmer=use_stemmer)
    got = ft.rouge_score(rouge_keys=tuple(keys), use_stemmer=use_stemmer, accumulate=accumulate)(preds, refs)
    for k in keys:
        rows = []
        for p, rs in zip(preds, refs):
            if accumulate == "best":
                s = sc.score_multi(rs, p)[k]
                rows.append((s.precision, s.recall, s.fmeasure))
            else:
                rows.append(np.mean([[s[k].precision, s[k].recall, s[k].fmeasure] for s in (sc.score(r, p)
                                                                                           for r in rs)], 0))
        want = np.mean(rows, 0)
        for j, t in enumerate(("precision", "recall", "fmeasure")):
            assert float(got[f"{k}_{t}"]) == pytest.approx(want[j], rel=REL, abs=1e-15), (k, t)


def test_rouge_keys_match_torchmetrics():
    tm = pytest.importorskip("torchmetrics.functional.text")
    preds, target = pairs(9, 30, nasty=False)
    got = ft.rouge_score(rouge_keys=("rouge1", "rouge2", "rougeL"))(preds, target)
    want = tm.rouge_score(preds, target, rouge_keys=("rouge1", "rouge2", "rougeL"))
    assert list(got) == list(want)
    for k in want:
        assert abs(float(got[k]) - float(want[k])) < 1e-6, k


# --------------------------------------------------------------- SQuAD: the official v1.1 rules, written here


def _official_normalize(s):
    """SQuAD v1.1 evaluate-v1.1.py: lower, remove punctuation, remove articles, fix whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _official_f1(prediction, truth):
    """SQuAD v2.0 evaluate-v2.0.py ``compute_f1`` (v1.1's, plus: an empty answer on either side scores
    ``gold == pred``), the rule torchmetrics follows."""
    p = _official_normalize(prediction).split() if prediction else []
    t = _official_normalize(truth).split() if truth else []
    common = collections.Counter(p) & collections.Counter(t)
    same = sum(common.values())
    if not p or not t:
        return float(p == t)
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def test_squad_vs_official_rules():
    from tests.cases.text import _squad

    batches = _squad(3)
    preds = [p for b in batches for p in b[0]]
    target = [t for b in batches for t in b[1]]
    preds.append({"prediction_text": "The  Answer!", "id": "x"})
    target.append({"answers": {"text": ["answer", "an answer."]}, "id": "x"})
    em = f1 = 0.0
    answers = {p["id"]: p["prediction_text"] for p in preds}
    for t in target:
        pred = answers[t["id"]]
        em += max(float(_official_normalize(pred) == _official_normalize(g)) for g in t["answers"]["text"])
        f1 += max(_official_f1(pred, g) for g in t["answers"]["text"])
    got = ft.squad()(preds, target)
    assert float(got["exact_match"]) == pytest.approx(100 * em / len(target), rel=REL)
    assert float(got["f1"]) == pytest.approx(100 * f1 / len(target), rel=REL)


# --------------------------------------------------------------- perplexity


def test_perplexity_vs_torchmetrics():
    tm = pytest.importorskip("torchmetrics.functional.text")
    g = torch.Generator().manual_seed(0)
    p = torch.randn(8, 20, 50, generator=g)
    t = torch.randint(0, 50, (8, 20), generator=g)
    t[:, -5:] = -100
    got = ft.perplexity(ignore_index=-100)(p, t)
    assert float(got) == pytest.approx(float(tm.perplexity(p, t, ignore_index=-100)), rel=1e-5)


# --------------------------------------------------------------- bad input: names the metric and the argument


STRING_METRICS = [ft.bleu_score(), ft.sacre_bleu_score(), ft.chrf_score(), ft.translation_edit_rate(),
                  ft.rouge_score(), ft.word_error_rate(), ft.char_error_rate(), ft.match_error_rate(),
                  ft.word_information_lost(), ft.word_information_preserved(), ft.edit_distance(),
                  ft.extended_edit_distance()]


@pytest.mark.parametrize("m", STRING_METRICS, ids=lambda m: m.name)
def test_bad_input_names_metric_and_argument(m):
    s = m.update(m.init(), ["a b c"], [["a b"]] if m.name not in _PAIRS else ["a b"])
    before = [x.clone() if isinstance(x, torch.Tensor) else x for x in s]
    good_ref = (lambda n: [["a"]] * n) if m.name not in _PAIRS else (lambda n: ["a"] * n)
    bad = [
        (["a", "b"], good_ref(1), "target"),     # length mismatch
        ([1, "b"], good_ref(2), "preds"),        # non-string item
        (None, good_ref(1), "preds"),
    ]
    if m.name not in _PAIRS:
        bad.append((("a",), "a", "target"))     # a string where a list of reference lists is expected
        bad.append((["a"], [[3]], "target"))     # non-string reference
        bad.append((["a"], [[]], "target"))      # no reference for a sentence
    for preds, target, arg in bad:
        with pytest.raises(ValueError, match=rf"^{m.name}: argument `{arg}`"):
            m.update(s, preds, target)
    after = list(s)
    for x, y in zip(before, after):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y)


_PAIRS = {"word_error_rate", "char_error_rate", "match_error_rate", "word_information_lost",
          "word_information_preserved", "edit_distance"}


def test_empty_corpus_and_empty_batches():
    """A batch of zero sentences is valid (empty shards); an empty corpus is NaN with a warning (conventions)."""
    m = ft.bleu_score()
    s = m.update(m.init(), [], [])
    for metric, state in ((m, s), (ft.chrf_score(), None), (ft.translation_edit_rate(), None),
                          (ft.word_error_rate(), None)):
        with pytest.warns(UserWarning, match="no samples were seen"):
            assert torch.isnan(metric.finalize(state if state is not None else metric.update(metric.init(), [], [])))


def test_squad_bad_input():
    with pytest.raises(ValueError, match="squad: argument `preds`"):
        ft.squad()([{"id": "1"}], [{"answers": {"text": ["a"]}, "id": "1"}])
    with pytest.raises(ValueError, match="squad: argument `target`"):
        ft.squad()([{"prediction_text": "a", "id": "1"}], [{"answers": {"text": "a"}, "id": "1"}])


def test_perplexity_bad_input():
    with pytest.raises(ValueError, match="perplexity: argument `preds`"):
        ft.perplexity()(torch.randn(2, 3), torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="perplexity: argument `target`"):
        ft.perplexity()(torch.randn(2, 3, 4), torch.zeros(2, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"perplexity: argument `target` expected .* found 4 and 7"):
        ft.perplexity()(torch.randn(1, 2, 4), torch.tensor([[4, 7]]))


# --------------------------------------------------------------- docs: examples, top level, repr


def test_docstring_examples():
    import fmetrics.text.asr
    import fmetrics.text.bleu
    import fmetrics.text.chrf
    import fmetrics.text.edit
    import fmetrics.text.eed
    import fmetrics.text.perplexity
    import fmetrics.text.rouge
    import fmetrics.text.squad
    import fmetrics.text.ter

    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    mods = [fmetrics.text.asr, fmetrics.text.bleu, fmetrics.text.chrf, fmetrics.text.edit, fmetrics.text.eed, fmetrics.text.perplexity,
            fmetrics.text.rouge, fmetrics.text.squad, fmetrics.text.ter]
    ran = 0
    for mod in mods:
        # the examples call fmetrics.<name>: resolved here from fmetrics.text alone
        names = types.SimpleNamespace(**{n: getattr(ft, n) for n in ft.__all__})
        for test in finder.find(mod, globs={"fmetrics": names, "torch": torch}):
            ran += len(test.examples)
            runner.run(test)
    assert runner.failures == 0
    assert ran >= 12


def test_top_level_and_repr():
    for name in ft.__all__:
        assert getattr(fmetrics, name) is getattr(ft, name)
    assert repr(ft.sacre_bleu_score(tokenize="intl")) == "sacre_bleu_score(tokenize='intl')"
    with pytest.raises(TypeError, match="keyword-only"):
        ft.bleu_score(3)
