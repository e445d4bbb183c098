"""Bad input in the text metrics (issue 28): a named error with the state intact, or a documented value.

Oracles: nltk (BLEU weights), sacrebleu (chrF on lone surrogates), torchmetrics (perplexity), the official
SQuAD rules and hand calculations written here.
"""
import math
import random
import re
import sys
import types
import warnings

import pytest
import torch

import adapters
import fmetrics.text as ft
from fmetrics import validation
from tests.cases.text import TinyEncoder, TinyTokenizer, pairs

EMPTY = re.escape("no samples were seen (empty input); the value is undefined and set to NaN")


# --------------------------------------------------------------- BLEU weights


def test_bleu_order_weighted_zero_is_left_out():
    # "a b" vs "a c": p1 = 1/2, p2 = 0/1, equal lengths (BP = 1): 1.0 * log(1/2) + 0 -> 0.5
    assert float(ft.bleu_score(n_gram=2, weights=[1.0, 0.0])(["a b"], [["a c"]])) == pytest.approx(0.5, abs=1e-15)
    # smoothing adds 1 to p2 only: still left out; BP = 1
    assert float(ft.bleu_score(n_gram=2, weights=[1.0, 0.0], smooth=True)(["a b"], [["a c"]])) == pytest.approx(0.5)


@pytest.mark.parametrize("weights", [(0.5, 0.5, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0), (0.2, 0.8, 0.0, 0.0)])
def test_bleu_zero_weights_vs_nltk(weights):
    bleu = pytest.importorskip("nltk.translate.bleu_score", reason="nltk is the weighted-BLEU oracle")
    rng = random.Random(7)
    vocab = "a b c d e".split()
    # hypotheses of 2-3 words: orders 3 and 4 have few or no n-grams, so their precision is 0
    hyps = [" ".join(rng.choice(vocab) for _ in range(rng.randint(2, 3))) for _ in range(30)]
    refs = [[" ".join(rng.choice(vocab) for _ in range(rng.randint(2, 5))) for _ in range(rng.randint(1, 3))]
            for _ in hyps]
    want = bleu.corpus_bleu([[r.split() for r in rs] for rs in refs], [h.split() for h in hyps], weights=weights)
    assert want > 0.1
    assert float(ft.bleu_score(weights=weights)(hyps, refs)) == pytest.approx(want, rel=1e-12, abs=0)
    got = ft.sacre_bleu_score(tokenize="none", weights=weights)(hyps, refs)
    assert float(got) == pytest.approx(want, rel=1e-12, abs=0)


@pytest.mark.parametrize("weights", [(0.0, 0.0), (float("nan"), 1.0), (float("inf"), 1.0), 0.5, "ab"])
def test_bleu_bad_weights(weights):
    with pytest.raises(ValueError, match="bleu_score: argument `weights`"):
        ft.bleu_score(n_gram=2, weights=weights)


# --------------------------------------------------------------- sacreBLEU flores: nothing downloaded


@pytest.fixture
def fake_spm(monkeypatch, tmp_path):
    """A stand-in sentencepiece (absent here) and sacrebleu's model folder in ``tmp_path``; downloads recorded."""
    spm = pytest.importorskip("sacrebleu.tokenizers.tokenizer_spm")
    module = types.ModuleType("sentencepiece")

    class SentencePieceProcessor:
        def Load(self, path):
            self.path = path

        def EncodeAsPieces(self, line):
            return line.split()

    module.SentencePieceProcessor = SentencePieceProcessor
    monkeypatch.setitem(sys.modules, "sentencepiece", module)
    monkeypatch.setattr(spm, "SACREBLEU_DIR", str(tmp_path))
    downloads = []
    monkeypatch.setattr(spm, "download_file", lambda url, path: downloads.append(url))
    return spm, tmp_path, downloads


@pytest.mark.parametrize("tokenize", ["flores101", "flores200"])
def test_flores_needs_the_model_on_disk(fake_spm, tokenize):
    spm, folder, downloads = fake_spm
    with pytest.raises(ValueError, match=rf"sacre_bleu_score: argument `tokenize` expected '{tokenize}' .*on disk"):
        ft.sacre_bleu_score(tokenize=tokenize)
    assert downloads == []
    model = folder / "models" / spm.SPM_MODELS[tokenize]["url"].rsplit("/", 1)[-1]
    model.parent.mkdir()
    model.write_bytes(b"")
    m = ft.sacre_bleu_score(tokenize=tokenize)  # present: loaded, not downloaded
    assert downloads == []
    assert float(m(["the cat sat on it"], [["the cat sat on it"]])) == 1.0


# --------------------------------------------------------------- BERTScore checkpoint


def _bert():
    return ft.bert_score(model=TinyEncoder(), tokenizer=TinyTokenizer())


def test_bert_score_checkpoint_round_trip():
    preds, target = pairs(1, 6, nasty=False)
    saved = adapters.TorchMetric(_bert(), persistent=True)
    saved.update(preds, target)
    assert "0x" not in repr(_bert())  # the tokenizer prints without its memory address
    fresh = adapters.TorchMetric(_bert(), persistent=True)  # built the same way: other objects
    fresh.load_state_dict(saved.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchmetrics: compute before update (the state was loaded)
        got = fresh.compute()
    want = _bert()(preds, target)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=0)


# --------------------------------------------------------------- chrF: lone surrogates are characters


@pytest.mark.parametrize("word_order", [0, 2])
def test_chrf_lone_surrogate_vs_sacrebleu(word_order):
    chrf = pytest.importorskip("sacrebleu.metrics.chrf", reason="sacrebleu is the chrF oracle")
    preds = ["a\ud800b c", "x y \udfff"]
    target = [["a\ud800b d"], ["x \udfff z", "y"]]
    want = chrf.CHRF(word_order=word_order).corpus_score(preds, [[t[0] for t in target], [None, "y"]]).score
    got = ft.chrf_score(n_word_order=word_order)(preds, target)
    assert float(got) == pytest.approx(want / 100, rel=1e-12)


# --------------------------------------------------------------- empty input


EMPTY_NAN = [ft.bleu_score, ft.sacre_bleu_score, ft.chrf_score, ft.translation_edit_rate, ft.word_error_rate,
             ft.char_error_rate, ft.match_error_rate, ft.word_information_lost, ft.word_information_preserved,
             ft.edit_distance, ft.extended_edit_distance, ft.rouge_score, ft.squad, ft.perplexity]


@pytest.mark.parametrize("factory", EMPTY_NAN, ids=lambda f: f.__name__)
def test_empty_corpus_is_nan_with_a_warning(factory):
    m = factory()
    with pytest.warns(UserWarning, match=f"^{m.name}: {EMPTY}"):
        value = m.finalize(m.init())
    for v in (value.values() if isinstance(value, dict) else [value]):
        assert v.dtype == torch.float64 and torch.isnan(v)


@pytest.mark.parametrize("factory", [ft.chrf_score, ft.translation_edit_rate, ft.extended_edit_distance],
                         ids=lambda f: f.__name__)
def test_empty_corpus_sentence_scores(factory):
    m = factory(return_sentence_level_score=True)
    with pytest.warns(UserWarning, match=EMPTY):
        corpus, scores = m.finalize(m.update(m.init(), [], []))
    assert torch.isnan(corpus) and scores.shape == (0,)


def test_empty_edit_distance_sum_and_none_are_defined():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert int(ft.edit_distance(reduction="sum")([], [])) == 0  # the empty sum
        assert ft.edit_distance(reduction="none")([], []).shape == (0,)


def test_empty_batches_change_nothing():
    m = ft.bleu_score()
    s = m.update(m.update(m.init(), [], []), ["the cat sat down"], [["the cat sat down"]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(m.finalize(m.update(s, [], []))) == 1.0


@pytest.mark.parametrize("factory, unit", [(ft.word_error_rate, "word"), (ft.char_error_rate, "character")])
def test_error_rate_of_empty_references_warns(factory, unit):
    with pytest.warns(UserWarning, match=f"references hold no {unit}"):
        assert math.isinf(float(factory()(["a b"], [""])))  # 3 (CER) or 2 (WER) insertions over 0
    with pytest.warns(UserWarning, match=f"references hold no {unit}"):
        assert math.isnan(float(factory()([""], [""])))


# --------------------------------------------------------------- SQuAD: ids of preds and target must match


def _q(i, text="the answer"):
    return {"answers": {"answer_start": [0], "text": [text]}, "id": i}


def _p(i, text="the answer"):
    return {"prediction_text": text, "id": i}


@pytest.mark.parametrize("preds, target, arg, found", [
    ([_p("1")], [_q("1"), _q("2")], "target", "id '2'"),                 # an unanswered question
    ([_p("1"), _p("3")], [_q("1")], "preds", "id '3'"),                  # a prediction without question
    ([_p("1"), _p("1", "x")], [_q("1")], "preds", "id '1' again"),       # one id twice
    ([_p(["1"])], [_q(["1"])], "preds", "['1']"),                        # an id that is no key
    ([_p("1")], [{"answers": {"text": []}, "id": "1"}], "target", "'text': []"),  # no gold answer
])
def test_squad_mismatched_ids_raise_with_state_intact(preds, target, arg, found):
    m = ft.squad()
    s = m.update(m.init(), [_p("a", "Paris"), _p("b", "the big cat")], [_q("a", "paris"), _q("b", "a cat")])
    with pytest.raises(ValueError, match=f"^squad: argument `{arg}`") as info:
        m.update(s, preds, target)
    assert found in str(info.value)
    v = m.finalize(m.update(s, [_p("c", "")], [_q("c", "x")]))
    # official rules by hand: "paris" exact (EM 1, F1 1); "big cat" vs "cat": P 1/2, R 1, F1 2/3; "" vs "x": 0
    assert float(v["exact_match"]) == pytest.approx(100 / 3)
    assert float(v["f1"]) == pytest.approx(100 * (1 + 2 / 3) / 3)


# --------------------------------------------------------------- perplexity: non-finite logits


def _logits(seed, n=2, length=5, vocab=7):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, length, vocab, generator=g), torch.randint(0, vocab, (n, length), generator=g)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "row"])
def test_perplexity_non_finite_logits_eager(bad):
    tm = pytest.importorskip("torchmetrics.functional.text")
    m = ft.perplexity()
    p1, t1 = _logits(0)
    p2, t2 = _logits(1)
    s = m.update(m.init(), p1, t1)
    spoiled = p2.clone()
    if bad == "row":
        spoiled[0, 2] = float("-inf")
    else:
        spoiled[0, 2, 3] = bad
    with pytest.raises(ValueError, match="^perplexity: argument `preds` expected logits with a finite") as info:
        m.update(s, spoiled, t2)
    assert {"nan": "nan", "row": "-inf"}.get(str(bad), "inf") in str(info.value)
    got = m.finalize(m.update(s, p2, t2))
    want = tm.perplexity(torch.cat([p1, p2]).double(), torch.cat([t1, t2]))
    assert float(got) == pytest.approx(float(want), rel=1e-6)


def test_perplexity_non_finite_logits_deferred():
    m = ft.perplexity()
    p1, t1 = _logits(0)
    p2, t2 = _logits(1)
    p2[1, 4, 0] = float("nan")
    with validation.mode("deferred"):
        s = m.update(m.update(m.init(), p1, t1), p2, t2)
    with pytest.raises(ValueError, match=r"^perplexity: 1 input entry broke the rule: `preds`: logits with a "
                                         r"finite .* the first was nan in update call 2"):
        m.finalize(s)


def test_perplexity_masks_and_ignored_positions():
    tm = pytest.importorskip("torchmetrics.functional.text")
    p, t = _logits(2)
    p[:, :, 0] = float("-inf")  # a masked token, never a target
    t = torch.where(t == 0, 1, t)
    p[1, 3] = float("nan")      # an ignored position: not counted, so not checked
    t[1, 3] = -100
    got = ft.perplexity(ignore_index=-100)(p, t)
    want = tm.perplexity(p.double(), t, ignore_index=-100)
    assert float(got) == pytest.approx(float(want), rel=1e-6)
    t[0, 0] = 0  # the target's logit is -inf: probability 0, perplexity inf (defined)
    assert math.isinf(float(ft.perplexity(ignore_index=-100)(p, t)))


def test_rouge_callables_key_and_checkpoint_without_addresses():
    from adapters.distributed import _portable  # the fingerprint every rank must agree on

    def make_norm():  # a new function object per call, as a fresh process builds it
        def norm(s):
            return s.lower()
        return norm

    norm = make_norm()
    m = ft.rouge_score(rouge_keys="rouge1", normalizer=norm)
    assert m.state_key == ft.rouge_score(rouge_keys="rouge1", normalizer=norm).state_key
    assert m.state_key != ft.rouge_score(rouge_keys="rouge1", normalizer=lambda s: s).state_key
    assert "0x" not in repr(_portable(m.state_key)) and "0x" not in repr(m)
    saved = adapters.TorchMetric(m, persistent=True)
    saved.update(["The cat sat"], [["the cat"]])
    fresh = adapters.TorchMetric(ft.rouge_score(rouge_keys="rouge1", normalizer=make_norm()), persistent=True)
    fresh.load_state_dict(saved.state_dict())  # built the same way: another function object
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # rouge1 by hand: 2 of 3 predicted words match, both reference words: P 2/3, R 1, F1 0.8
        assert float(fresh.compute()["rouge1_fmeasure"]) == pytest.approx(0.8)
