"""Law-suite cases for the retrieval metrics; the oracle is torchmetrics' module API.

torchmetrics breaks score ties in an unspecified order; fmetrics breaks them
pessimistically (non-relevant rows first). The binary-relevance references
feed torchmetrics ``preds - 1e-3 * target`` (scores sit on a 0.1 grid), which
makes torchmetrics' order the pessimistic one; NDCG and AUROC average over
ties in both libraries and get the raw scores.
"""
from __future__ import annotations

import torch
import torchmetrics.retrieval as tmr

import fmetrics as fm
from tests.cases import Case, random_splits


def make_run(seed: int, n_queries: int = 40, max_rows: int = 12, ties: bool = True, graded: bool = False,
             positive: bool = False, ignored: bool = False, dtype=torch.float32, float_gains: bool = False):
    """``(preds, target, indexes)`` rows in shuffled order.

    Query ids are distinct non-contiguous ints; query 0 of the list has one row,
    every 5th query has no relevant row and every 7th no non-relevant row.
    ``ignored``: about 15% of the targets are -1. ``float_gains``: graded targets scaled by 0.75
    (fractional gains: NDCG's general sort path).
    ``ties``: scores on a 0.1 grid in [-0.2, 0.7] (many ties, some scores <= 0);
    otherwise distinct continuous scores (in (0, 1) when ``positive``).
    """
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, max_rows + 1, (n_queries,), generator=g)
    sizes[0] = 1
    ids = torch.randperm(10 * n_queries, generator=g)[:n_queries]
    indexes = torch.repeat_interleave(ids, sizes)
    query = torch.repeat_interleave(torch.arange(n_queries), sizes)
    n = indexes.shape[0]
    if graded:
        target = torch.randint(0, 4, (n,), generator=g) * (torch.rand(n, generator=g) < 0.5)
    else:
        target = (torch.rand(n, generator=g) < 0.35).long()
    target = torch.where(query % 5 == 4, 0, target)
    target = torch.where((query % 7 == 6) & (query % 5 != 4), target.clamp_min(1), target)
    if ties:
        preds = torch.randint(0, 10, (n,), generator=g).to(dtype) / 10 - 0.2
    elif positive:
        preds = (torch.randperm(n, generator=g).to(dtype) + 0.5) / n
    else:
        preds = torch.randperm(n, generator=g).to(dtype) / n - 0.3
    if float_gains:
        target = target * 0.75
    if ignored:  # rows to drop with ignore_index=-1
        target = torch.where(torch.rand(n, generator=g) < 0.15, -1, target)
    perm = torch.randperm(n, generator=g)
    return preds[perm], target[perm], indexes[perm]


def tm_reference(cls, perturb: bool = True, **kwargs):
    """``(preds, target, indexes) -> torchmetrics value``; ``perturb`` emulates pessimistic ties."""

    def reference(preds, target, indexes):
        metric = cls(**kwargs)
        if perturb:
            preds = preds - 1e-3 * (target == 1).to(preds.dtype)
        return metric(preds, target, indexes=indexes)

    return reference


def _batches(seed, **run):
    preds, target, indexes = make_run(seed, **{"n_queries": 16, **run})
    g = torch.Generator().manual_seed(seed)
    edges = [0, *random_splits(preds.shape[0], 4, g), preds.shape[0]]
    return [(preds[a:b], target[a:b], indexes[a:b]) for a, b in zip(edges[:-1], edges[1:])]


def _per_query(values, dim=None):
    """torchmetrics' aggregation that keeps the per-query values (ascending query id, as fmetrics' "none")."""
    return values


def _case(id, factory, kwargs, cls, tm_kwargs=None, perturb=True, **run):
    return Case(id, factory, kwargs, lambda s: _batches(s, **run),
                reference=tm_reference(cls, perturb, **(kwargs if tm_kwargs is None else tm_kwargs)),
                check={"reference_rtol": 1e-5, "reference_atol": 1e-6})


CASES = [
    _case("retrieval-ndcg", fm.retrieval_normalized_dcg, {}, tmr.RetrievalNormalizedDCG, perturb=False, graded=True),
    _case("retrieval-ndcg-top3-skip", fm.retrieval_normalized_dcg, {"top_k": 3, "empty_target_action": "skip"},
          tmr.RetrievalNormalizedDCG, perturb=False, graded=True),
    _case("retrieval-map", fm.retrieval_map, {}, tmr.RetrievalMAP),
    _case("retrieval-map-top3-pos", fm.retrieval_map, {"top_k": 3, "empty_target_action": "pos"}, tmr.RetrievalMAP,
          n_queries=20),
    _case("retrieval-average-precision-median", fm.retrieval_average_precision, {"aggregation": "median"},
          tmr.RetrievalMAP, n_queries=24),  # 16 queries: the median is 0.0 on seed 0 (a constant would match)
    _case("retrieval-mrr", fm.retrieval_mrr, {}, tmr.RetrievalMRR),
    _case("retrieval-reciprocal-rank-top2-per-query", fm.retrieval_reciprocal_rank, {"top_k": 2, "aggregation": "none"},
          tmr.RetrievalMRR, tm_kwargs={"top_k": 2, "aggregation": _per_query}),
    _case("retrieval-precision-top4", fm.retrieval_precision, {"top_k": 4}, tmr.RetrievalPrecision),
    _case("retrieval-precision-adaptive", fm.retrieval_precision, {"top_k": 6, "adaptive_k": True},
          tmr.RetrievalPrecision),
    _case("retrieval-recall-top3", fm.retrieval_recall, {"top_k": 3}, tmr.RetrievalRecall),
    _case("retrieval-r-precision", fm.retrieval_r_precision, {}, tmr.RetrievalRPrecision),
    _case("retrieval-hit-rate-top3", fm.retrieval_hit_rate, {"top_k": 3}, tmr.RetrievalHitRate),
    _case("retrieval-fall-out-top3", fm.retrieval_fall_out, {"top_k": 3}, tmr.RetrievalFallOut),
    _case("retrieval-auroc", fm.retrieval_auroc, {}, tmr.RetrievalAUROC, perturb=False),
    _case("retrieval-auroc-top4-maxfpr", fm.retrieval_auroc, {"top_k": 4, "max_fpr": 0.5}, tmr.RetrievalAUROC,
          perturb=False, ties=False),
    _case("retrieval-pr-curve", fm.retrieval_precision_recall_curve, {"max_k": 5}, tmr.RetrievalPrecisionRecallCurve),
    _case("retrieval-pr-curve-adaptive", fm.retrieval_precision_recall_curve, {"adaptive_k": True},
          tmr.RetrievalPrecisionRecallCurve),
    _case("retrieval-recall-at-precision", fm.retrieval_recall_at_fixed_precision,
          {"min_precision": 0.2, "max_k": 6}, tmr.RetrievalRecallAtFixedPrecision),
    _case("retrieval-map-ignore-index", fm.retrieval_map, {"ignore_index": -1}, tmr.RetrievalMAP,
          ignored=True),
    _case("retrieval-ndcg-float-gains-ignore-index", fm.retrieval_normalized_dcg, {"top_k": 4, "ignore_index": -1},
          tmr.RetrievalNormalizedDCG, perturb=False, graded=True, float_gains=True, ignored=True),
]
