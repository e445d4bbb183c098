"""`tests._dist.spawn` itself: results in rank order, failures and hangs fail fast."""
import time

import pytest
import torch
import torch.distributed as dist

from tests._dist import spawn

pytestmark = pytest.mark.distributed


def _sum_ranks(rank, world_size, offset):
    t = torch.tensor([rank + offset])
    dist.all_reduce(t)
    return rank, world_size, t


def _raise_on_rank_1(rank, world_size):
    if rank == 1:
        raise RuntimeError("boom on rank 1")
    t = torch.zeros(1)
    dist.all_reduce(t)  # rank 0 hangs here: the helper must kill it
    return rank


def _hang(rank, world_size):
    if rank == 1:
        time.sleep(600)  # never reaches the barrier rank 0 waits in
    dist.barrier()
    return rank


def test_spawn_returns_results_in_rank_order():
    out = spawn(_sum_ranks, 3, 10)
    assert [(r, w) for r, w, _ in out] == [(0, 3), (1, 3), (2, 3)]
    assert all(torch.equal(t, torch.tensor([33])) for _, _, t in out)  # 10 + 11 + 12


def test_spawn_reports_the_failing_rank():
    with pytest.raises(AssertionError, match=r"(?s)rank 1.*boom on rank 1"):
        spawn(_raise_on_rank_1, 2, timeout=60)


def test_spawn_times_out_instead_of_hanging():
    with pytest.raises(AssertionError, match="timed out"):
        spawn(_hang, 2, timeout=6)
