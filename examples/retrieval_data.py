"""Synthetic retrieval data shared by the retrieval examples (built in-process, no downloads)."""
import torch
from torch.utils.data import TensorDataset

FEATURES = 16
DATASETS = {"web": (400, 11), "news": (250, 12)}  # name: (queries, seed)


def make_rows(queries: int, seed: int, max_docs: int = 30) -> TensorDataset:
    """Synthetic rows ``(features, graded relevance 0..3, query id)``, shuffled across queries."""
    direction = torch.randn(FEATURES, generator=torch.Generator().manual_seed(0))  # what "relevant" means
    g = torch.Generator().manual_seed(seed)
    docs = torch.randint(1, max_docs + 1, (queries,), generator=g)
    query = torch.repeat_interleave(torch.arange(queries), docs)
    x = torch.randn(query.shape[0], FEATURES, generator=g)
    signal = x @ direction / FEATURES**0.5 + 0.8 * torch.randn(query.shape[0], generator=g)
    relevance = torch.bucketize(signal, torch.tensor([0.5, 1.2, 1.8]))
    perm = torch.randperm(query.shape[0], generator=g)
    return TensorDataset(x[perm], relevance[perm], query[perm])
