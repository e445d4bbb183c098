"""Retrieval workloads: 10^6 rows over 50,000 queries in 100 update batches (8,000 / 400 / 10 with --quick).

Rows are shuffled, so every query is split over batches. fmetrics runs
``init / update* / finalize``; torchmetrics ``update* / compute``; ranx its
``evaluate`` on a prebuilt ``Qrels`` / ``Run`` (building them from the rows is
not timed, which favours ranx; full runs only: see `RANX_QUICK`). Every query
has a relevant row and scores are continuous, so the three definitions
coincide (ties are measure-zero).
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import Skip, fmetrics_run, on_device, register, torchmetrics_run

ROWS_PER_QUERY = 20
# measured on 2 vCPUs: 24 CPU-s in the first ranx workload (15 of them building Qrels / Run), 1-3 in each next
# one; still 5 CPU-s with numba's cache warm (import, loading the kernels)
RANX_QUICK = "full run only: ranx compiles its numba kernels on first use (24 CPU-s without numba's cache)"


def _sizes(quick: bool) -> tuple[int, int]:
    return (400, 10) if quick else (50_000, 100)  # queries, update batches


def _samples(quick: bool) -> int:
    return _sizes(quick)[0] * ROWS_PER_QUERY


def _data(quick: bool, graded: bool):
    queries, batches = _sizes(quick)
    g = torch.Generator().manual_seed(0)
    n = queries * ROWS_PER_QUERY
    indexes = torch.arange(queries).repeat_interleave(ROWS_PER_QUERY)
    preds = torch.rand(n, generator=g)
    if graded:
        target = torch.randint(0, 4, (n,), generator=g) * (torch.rand(n, generator=g) < 0.3)
    else:
        target = (torch.rand(n, generator=g) < 0.1).long()
    target[::ROWS_PER_QUERY] = target[::ROWS_PER_QUERY].clamp_min(1)  # every query has a relevant row
    perm = torch.randperm(n, generator=g)
    preds, target, indexes = preds[perm], target[perm], indexes[perm]
    return list(zip(preds.chunk(batches), target.chunk(batches), indexes.chunk(batches)))


def _torchmetrics(cls_name: str, kwargs: dict, batches):
    import torchmetrics.retrieval as tmr

    cls = getattr(tmr, cls_name)
    return torchmetrics_run(lambda: cls(**kwargs), batches)


def _ranx(measure: str, batches):
    import numpy as np
    import pandas as pd
    from ranx import Qrels, Run, evaluate

    preds, target, indexes = (torch.cat(x).numpy() for x in zip(*batches))
    q = indexes.astype(str)
    d = np.arange(preds.shape[0]).astype(str)
    rel = target > 0
    def frame(q, d, score):  # ranx wants object (str) id columns
        return pd.DataFrame({"q_id": q, "doc_id": d, "score": score}).astype({"q_id": object, "doc_id": object})

    qrels = Qrels.from_df(frame(q[rel], d[rel], target[rel].astype(np.int64)))
    run_ = Run.from_df(frame(q, d, preds.astype(np.float64)))
    evaluate(qrels, run_, measure)  # compile numba kernels outside the timing

    def run():
        return torch.tensor(evaluate(qrels, run_, measure), dtype=torch.float64)

    return run


def _workload(name: str, factory, kwargs: dict, tm_class: str, ranx_measure: str, graded: bool):
    @register(f"retrieval/{name}", domain="retrieval", samples=_samples, peers=("torchmetrics", "ranx"),
              description=f"{name} over {ROWS_PER_QUERY} rows/query, rows shuffled over update batches")
    def build(quick: bool, device="cpu"):
        host = _data(quick, graded)  # ranx reads the host copy
        batches = on_device(host, device)
        runs = {"fmetrics": fmetrics_run(factory(**kwargs), batches)}
        for peer, make in (("torchmetrics", lambda: _torchmetrics(tm_class, kwargs, batches)),
                           ("ranx", lambda: Skip(RANX_QUICK) if quick else _ranx(ranx_measure, host))):
            try:
                runs[peer] = make()
            except ImportError:
                pass
        return runs

    return build


_workload("ndcg@10", fmetrics.retrieval_normalized_dcg, {"top_k": 10}, "RetrievalNormalizedDCG", "ndcg@10", True)
_workload("map", fmetrics.retrieval_map, {}, "RetrievalMAP", "map", False)
_workload("mrr", fmetrics.retrieval_mrr, {}, "RetrievalMRR", "mrr", False)


@register("retrieval/collection", domain="retrieval", samples=_samples, peers=("torchmetrics",),
          description="NDCG@10 + MAP + MRR + P@10 + R@10 in one collection (one state, one grouping)")
def collection(quick: bool, device="cpu"):
    batches = on_device(_data(quick, graded=False), device)
    members = {"ndcg@10": fmetrics.retrieval_normalized_dcg(top_k=10), "map": fmetrics.retrieval_map(),
               "mrr": fmetrics.retrieval_mrr(), "p@10": fmetrics.retrieval_precision(top_k=10),
               "r@10": fmetrics.retrieval_recall(top_k=10)}
    runs = {"fmetrics": fmetrics_run(fmetrics.collection(members), batches)}
    try:
        import torchmetrics
        import torchmetrics.retrieval as tmr

        runs["torchmetrics"] = torchmetrics_run(lambda: torchmetrics.MetricCollection({
            "ndcg@10": tmr.RetrievalNormalizedDCG(top_k=10), "map": tmr.RetrievalMAP(), "mrr": tmr.RetrievalMRR(),
            "p@10": tmr.RetrievalPrecision(top_k=10), "r@10": tmr.RetrievalRecall(top_k=10)}), batches)
    except ImportError:
        pass
    return runs
