"""Oracle parity for the retrieval metrics: torchmetrics (defaults and every option) and trec_eval.

Randomized runs with score ties, graded relevance, queries without relevant
(or without non-relevant) rows, single-row queries and non-contiguous query
ids. See tests/cases/retrieval.py for the tie convention used with torchmetrics.
"""
from __future__ import annotations

import contextlib
import sys

import pytest
import torch
import torchmetrics.retrieval as tmr

import fmetrics as fm
from fmetrics.testing import assert_values_close
from tests.cases.retrieval import make_run, tm_reference

# factory, torchmetrics class, perturb ties (binary relevance), run options, metric-specific options
METRICS = [
    (fm.retrieval_normalized_dcg, tmr.RetrievalNormalizedDCG, False, {"graded": True},
     [{"top_k": 1}, {"top_k": 3}, {"top_k": 50}]),
    (fm.retrieval_map, tmr.RetrievalMAP, True, {}, [{"top_k": 1}, {"top_k": 3}]),
    (fm.retrieval_mrr, tmr.RetrievalMRR, True, {}, [{"top_k": 2}]),
    (fm.retrieval_precision, tmr.RetrievalPrecision, True, {},
     [{"top_k": 3}, {"top_k": 20}, {"top_k": 5, "adaptive_k": True}, {"adaptive_k": True}]),
    (fm.retrieval_recall, tmr.RetrievalRecall, True, {}, [{"top_k": 1}, {"top_k": 4}]),
    (fm.retrieval_r_precision, tmr.RetrievalRPrecision, True, {}, []),
    (fm.retrieval_hit_rate, tmr.RetrievalHitRate, True, {}, [{"top_k": 1}, {"top_k": 3}]),
    (fm.retrieval_fall_out, tmr.RetrievalFallOut, True, {}, [{"top_k": 1}, {"top_k": 4}]),
    (fm.retrieval_auroc, tmr.RetrievalAUROC, False, {}, [{"max_fpr": 0.5}, {"max_fpr": 0.1}, {"max_fpr": 1.0}]),
    (fm.retrieval_auroc, tmr.RetrievalAUROC, False, {"ties": False}, [{"top_k": 4}, {"top_k": 4, "max_fpr": 0.4}]),
    (fm.retrieval_precision_recall_curve, tmr.RetrievalPrecisionRecallCurve, True, {},
     [{"max_k": 1}, {"max_k": 4}, {"max_k": 20}, {"max_k": 20, "adaptive_k": True}, {"adaptive_k": True}]),
    (fm.retrieval_recall_at_fixed_precision, tmr.RetrievalRecallAtFixedPrecision, True, {},
     [{"min_precision": 0.0}, {"min_precision": 0.25, "max_k": 5}, {"min_precision": 0.5, "adaptive_k": True},
      {"min_precision": 1.0, "max_k": 3}]),
]

COMMON = [{}, {"empty_target_action": "pos"}, {"empty_target_action": "skip"}, {"aggregation": "median"},
          {"aggregation": "min"}, {"aggregation": "max"}, {"aggregation": "none"},
          {"aggregation": "none", "empty_target_action": "skip"}, {"ignore_index": -1}]


def _params():
    out = []
    for factory, cls, perturb, run, options in METRICS:
        for kwargs in COMMON + options:
            if factory is fm.retrieval_recall_at_fixed_precision and kwargs.get("aggregation") == "none":
                continue  # per-query rule; torchmetrics has no per-query form (tested by hand)
            tag = ",".join(f"{k}={v}" for k, v in kwargs.items()) or "default"
            out.append(pytest.param(factory, cls, perturb, run, kwargs, id=f"{factory.__name__}[{tag}]"
                                    + ("-noties" if run.get("ties") is False else "")))
    return out


def _identity(values, dim=None):
    return values


@pytest.mark.parametrize("factory,cls,perturb,run,kwargs", _params())
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_torchmetrics(factory, cls, perturb, run, kwargs, seed):
    preds, target, indexes = make_run(seed, ignored="ignore_index" in kwargs, **run)
    tm_kwargs = dict(kwargs)
    if kwargs.get("aggregation") == "none":
        tm_kwargs["aggregation"] = _identity
    want = tm_reference(cls, perturb, **tm_kwargs)(preds, target, indexes)
    got = factory(**kwargs)(preds, target, indexes)
    if kwargs.get("aggregation") == "none":
        # fmetrics keeps one value per query (NaN where skipped); torchmetrics' callable sees the kept ones
        if isinstance(got, tuple):
            kept = ~torch.isnan(got[0][:, 0])
            got = (got[0][kept], got[1][kept], got[2])
        else:
            got = got[~torch.isnan(got)]
    if isinstance(got, tuple):  # torchmetrics squeezes one-element curves to 0-d
        want = tuple(torch.as_tensor(w).reshape(g.shape) for w, g in zip(want, got))
    assert_values_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("factory,cls,perturb,run,kwargs", [p for p in _params() if p.values[4] == {}])
def test_error_action_matches_torchmetrics(factory, cls, perturb, run, kwargs):
    preds, target, indexes = make_run(0, **run)
    with pytest.raises(ValueError):
        tm_reference(cls, perturb, empty_target_action="error")(preds, target, indexes)
    with pytest.raises(ValueError, match=r"queries had no (non-)?relevant document"):
        factory(empty_target_action="error")(preds, target, indexes)


def test_split_over_batches_matches_torchmetrics_updates():
    preds, target, indexes = make_run(3, n_queries=60, graded=True)
    m, tm = fm.retrieval_normalized_dcg(top_k=5), tmr.RetrievalNormalizedDCG(top_k=5)
    state = m.init()
    for chunk in torch.arange(preds.shape[0]).chunk(7):
        state = m.update(state, preds[chunk], target[chunk], indexes[chunk])
        tm.update(preds[chunk], target[chunk], indexes=indexes[chunk])
    assert_values_close(m.finalize(state), tm.compute(), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ trec_eval


# trec_eval measure -> fmetrics metric with the same definition on runs with distinct positive scores
TREC = {
    "map": fm.retrieval_map(aggregation="none"),
    "recip_rank": fm.retrieval_mrr(aggregation="none"),
    "ndcg": fm.retrieval_normalized_dcg(aggregation="none"),
    "ndcg_cut_3": fm.retrieval_normalized_dcg(top_k=3, aggregation="none"),
    "ndcg_cut_10": fm.retrieval_normalized_dcg(top_k=10, aggregation="none"),
    "P_5": fm.retrieval_precision(top_k=5, aggregation="none"),
    "recall_5": fm.retrieval_recall(top_k=5, aggregation="none"),
    "Rprec": fm.retrieval_r_precision(aggregation="none"),
    "success_1": fm.retrieval_hit_rate(top_k=1, aggregation="none"),
    "success_5": fm.retrieval_hit_rate(top_k=5, aggregation="none"),
}
GRADED = {"ndcg", "ndcg_cut_3", "ndcg_cut_10"}


def _trec(preds, target, indexes, measures):
    qrel, run = {}, {}
    for i, (p, t, q) in enumerate(zip(preds.tolist(), target.tolist(), indexes.tolist())):
        qrel.setdefault(f"q{q}", {})[f"d{i}"] = int(t)
        run.setdefault(f"q{q}", {})[f"d{i}"] = float(p)
    pytrec_eval = pytest.importorskip("pytrec_eval", reason="the trec_eval oracle needs pytrec_eval (dev extra)")
    out = pytrec_eval.RelevanceEvaluator(qrel, measures).evaluate(run)
    ids = sorted(set(indexes.tolist()))
    return {m: torch.tensor([out[f"q{q}"][m] for q in ids], dtype=torch.float64) for m in TREC}


@pytest.mark.parametrize("graded", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_trec_eval(seed, graded):
    preds, target, indexes = make_run(seed, n_queries=80, max_rows=25, ties=False, positive=True, graded=graded,
                                      dtype=torch.float64)
    want = _trec(preds, target, indexes, {"map", "recip_rank", "ndcg", "ndcg_cut.3,10", "P.5", "recall.5",
                                          "Rprec", "success.1,5"})
    for measure, metric in TREC.items():
        if graded and measure not in GRADED:
            continue  # binary measures need binary targets in fmetrics (trec_eval reads rel >= 1)
        assert_values_close(metric(preds, target, indexes), want[measure], rtol=1e-9, atol=1e-12, what=measure)


# ------------------------------------------------------------------ ranx (numba: ~20 s of JIT on first use)

RANX = {
    "ndcg@5": fm.retrieval_normalized_dcg(top_k=5, aggregation="none"),
    "map": fm.retrieval_map(aggregation="none"),
    "mrr": fm.retrieval_mrr(aggregation="none"),
    "precision@3": fm.retrieval_precision(top_k=3, aggregation="none"),
    "recall@3": fm.retrieval_recall(top_k=3, aggregation="none"),
    "r-precision": fm.retrieval_r_precision(aggregation="none"),
    "hit_rate@2": fm.retrieval_hit_rate(top_k=2, aggregation="none"),
}


_RANX_PURE = []  # [True] once ranx was imported here with numba's JIT disabled


@contextlib.contextmanager
def _ranx():
    """ranx; imported first here, its numba kernels (and typed containers) stay plain Python while in use.

    No ~20-80 s JIT in the default run; a ranx imported elsewhere with its JIT is used as it is.
    """
    numba = pytest.importorskip("numba", reason="ranx needs numba")
    pure = _RANX_PURE or "ranx" not in sys.modules
    disabled = numba.config.DISABLE_JIT
    numba.config.DISABLE_JIT = disabled or bool(pure)
    try:
        ranx = pytest.importorskip("ranx", reason="the ranx oracle needs ranx (dev extra)")
        if pure and not _RANX_PURE:
            _RANX_PURE.append(True)
        yield ranx
    finally:
        numba.config.DISABLE_JIT = disabled


@pytest.mark.parametrize("graded", [False, True])
def test_matches_ranx_small(graded):
    """The default run's ranx comparison: a small run."""
    with _ranx() as ranx:
        _compare_ranx(ranx, graded, seed=5, n_queries=15, max_rows=10)


@pytest.mark.slow
@pytest.mark.parametrize("graded", [False, True])
def test_matches_ranx(graded):
    with _ranx() as ranx:
        _compare_ranx(ranx, graded, seed=4, n_queries=60, max_rows=20)


def _compare_ranx(ranx, graded, seed, n_queries, max_rows):
    preds, target, indexes = make_run(seed, n_queries=n_queries, max_rows=max_rows, ties=False, positive=True,
                                      graded=graded, dtype=torch.float64)
    keep = torch.isin(indexes, indexes[target > 0])  # ranx evaluates only the queries with a relevant document
    preds, target, indexes = preds[keep], target[keep], indexes[keep]
    qrels, run = {}, {}
    for i, (p, t, q) in enumerate(zip(preds.tolist(), target.tolist(), indexes.tolist())):
        run.setdefault(f"q{q}", {})[f"d{i}"] = p
        if t > 0:
            qrels.setdefault(f"q{q}", {})[f"d{i}"] = int(t)
    measures = [m for m in RANX if graded == m.startswith("ndcg") or not graded]
    want = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), measures, return_mean=False)
    want = want if isinstance(want, dict) else {measures[0]: want}  # one measure: a bare array
    order = sorted(range(len(qrels)), key=lambda j: int(sorted(qrels)[j][1:]))  # ranx: queries by name
    for m in measures:
        expected = torch.as_tensor(want[m], dtype=torch.float64)[order]
        assert_values_close(RANX[m](preds, target, indexes), expected, rtol=1e-9, atol=1e-12, what=m)
