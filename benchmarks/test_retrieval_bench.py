"""Hot paths of the retrieval metrics on 10^5 rows / 5,000 queries: one update, and finalize (the grouping)."""
import pytest
import torch

import fmetrics

torchmetrics = pytest.importorskip("torchmetrics")

QUERIES, ROWS_PER_QUERY = 5_000, 20
CASES = [("ndcg@10", lambda: fmetrics.retrieval_normalized_dcg(top_k=10), "RetrievalNormalizedDCG", {"top_k": 10}),
         ("map", fmetrics.retrieval_map, "RetrievalMAP", {}),
         ("mrr", fmetrics.retrieval_mrr, "RetrievalMRR", {})]
params = pytest.mark.parametrize("name,factory,tm_class,tm_kwargs", CASES, ids=[c[0] for c in CASES])


def _data():
    g = torch.Generator().manual_seed(0)
    n = QUERIES * ROWS_PER_QUERY
    perm = torch.randperm(n, generator=g)
    indexes = torch.arange(QUERIES).repeat_interleave(ROWS_PER_QUERY)[perm]
    return torch.rand(n, generator=g), (torch.rand(n, generator=g) < 0.1).long(), indexes


@params
def test_update_fmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-update"
    m = factory()
    benchmark(m.update, m.init(), *_data())


@params
def test_update_torchmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-update"
    m = getattr(torchmetrics.retrieval, tm_class)(**tm_kwargs)
    preds, target, indexes = _data()
    benchmark(m.update, preds, target, indexes=indexes)


@params
def test_compute_fmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-compute"
    m = factory()
    states = [m.update(m.init(), *_data()) for _ in range(2)]  # alternate states: no cached grouping
    rounds = iter(range(10**9))
    benchmark(lambda: m.finalize(states[next(rounds) % 2]))


@params
def test_compute_torchmetrics(benchmark, name, factory, tm_class, tm_kwargs):
    benchmark.group = f"retrieval-{name}-compute"
    m = getattr(torchmetrics.retrieval, tm_class)(compute_with_cache=False, **tm_kwargs)
    preds, target, indexes = _data()
    m.update(preds, target, indexes=indexes)
    benchmark.pedantic(m.compute, rounds=3, iterations=1)
