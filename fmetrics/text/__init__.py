"""Text metrics (torchmetrics' functional names and options) over Python strings.

These are host-input metrics (DESIGN §2.5): `update` tokenizes and aligns the
strings and keeps only int64 / float64 counts in the state, which merge by
addition, so distributed results are exact. Edit distances and alignments run
in rapidfuzz and n-grams are counted with array operations; sacrebleu
provides the sacreBLEU / TER tokenizers: ``pip install rapidfuzz sacrebleu nltk``.
"""
from fmetrics.text.asr import (char_error_rate, match_error_rate, word_error_rate, word_information_lost,
                               word_information_preserved)
from fmetrics.text.bert import bert_score
from fmetrics.text.bleu import bleu_score, sacre_bleu_score
from fmetrics.text.chrf import chrf_score
from fmetrics.text.edit import edit_distance
from fmetrics.text.eed import extended_edit_distance
from fmetrics.text.infolm import infolm
from fmetrics.text.perplexity import perplexity
from fmetrics.text.rouge import rouge_score
from fmetrics.text.squad import squad
from fmetrics.text.ter import translation_edit_rate

__all__ = [
    "bert_score",
    "bleu_score",
    "char_error_rate",
    "chrf_score",
    "edit_distance",
    "extended_edit_distance",
    "infolm",
    "match_error_rate",
    "squad",
    "translation_edit_rate",
    "word_error_rate",
    "word_information_lost",
    "word_information_preserved",
    "perplexity",
    "rouge_score",
    "sacre_bleu_score",
]
