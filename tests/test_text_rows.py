"""Per-sentence statistics of a batch in one call (`Metric.host_rows`): BLEU's rows against sacrebleu's own
per-sentence statistics, against one update per sentence, and the paired tests that weigh them."""
from __future__ import annotations

import pytest
import torch

import fmetrics
import fmetrics.text as ft
from tests.cases.text import multi_refs

sacrebleu = pytest.importorskip("sacrebleu", reason="sacrebleu is the BLEU oracle")


def _streams(refs):
    k = max(map(len, refs))
    return [[r[i] if i < len(r) else None for r in refs] for i in range(k)]


@pytest.mark.parametrize("tokenize", ["none", "13a", "intl", "char"])
@pytest.mark.parametrize("n_gram", [1, 4])
def test_bleu_rows_are_sacrebleus_sentence_statistics(tokenize, n_gram):
    """Each row's (hyp length, closest ref length, matches per order, totals per order) is sacrebleu's."""
    from sacrebleu.metrics import BLEU

    preds, refs = multi_refs(5, 70)  # the nasty cases (empty strings, repeats, unicode) first
    want = BLEU(tokenize=tokenize, max_ngram_order=n_gram)._extract_corpus_statistics(preds, _streams(refs))
    rows = ft.sacre_bleu_score(tokenize=tokenize, n_gram=n_gram).host_rows(preds, refs)
    got = torch.cat([rows.preds_len[:, None], rows.target_len[:, None], rows.numerator, rows.denominator], 1)
    assert got.tolist() == want
    assert rows.sentences.tolist() == [1] * len(preds)


@pytest.mark.parametrize("make", [lambda: ft.bleu_score(), lambda: ft.bleu_score(n_gram=2, smooth=True),
                                  lambda: ft.sacre_bleu_score(tokenize="zh", lowercase=True)])
def test_host_rows_equal_one_update_per_sentence(make):
    m = make()
    preds, refs = multi_refs(8, 50)
    rows = m.host_rows(preds, refs)
    init = m.init()
    for i in range(len(preds)):
        one = m.update(init, preds[i:i + 1], refs[i:i + 1])
        for f in one._fields:
            assert torch.equal(getattr(rows, f)[i], getattr(one, f)), (i, f)
    # the batch's state is the rows' sum
    whole = m.update(init, preds, refs)
    for f in whole._fields:
        assert torch.equal(getattr(rows, f).sum(0), getattr(whole, f)), f


def test_host_rows_checks_inputs_and_handles_empty():
    m = ft.bleu_score()
    with pytest.raises(ValueError, match="bleu_score.*target"):
        m.host_rows(["a b"], [])
    rows = m.host_rows([], [])
    assert rows.numerator.shape == (0, 4) and rows.preds_len.shape == (0,)


def test_replace_drops_host_rows_with_a_new_update():
    m = ft.bleu_score()
    assert m.host_rows is not None
    assert m.replace(name="x").host_rows is m.host_rows
    assert m.replace(update=m.update).host_rows is None
    assert m.from_output("p", "t").host_rows is None


@pytest.mark.parametrize("make", [lambda: ft.bleu_score(), lambda: ft.bleu_score(n_gram=2, smooth=True),
                                  lambda: ft.sacre_bleu_score(weights=[0.5, 0.5, 0, 0])])
def test_finalize_stacked_equals_finalize_of_each_state(make):
    """`Metric.finalize_stacked` of R stacked states is `finalize` of each (an empty state gives nan, as finalize)."""
    m = make()
    preds, refs = multi_refs(11, 40)
    states = [m.update(m.init(), preds[i:i + 7], refs[i:i + 7]) for i in range(0, 35, 7)]
    stacked = type(states[0])(*(torch.stack(f) for f in zip(*states)))
    want = torch.stack([m.finalize(s) for s in states])
    assert torch.equal(m.finalize_stacked(stacked), want)
    with pytest.warns(UserWarning):
        got = m.finalize_stacked(type(stacked)(*(torch.stack([f[0], torch.zeros_like(f[0])]) for f in stacked)))
    assert got[0] == want[0] and torch.isnan(got[1])


def test_replace_drops_finalize_stacked_with_a_new_finalize():
    m = ft.bleu_score()
    assert m.replace(name="x").finalize_stacked is m.finalize_stacked
    assert m.from_output("p", "t").finalize_stacked is m.finalize_stacked
    assert m.replace(update=m.update).finalize_stacked is m.finalize_stacked  # same states, same values
    for field in ("finalize", "finish"):
        assert m.replace(**{field: getattr(m, field)}).finalize_stacked is None


def test_paired_bootstrap_with_rows_equals_one_update_per_sentence():
    """The paired wrapper's fast path (rows in one call) gives the values of its one-update-per-row path."""
    preds, refs = multi_refs(9, 60)
    other, _ = multi_refs(10, 60)
    fast = ft.sacre_bleu_score()
    slow = fast.replace(host_rows=None)
    outs = []
    for m in (fast, slow):
        w = fmetrics.wrappers.paired_bootstrap(m, num_samples=64, seed=3)
        s = w.update(w.update(w.init(), preds[:25], other[:25], refs[:25]), preds[25:], other[25:], refs[25:])
        outs.append(w.finalize(s))
    for k in outs[0]:
        assert torch.equal(outs[0][k], outs[1][k]), k


def test_clipped_orders_with_sparse_ids_take_the_compacting_path(monkeypatch):
    """Word ids far apart make the packed (gram, hypothesis, slot) key overflow int64 unless compacted first:
    the compacted path gives the counts of compact ids."""
    import numpy as np

    from fmetrics.text import _ngrams

    preds, refs = multi_refs(11, 40)
    flat = [r for rs in refs for r in rs]
    tok, lens = _ngrams.encode_texts([*preds, *flat])
    owner = np.repeat(np.arange(len(preds)), [len(r) for r in refs])
    want = _ngrams.clipped_orders(tok, lens, owner, len(preds), 4)
    calls, unique = [], np.unique
    monkeypatch.setattr(np, "unique", lambda *a, **k: calls.append(1) or unique(*a, **k))
    got = _ngrams.clipped_orders(tok * (1 << 44) + 5, lens, owner, len(preds), 4)
    assert calls and want.sum() > 0 and np.array_equal(got, want)
