"""InfoLM: parity with torchmetrics' `infolm` loading the same tiny random BERT masked LM from disk.

The network is built offline (tests/_tiny_mlm.py) and saved with ``save_pretrained``; torchmetrics loads it
with ``model_name_or_path=<folder>``. The parity network is float64: torchmetrics then computes in float64
too, so agreement is checked to 1e-6 (largest deviation seen 2.4e-7; its IDF weights are float32). A float32 network is
checked at float32 precision.

Two torchmetrics 1.9 defects shape the corpora fed to it (docs/text.md, "InfoLM"): it restores the
length-sorted order with the sorting permutation instead of its inverse, so its pairs are matched correctly
only when that permutation is its own inverse (strictly increasing lengths on both sides: the identity), and
with ``idf=True`` it fails unless one batch holds the whole corpus. Any-order corpora are checked pair by
pair (a one-pair corpus has no sorting) where the value does not depend on the corpus (no IDF).
"""
from __future__ import annotations

import math
import random
import warnings

import pytest
import torch

import fmetrics

transformers = pytest.importorskip("transformers")
tm_text = pytest.importorskip("torchmetrics.functional.text.infolm")

from tests._tiny_mlm import WORDS, tiny_mlm  # noqa: E402

MEASURES = [("kl_divergence", None, None), ("alpha_divergence", 0.5, None), ("beta_divergence", None, 0.5),
            ("ab_divergence", 0.5, 0.7), ("renyi_divergence", 0.3, None), ("l1_distance", None, None),
            ("l2_distance", None, None), ("l_infinity_distance", None, None), ("fisher_rao_distance", None, None)]
ODD = ["The", "CAT", "zebra", "qwerty", "[MASK]", "[SEP]", "the", "the"]  # case, unknown words, specials, repeats


@pytest.fixture(scope="module")
def net64(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mlm64"))
    transformers.logging.set_verbosity_error()
    return (*tiny_mlm(folder, seed=1, dtype=torch.float64), folder)


@pytest.fixture(scope="module")
def net32(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("mlm32"))
    transformers.logging.set_verbosity_error()
    return (*tiny_mlm(folder, seed=2), folder)


def _peer(preds, target, folder, **kw):
    kw.setdefault("batch_size", 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mean, sent = tm_text.infolm(preds, target, model_name_or_path=folder, verbose=False,
                                    return_sentence_level_score=True, **kw)
    return mean.double(), sent.double()


def _increasing(seed: int, n: int, tokenizer) -> tuple[list, list]:
    """``n`` pairs whose token counts increase strictly on both sides (torchmetrics pairs them correctly)."""
    rng = random.Random(seed)
    words = list(WORDS) + ODD
    preds = [" ".join([rng.choice(WORDS)] + [rng.choice(words) for _ in range(i)]) for i in range(n)]
    target = [" ".join([rng.choice(WORDS)] + [rng.choice(words) for _ in range(2 * i + rng.randint(0, 1))])
              for i in range(n)]
    for side in (preds, target):
        lens = [len(x) for x in tokenizer(side)["input_ids"]]
        assert all(a < b for a, b in zip(lens, lens[1:])), lens  # the oracle's precondition
    return preds, target


def _anyorder(seed: int, n: int) -> tuple[list, list]:
    rng = random.Random(seed)
    words = list(WORDS) + ODD
    return tuple([" ".join([rng.choice(WORDS)] + [rng.choice(words) for _ in range(rng.randint(0, 8))])
                  for _ in range(n)] for _ in range(2))


def _close(ours, ref, tol=1e-6):
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, ref, rtol=0, atol=tol)


@pytest.mark.parametrize("idf", [False, True], ids=["plain", "idf"])
@pytest.mark.parametrize("measure,alpha,beta", MEASURES, ids=[m[0] for m in MEASURES])
def test_every_measure_matches_torchmetrics(net64, measure, alpha, beta, idf):
    model, tok, folder = net64
    preds, target = _increasing(10 * [m[0] for m in MEASURES].index(measure) + idf, 7, tok)
    kw = dict(information_measure=measure, alpha=alpha, beta=beta, idf=idf, max_length=40)
    ref_mean, ref_sent = _peer(preds, target, folder, **kw)
    m = fmetrics.infolm(model=model, tokenizer=tok, batch_size=5, return_sentence_level_score=True, **kw)
    mean, sent = m(preds, target)
    _close(sent, ref_sent)
    _close(mean, ref_mean)
    assert float(sent.std()) > 1e-3  # the pairs differ: a mis-pairing would show
    corpus = fmetrics.infolm(model=model, tokenizer=tok, **kw)(preds, target)  # the corpus-level form
    _close(corpus, ref_mean)


@pytest.mark.parametrize("temperature", [1.0, 0.05])
def test_temperature_and_random_parameters_match(net64, temperature):
    model, tok, folder = net64
    rng = random.Random(int(temperature * 100))
    a, b = rng.uniform(0.1, 0.9), rng.uniform(-0.9, 2.0)
    preds, target = _increasing(int(temperature * 10), 6, tok)
    for measure in ("ab_divergence", "renyi_divergence"):
        kw = dict(information_measure=measure, alpha=a, beta=b if measure == "ab_divergence" else None,
                  temperature=temperature, idf=True, max_length=40)
        ref_mean, ref_sent = _peer(preds, target, folder, **kw)
        mean, sent = fmetrics.infolm(model=model, tokenizer=tok, return_sentence_level_score=True, **kw)(preds, target)
        _close(sent, ref_sent)
        _close(mean, ref_mean)


def test_idf_over_the_whole_corpus_fed_in_batches(net64):
    """The IDF is over every sentence of every batch and rank: batched and merged states give the one-call value."""
    model, tok, folder = net64
    preds, target = _increasing(11, 9, tok)
    ref_mean, ref_sent = _peer(preds, target, folder, idf=True, max_length=40)
    m = fmetrics.infolm(model=model, tokenizer=tok, idf=True, max_length=40, return_sentence_level_score=True)
    a = m.update(m.update(m.init(), preds[:2], target[:2]), preds[2:5], target[2:5])
    b = m.update(m.init(), preds[5:], target[5:])
    mean, sent = m.finalize(m.merge(a, b))
    _close(sent, ref_sent)
    _close(mean, ref_mean)
    alone = m(preds[5:], target[5:])[1]  # IDF over a smaller corpus: a different value (the test can fail)
    assert (alone - ref_sent[5:]).abs().max() > 1e-4


@pytest.mark.parametrize("measure", ["kl_divergence", "fisher_rao_distance"])
def test_any_order_and_truncation_pair_by_pair(net64, measure):
    """Pairs in any order (equal lengths, longer than max_length): each pair against a one-pair torchmetrics call."""
    model, tok, folder = net64
    preds, target = _anyorder(5, 8)
    preds[3] = " ".join(WORDS[:20])  # truncated to 9 tokens
    m = fmetrics.infolm(model=model, tokenizer=tok, information_measure=measure, idf=False, max_length=9,
                        batch_size=3, return_sentence_level_score=True)
    mean, sent = m(preds, target)
    ref = torch.stack([_peer([p], [t], folder, information_measure=measure, idf=False, max_length=9)[0]
                       for p, t in zip(preds, target)])
    _close(sent, ref)
    _close(mean, ref.mean())


def test_float32_network_default_options(net32):
    """Defaults (KL, IDF, temperature 0.25) on a float32 network: agreement to float32 precision."""
    model, tok, folder = net32
    preds, target = _increasing(3, 8, tok)
    ref_mean, ref_sent = _peer(preds, target, folder, max_length=40)
    mean, sent = fmetrics.infolm(model=model, tokenizer=tok, max_length=40, return_sentence_level_score=True)(
        preds, target)
    torch.testing.assert_close(sent, ref_sent, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-4, atol=1e-5)


def test_hand_formula_kl_with_idf(net64):
    """The published definition written out: masked-token distributions, IDF weights, KL (torchmetrics' sign)."""
    model, tok, _ = net64
    preds, target = _anyorder(9, 5)

    def dist(sents):
        ids = tok(sents)["input_ids"]
        df = {}
        for x in ids:
            for t in set(x):
                df[t] = df.get(t, 0) + 1
        out = []
        for x in ids:
            acc, norm = 0, 0.0
            for k, t in enumerate(x):
                if t in (tok.cls_token_id, tok.sep_token_id, tok.pad_token_id):
                    continue
                y = list(x)
                y[k] = tok.mask_token_id
                with torch.no_grad():
                    logits = model(torch.tensor([y])).logits[0, k]
                w = math.log((len(ids) + 1) / (df[t] + 1))
                acc = acc + w * torch.softmax(logits / 0.25, -1)
                norm += w
            out.append(acc / norm)
        return torch.stack(out)

    p, q = dist(preds), dist(target)
    ref = torch.nan_to_num((q * torch.log(p / q)).sum(-1))
    mean, sent = fmetrics.infolm(model=model, tokenizer=tok, return_sentence_level_score=True)(preds, target)
    _close(sent, ref, 1e-9)
    _close(mean, ref.mean(), 1e-9)


# --------------------------------------------------------------- bad input, empty input, the network untouched


def _m(net, **kw):
    return fmetrics.infolm(model=net[0], tokenizer=net[1], **kw)


@pytest.mark.parametrize("preds,target,arg,says", [
    (["a cat", ""], ["the dog", "a dog"], "preds", "non-empty texts"),
    (["a cat"], ["   "], "target", "non-empty texts"),
    (["a cat", "[SEP]"], ["the dog", "a dog"], "preds", "a token besides the special ones"),
    (["a cat", "the dog"], ["the dog"], "target", "as many sentences as `preds` (2)"),
    (["a cat", 3], ["the dog", "a dog"], "preds", "a list of strings"),
    (["a cat"], [None], "target", "a list of strings"),
    ("a cat", 5, "target", "a string or a list of strings"),
])
@pytest.mark.parametrize("idf", [False, True])
def test_bad_input_names_metric_and_argument_state_intact(net32, preds, target, arg, says, idf):
    m = _m(net32, idf=idf, max_length=40)
    good = m.update(m.init(), ["the cat sat"], ["a cat sat on the mat"])
    with pytest.raises(ValueError, match=rf"^infolm: argument `{arg}` expected .*") as err:
        m.update(good, preds, target)
    assert says in str(err.value)
    torch.testing.assert_close(m.finalize(good), m(["the cat sat"], ["a cat sat on the mat"]))


@pytest.mark.parametrize("kw,arg", [
    ({"information_measure": "kl"}, "information_measure"),
    ({"information_measure": "alpha_divergence"}, "alpha"),
    ({"information_measure": "alpha_divergence", "alpha": 1.0}, "alpha"),
    ({"information_measure": "alpha_divergence", "alpha": 0}, "alpha"),
    ({"information_measure": "renyi_divergence", "alpha": 1}, "alpha"),
    ({"information_measure": "beta_divergence"}, "beta"),
    ({"information_measure": "beta_divergence", "beta": -1.0}, "beta"),
    ({"information_measure": "ab_divergence", "alpha": 0.5}, "beta"),
    ({"information_measure": "ab_divergence", "alpha": 0.5, "beta": -0.5}, "beta"),
    ({"information_measure": "ab_divergence", "alpha": float("nan"), "beta": 1.0}, "alpha"),
    ({"temperature": 0}, "temperature"),
    ({"temperature": float("inf")}, "temperature"),
    ({"max_length": 0}, "max_length"),
    ({"batch_size": 0}, "batch_size"),
    ({"num_threads": -1}, "num_threads"),
])
def test_bad_configuration(net32, kw, arg):
    with pytest.raises(ValueError, match=rf"^infolm: argument `{arg}` expected"):
        _m(net32, **kw)


def test_bad_network_and_tokenizer(net32):
    with pytest.raises(ValueError, match=r"^infolm: argument `model` expected a masked language model.*nothing is "):
        fmetrics.infolm(model="bert-base-uncased", tokenizer=net32[1])

    class NoMask:
        pad_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 1, 2, None

        def __call__(self, texts, **kw):
            return {"input_ids": [[1, 5, 2] for _ in texts]}

    with pytest.raises(ValueError, match=r"^infolm: argument `tokenizer` expected .*`mask_token_id`"):
        fmetrics.infolm(model=net32[0], tokenizer=NoMask())


@pytest.mark.parametrize("sentence_level", [False, True])
@pytest.mark.parametrize("idf", [False, True])
def test_empty_corpus_is_nan_with_a_warning(net32, idf, sentence_level):
    m = _m(net32, idf=idf, return_sentence_level_score=sentence_level)
    s = m.update(m.init(), [], [])
    with pytest.warns(UserWarning, match="infolm: no samples were seen"):
        v = m.finalize(s)
    mean = v[0] if sentence_level else v
    assert mean.dtype == torch.float64 and torch.isnan(mean)
    if sentence_level:
        assert v[1].shape == (0,)


class _Broken(torch.nn.Module):
    """A masked LM whose logits are NaN for sentences holding the token ``bad``."""

    def __init__(self, inner, bad):
        super().__init__()
        self.inner, self.bad = inner, bad

    def forward(self, input_ids, attention_mask=None):
        logits = self.inner(input_ids, attention_mask=attention_mask).logits
        return logits.masked_fill(input_ids.eq(self.bad).any(1)[:, None, None], float("nan"))


@pytest.mark.parametrize("idf", [False, True])
def test_non_finite_logits_raise(net32, idf):
    model, tok, _ = net32
    m = fmetrics.infolm(model=_Broken(model, tok.convert_tokens_to_ids("cat")), tokenizer=tok, idf=idf)
    good = m.update(m.init(), ["the dog"], ["a dog sat"])
    with pytest.raises(ValueError, match=r"^infolm: the model returned non-finite logits"):
        m.finalize(m.update(good, ["the cat"], ["a dog"]))
    assert torch.isfinite(m.finalize(good))


def test_network_mode_and_device_untouched(net32):
    model, tok, _ = net32
    preds, target = ["the cat sat on the mat", "a dog"], ["a cat sat", "the big dog ran"]
    expected = _m(net32, idf=False)(preds, target)
    model.train()  # dropout on: the metric must still run it in eval mode, and leave it in training mode
    try:
        got = _m(net32, idf=False)(preds, target)
        assert model.training and all(x.training for x in model.modules())
    finally:
        model.eval()
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert next(model.parameters()).dtype == torch.float32
