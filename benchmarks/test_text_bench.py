"""Hot paths of the text metrics on 500 synthetic sentence pairs: fmetrics vs sacrebleu / jiwer / torchmetrics.

Each timed fmetrics result is checked against its oracle, each timed peer result against fmetrics.
"""
import pytest

import fmetrics.text as ft
from benchmarks._checks import assert_agrees, workload_tolerance
from benchmarks.text import _streams, corpus

HYPS, TARGETS = corpus(500, seed=1, refs=2)
REFS = [t[0] for t in TARGETS]


def _one_shot(metric, preds, target):
    return lambda: metric.finalize(metric.update(metric.init(), preds, target))


def test_bleu_fmetrics(benchmark):
    sacrebleu = pytest.importorskip("sacrebleu")
    benchmark.group = "text-bleu"
    got = benchmark(_one_shot(ft.sacre_bleu_score(), HYPS, TARGETS))
    want = sacrebleu.corpus_bleu(HYPS, _streams(TARGETS)).score / 100
    assert float(got) == pytest.approx(want, rel=1e-9)


def test_bleu_sacrebleu(benchmark):
    sacrebleu = pytest.importorskip("sacrebleu")
    benchmark.group = "text-bleu"
    got = benchmark(lambda: sacrebleu.corpus_bleu(HYPS, _streams(TARGETS)))
    want = _one_shot(ft.sacre_bleu_score(), HYPS, TARGETS)()
    assert_agrees(got.score / 100, want, workload_tolerance("text/sacre_bleu_score"))


def test_chrf_fmetrics(benchmark):
    pytest.importorskip("sacrebleu")
    from sacrebleu.metrics import CHRF

    benchmark.group = "text-chrf"
    got = benchmark(_one_shot(ft.chrf_score(), HYPS, TARGETS))
    assert float(got) == pytest.approx(CHRF(word_order=2).corpus_score(HYPS, _streams(TARGETS)).score / 100,
                                       rel=1e-9)


def test_chrf_sacrebleu(benchmark):
    pytest.importorskip("sacrebleu")
    from sacrebleu.metrics import CHRF

    benchmark.group = "text-chrf"
    got = benchmark(lambda: CHRF(word_order=2).corpus_score(HYPS, _streams(TARGETS)))
    want = _one_shot(ft.chrf_score(), HYPS, TARGETS)()
    assert_agrees(got.score / 100, want, workload_tolerance("text/chrf_score"))


@pytest.mark.parametrize("name,fn", [("word_error_rate", "wer"), ("match_error_rate", "mer")])
def test_asr_fmetrics(benchmark, name, fn):
    jiwer = pytest.importorskip("jiwer")
    benchmark.group = f"text-{fn}"
    got = benchmark(_one_shot(getattr(ft, name)(), HYPS, REFS))
    assert float(got) == pytest.approx(getattr(jiwer, fn)(REFS, HYPS), rel=1e-9)


@pytest.mark.parametrize("name,fn", [("word_error_rate", "wer"), ("match_error_rate", "mer")])
def test_asr_jiwer(benchmark, name, fn):
    jiwer = pytest.importorskip("jiwer")
    benchmark.group = f"text-{fn}"
    got = benchmark(lambda: getattr(jiwer, fn)(REFS, HYPS))
    assert_agrees(got, _one_shot(getattr(ft, name)(), HYPS, REFS)(), workload_tolerance(f"text/{name}"))


def test_wer_torchmetrics(benchmark):
    tm = pytest.importorskip("torchmetrics.functional.text")
    benchmark.group = "text-wer"
    got = benchmark(lambda: tm.word_error_rate(HYPS, REFS))
    want = _one_shot(ft.word_error_rate(), HYPS, REFS)()
    assert_agrees(got, want, workload_tolerance("text/word_error_rate"))
