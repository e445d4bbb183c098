"""The retrieval example without Lightning: a plain loop, the functional API and `reduce`, on 2 gloo processes.

    python examples/retrieval_custom_loop.py

The same job as examples/retrieval_ddp.py, by hand: two processes train the
same linear ranker for one epoch with `DistributedDataParallel` (same seed,
sampler and optimizer as the Lightning example, so the same weights), then
each scores its `EvalSampler` shard of two synthetic retrieval datasets in
batches. A query's rows land on both ranks; each rank only
appends rows to its states (``update``: no grouping, no host sync). At the
end `adapters.distributed.reduce` gives every rank the state of all rows,
and ``finalize`` groups them by query once. The main process checks the
result against one process on the whole data.
"""
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

import fmetrics as fm
from adapters.distributed import EvalSampler, reduce

from retrieval_data import DATASETS, FEATURES, make_rows  # the module beside this script

METRICS = {"ndcg@10": fm.retrieval_normalized_dcg(top_k=10), "map": fm.retrieval_map()}


def make_scorer() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(FEATURES, 1)


def score(scorer, x):
    # positive scores: MAP treats scores <= 0 as "not retrieved" (torchmetrics' rule)
    return torch.sigmoid(scorer(x).squeeze(-1))


def train(scorer) -> None:
    """One epoch of pointwise regression on the relevance grades, gradients averaged over ranks."""
    ddp = DistributedDataParallel(scorer)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    rows = make_rows(1000, 13)
    sampler = DistributedSampler(rows, seed=0)
    sampler.set_epoch(0)
    for x, relevance, _ in DataLoader(rows, batch_size=64, sampler=sampler):
        loss = torch.nn.functional.mse_loss(ddp(x).squeeze(-1), relevance.float())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def targets(name: str, relevance: torch.Tensor) -> torch.Tensor:
    return relevance if name == "ndcg@10" else (relevance > 0).long()  # MAP needs binary relevance


@torch.no_grad()
def evaluate(scorer, rows, batch_size: int = 128) -> dict:
    """This rank's shard, batch by batch; then one `reduce` per metric and `finalize`."""
    states = {name: m.init() for name, m in METRICS.items()}
    for x, relevance, query in DataLoader(rows, batch_size=batch_size, sampler=EvalSampler(rows)):
        scores = score(scorer, x)
        states = {name: m.update(states[name], scores, targets(name, relevance), query)
                  for name, m in METRICS.items()}
    return {name: m.finalize(reduce(m, states[name])) for name, m in METRICS.items()}


def worker(rank: int, world: int, port: int, results) -> None:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        scorer = make_scorer()
        train(scorer)
        values = {f"val/{d}/{k}": v for d in DATASETS for k, v in evaluate(scorer, make_rows(*DATASETS[d])).items()}
        weights = {k: v.tolist() for k, v in scorer.state_dict().items()}  # plain data: the process exits next
        results.put((rank, {k: float(v) for k, v in values.items()}, weights))
    finally:
        dist.destroy_process_group()


@torch.no_grad()
def single_process_values(weights) -> dict:
    scorer = make_scorer()
    scorer.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    out = {}
    for d in DATASETS:
        x, relevance, query = make_rows(*DATASETS[d]).tensors
        scores = score(scorer, x)
        out.update({f"val/{d}/{k}": float(m(scores, targets(k, relevance), query)) for k, m in METRICS.items()})
    return out


def main(world: int = 2) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(world, port, results), nprocs=world)
    per_rank, weights = {}, {}
    for _ in range(world):
        rank, values, state_dict = results.get()
        per_rank[rank], weights[rank] = values, state_dict
    reference = single_process_values(weights[0])
    print(f"{'metric':<20} {'rank 0':>12} {'rank 1':>12} {'1 process':>12}")
    worst = 0.0
    for key, value in reference.items():
        worst = max([worst] + [abs(per_rank[r][key] - value) for r in range(world)])
        print(f"{key:<20} {per_rank[0][key]:>12.8f} {per_rank[1][key]:>12.8f} {value:>12.8f}")
    print(f"largest difference: {worst:.2e}")
    if worst > 1e-12:
        sys.exit("reduced values differ from the single-process values")
    return reference


if __name__ == "__main__":
    main()
