"""Hot paths of the retrieval metrics on 10^5 rows / 5,000 queries: one update, and finalize (the grouping).

Each timed result is checked against the other library on the same data
(continuous scores: no ties, so the two tie rules coincide).
"""
import pytest
import torch

import fmetrics
from benchmarks._checks import ROUNDS, assert_agrees, fresh, updated, workload_tolerance

torchmetrics = pytest.importorskip("torchmetrics")

QUERIES, ROWS_PER_QUERY = 5_000, 20
CASES = [("ndcg@10", lambda: fmetrics.retrieval_normalized_dcg(top_k=10), "RetrievalNormalizedDCG", {"top_k": 10}),
         ("map", fmetrics.retrieval_map, "RetrievalMAP", {}),
         ("mrr", fmetrics.retrieval_mrr, "RetrievalMRR", {})]
params = pytest.mark.parametrize("name,factory,tm_class,tm_kwargs", CASES, ids=[c[0] for c in CASES])


def _data(graded: bool = False):
    g = torch.Generator().manual_seed(0)
    n = QUERIES * ROWS_PER_QUERY
    perm = torch.randperm(n, generator=g)
    indexes = torch.arange(QUERIES).repeat_interleave(ROWS_PER_QUERY)[perm]
    preds = torch.rand(n, generator=g)
    if graded:
        target = torch.randint(0, 4, (n,), generator=g) * (torch.rand(n, generator=g) < 0.3)
    else:
        target = (torch.rand(n, generator=g) < 0.1).long()
    return preds, target, indexes


def _torchmetrics_value(tm_class, tm_kwargs, data):
    preds, target, indexes = data
    return getattr(torchmetrics.retrieval, tm_class)(**tm_kwargs)(preds, target, indexes=indexes).double()


@params
def test_update_fmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-update"
    m = factory()
    data = _data(name == "ndcg@10")
    state = benchmark(m.update, m.init(), *data)
    torch.testing.assert_close(m.finalize(state), _torchmetrics_value(tm_class, tm_kwargs, data),
                               rtol=1e-5, atol=1e-6)


@params
def test_update_torchmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-update"
    preds, target, indexes = _data(name == "ndcg@10")
    cls = getattr(torchmetrics.retrieval, tm_class)
    # a fresh metric each round: repeating an update with the same indexes would double every query
    setup = fresh(lambda: cls(**tm_kwargs), preds, target, indexes=indexes)
    metric = benchmark.pedantic(updated, setup=setup, rounds=ROUNDS, iterations=1)
    assert_agrees(metric.compute(), factory()(preds, target, indexes), workload_tolerance(f"retrieval/{name}"))


@params
def test_compute_fmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-compute"
    m = factory()
    data = _data(name == "ndcg@10")
    state = m.update(m.init(), *data)
    value = benchmark(m.finalize, state)  # no cache: every round ranks the rows again
    torch.testing.assert_close(value, _torchmetrics_value(tm_class, tm_kwargs, data), rtol=1e-5, atol=1e-6)


@params
def test_compute_torchmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-compute"
    m = getattr(torchmetrics.retrieval, tm_class)(compute_with_cache=False, **tm_kwargs)
    preds, target, indexes = _data(name == "ndcg@10")
    m.update(preds, target, indexes=indexes)
    value = benchmark.pedantic(m.compute, rounds=3, iterations=1)
    assert_agrees(value, factory()(preds, target, indexes), workload_tolerance(f"retrieval/{name}"))


def test_compute_collection_fmetrics(benchmark):
    """Five metrics over one state: one update and one ranking for all of them."""
    benchmark.group = "retrieval-collection-compute"
    members = {"ndcg@10": fmetrics.retrieval_normalized_dcg(top_k=10), "map": fmetrics.retrieval_map(),
               "mrr": fmetrics.retrieval_mrr(), "p@10": fmetrics.retrieval_precision(top_k=10),
               "r@10": fmetrics.retrieval_recall(top_k=10)}
    c = fmetrics.collection(members)
    data = _data()
    state = c.update(c.init(), *data)
    assert len(state) == 1
    out = benchmark(c.finalize, state)
    tm = {"ndcg@10": ("RetrievalNormalizedDCG", {"top_k": 10}), "map": ("RetrievalMAP", {}),
          "mrr": ("RetrievalMRR", {}), "p@10": ("RetrievalPrecision", {"top_k": 10}),
          "r@10": ("RetrievalRecall", {"top_k": 10})}
    for key, (cls, kwargs) in tm.items():
        torch.testing.assert_close(out[key], _torchmetrics_value(cls, kwargs, data), rtol=1e-5, atol=1e-6)
