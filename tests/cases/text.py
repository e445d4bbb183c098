"""Law-suite cases for the text metrics, and the synthetic corpora (random sentences plus the nasty cases)."""
from __future__ import annotations

import random

WORDS = ("the a cat dog sat on mat is was there house running runs ran quickly , . ! ? ; : ' \" ( ) "
         "1,000 3.14 2024-01-05 $5 50% U.S. don't it's e-mail x86_64 «quoted» — … ¿qué? ¡sí! "
         "数据 中文 测试 。 ， 東京 日本語 한국어 café naïve Straße ÉCOLE").split()
NASTY = [
    ("", "a reference"),
    ("a hypothesis", ""),
    ("", ""),
    ("word", "word"),
    ("word", "other"),
    ("数据测试。中文，东京", "数据 测试 。 中文"),
    ("He paid $1,000.50 (approx.) — «ok»!", "He paid $ 1,000.50 approx. -- ok !"),
    ("  spaced   out  ", "spaced out"),
    ("The THE the", "the"),
]


def sentence(rng: random.Random, lo: int = 1, hi: int = 12, words=WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))


def noisy(rng: random.Random, s: str, rate: float = 0.3, words=WORDS) -> str:
    out = []
    for w in s.split():
        u = rng.random()
        if u < rate / 3:
            continue  # deletion
        if u < 2 * rate / 3:
            out.append(rng.choice(words))  # substitution
        else:
            out.append(w)
        if rng.random() < rate / 3:
            out.append(rng.choice(words))  # insertion
    return " ".join(out)


def pairs(seed: int, n: int = 40, nasty: bool = True) -> tuple[list, list]:
    """``n`` (hypothesis, reference) pairs, the nasty cases first."""
    rng = random.Random(seed)
    preds, target = [], []
    if nasty:
        for h, r in NASTY:
            preds.append(h)
            target.append(r)
    while len(preds) < n:
        r = sentence(rng)
        preds.append(noisy(rng, r))
        target.append(r)
    return preds, target


def multi_refs(seed: int, n: int = 40, max_refs: int = 3, nasty: bool = True) -> tuple[list, list]:
    """``n`` hypotheses, each with 1..max_refs references (counts differ per sentence)."""
    rng = random.Random(seed + 1000)
    preds, target = pairs(seed, n, nasty)
    refs = [[t] + [noisy(rng, t) for _ in range(rng.randint(0, max_refs - 1))] for t in target]
    return preds, refs


def batches(preds: list, target: list, sizes=(7, 0, 13, 1)) -> list:
    """Splits a corpus into batches of the given sizes (the rest in the last batch)."""
    out, i = [], 0
    for k in sizes:
        out.append((preds[i:i + k], target[i:i + k]))
        i += k
    out.append((preds[i:], target[i:]))
    return out


# --------------------------------------------------------------- law-suite cases

import torch  # noqa: E402

import fmetrics.text as ft  # noqa: E402
from tests.cases import Case  # noqa: E402


def _single(seed):
    return batches(*pairs(seed, 30))


def _multi(seed):
    return batches(*multi_refs(seed, 30))


def _multiline(seed):
    p, r = multi_refs(seed, 30)
    return batches([x.replace(" . ", " .\n") for x in p], [[y.replace(" , ", " ,\n") for y in rs] for rs in r])


def _squad(seed):
    rng = random.Random(seed)
    preds, target = [], []
    for i in range(25):
        truth = [sentence(rng, 1, 4) for _ in range(rng.randint(1, 3))]
        preds.append({"prediction_text": noisy(rng, truth[0], 0.5), "id": str(i)})
        target.append({"answers": {"answer_start": [0] * len(truth), "text": truth}, "id": str(i)})
    return batches(preds, target)


def _logits(seed, ignore=None):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in (3, 0, 5, 1, 4):
        p = torch.randn(n, 6, 9, generator=g) * 2
        t = torch.randint(0, 9, (n, 6), generator=g)
        if ignore is not None:
            t = torch.where(torch.rand(n, 6, generator=g) < 0.3, torch.full_like(t, ignore), t)
        out.append((p, t))
    return out


def _ppl_ref(ignore=None):
    def ref(p, t):
        logp = torch.log_softmax(p.double(), -1)
        keep = t != ignore if ignore is not None else torch.ones_like(t, dtype=torch.bool)
        picked = logp.gather(-1, torch.where(keep, t, 0).unsqueeze(-1)).squeeze(-1)
        return torch.exp(-(picked * keep).sum() / keep.sum())
    return ref


def _sorted_sentences(v):
    """Sentence scores come in the order seen: compared as sorted values across re-batchings."""
    if isinstance(v, tuple):
        return (v[0], torch.sort(v[1]).values)
    return torch.sort(v).values


_SENT = {"canonical": _sorted_sentences}

CASES = [
    Case("bleu_score", ft.bleu_score, {}, _multi, integer_state=True),
    Case("bleu_score-smooth-2", ft.bleu_score, {"n_gram": 2, "smooth": True, "weights": (0.3, 0.7)}, _single,
         integer_state=True),
    Case("sacre_bleu_score-13a", ft.sacre_bleu_score, {}, _multi, integer_state=True),
    Case("sacre_bleu_score-intl-lower", ft.sacre_bleu_score, {"tokenize": "intl", "lowercase": True}, _multi,
         integer_state=True),
    Case("sacre_bleu_score-zh", ft.sacre_bleu_score, {"tokenize": "zh", "smooth": True}, _single,
         integer_state=True),
    Case("chrf_score", ft.chrf_score, {}, _multi, integer_state=True),
    Case("chrf_score-chrf-sentences", ft.chrf_score, {"n_word_order": 0, "return_sentence_level_score": True},
         _multi, check=_SENT),
    Case("translation_edit_rate", ft.translation_edit_rate, {}, _multi),
    Case("translation_edit_rate-sentences", ft.translation_edit_rate,
         {"normalize": True, "return_sentence_level_score": True}, _single, check=_SENT),
    Case("word_error_rate", ft.word_error_rate, {}, _single, integer_state=True),
    Case("char_error_rate", ft.char_error_rate, {}, _single, integer_state=True),
    Case("match_error_rate", ft.match_error_rate, {}, _single, integer_state=True),
    Case("word_information_lost", ft.word_information_lost, {}, _single, integer_state=True),
    Case("word_information_preserved", ft.word_information_preserved, {}, _single, integer_state=True),
    Case("edit_distance", ft.edit_distance, {}, _single, integer_state=True),
    Case("edit_distance-sum-cost2", ft.edit_distance, {"substitution_cost": 2, "reduction": "sum"}, _single,
         integer_state=True),
    Case("edit_distance-none", ft.edit_distance, {"reduction": "none"}, _single, check=_SENT),
    Case("extended_edit_distance", ft.extended_edit_distance, {}, _multi),
    Case("extended_edit_distance-ja-sentences", ft.extended_edit_distance,
         {"language": "ja", "return_sentence_level_score": True, "alpha": 1.0, "deletion": 0.4}, _single,
         check=_SENT),
    Case("rouge_score", ft.rouge_score, {}, _multiline),
    Case("rouge_score-stem-avg", ft.rouge_score, {"rouge_keys": ("rouge1", "rougeL"), "use_stemmer": True,
                                                   "accumulate": "avg"}, _multi),
    Case("squad", ft.squad, {}, _squad),
    Case("perplexity", ft.perplexity, {}, _logits, reference=_ppl_ref()),
    Case("perplexity-ignore", ft.perplexity, {"ignore_index": -100}, lambda s: _logits(s, -100),
         reference=_ppl_ref(-100)),
]


# --------------------------------------------------------------- a tiny encoder for BERTScore (no download)


class TinyTokenizer:
    """Word-level tokenizer with Hugging Face's interface: [CLS]=1, [SEP]=2, [PAD]=0, words hashed to 3..63."""

    cls_token_id, sep_token_id, pad_token_id = 1, 2, 0

    def __len__(self):
        return 64

    def encode(self, sent, add_special_tokens=True, max_length=512, truncation=True):
        ids = [3 + (sum(map(ord, w)) * 7919) % 61 for w in sent.split()]
        return ([1] + ids + [2])[:max_length]


class TinyEncoder(torch.nn.Module):
    """Embedding + two tanh layers; returns ``(last, None, hidden_states)`` like a Hugging Face model tuple."""

    def __init__(self, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.nn.Parameter(torch.randn(64, 8, generator=g))
        self.w1 = torch.nn.Parameter(torch.randn(8, 8, generator=g) / 3)
        self.w2 = torch.nn.Parameter(torch.randn(8, 8, generator=g) / 3)

    def forward(self, ids, attention_mask=None, output_hidden_states=True):
        h0 = self.emb[ids]
        ctx = (h0 * attention_mask[..., None]).sum(1, keepdim=True) / attention_mask.sum(1, keepdim=True)[..., None]
        h1 = torch.tanh(h0 @ self.w1 + 0.5 * ctx)
        h2 = torch.tanh(h1 @ self.w2)
        return (h2, None, (h0, h1, h2))


TINY = (TinyEncoder(), TinyTokenizer())


def _bert_pairs(seed):
    p, t = pairs(seed, 30)
    return batches(p, t)


def _sorted_dict(v):
    return {k: torch.sort(x, dim=-1).values for k, x in v.items()}


CASES += [
    Case("bert_score-tiny", ft.bert_score, {"model": TINY[0], "tokenizer": TINY[1]}, _bert_pairs,
         check={"canonical": _sorted_dict}),
    Case("bert_score-tiny-idf-layers", ft.bert_score, {"model": TINY[0], "tokenizer": TINY[1], "idf": True,
                                                      "all_layers": True, "batch_size": 4}, _bert_pairs,
         check={"canonical": _sorted_dict}),
]


# --------------------------------------------------------------- InfoLM over a tiny random BERT masked LM (no download)


def _tiny_mlm():
    try:
        import transformers
    except ModuleNotFoundError:
        return None
    import tempfile

    from tests._tiny_mlm import tiny_mlm

    transformers.logging.set_verbosity_error()
    return tiny_mlm(tempfile.mkdtemp(prefix="fmetrics-mlm-"))


def _infolm_pairs(seed):
    from tests._tiny_mlm import WORDS as MLM_WORDS

    rng = random.Random(seed)
    p = [" ".join(rng.choice(MLM_WORDS + ["zebra", "The"]) for _ in range(rng.randint(1, 5))) for _ in range(8)]
    t = [" ".join(rng.choice(MLM_WORDS) for _ in range(rng.randint(1, 5))) for _ in range(8)]
    return batches(p, t, sizes=(3, 0, 2, 1))


MLM = _tiny_mlm()
if MLM is not None:
    CASES += [
        Case("infolm-kl", ft.infolm, {"model": MLM[0], "tokenizer": MLM[1], "idf": False}, _infolm_pairs),
        Case("infolm-ab-sentences", ft.infolm, {"model": MLM[0], "tokenizer": MLM[1], "idf": False,
                                                "information_measure": "ab_divergence", "alpha": 0.5, "beta": 0.7,
                                                "return_sentence_level_score": True, "batch_size": 5},
             _infolm_pairs, check=_SENT),
        Case("infolm-idf-fisher-rao-sentences", ft.infolm, {"model": MLM[0], "tokenizer": MLM[1],
                                                            "information_measure": "fisher_rao_distance",
                                                            "return_sentence_level_score": True}, _infolm_pairs,
             check=_SENT),
    ]
