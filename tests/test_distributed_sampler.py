"""`adapters.distributed.EvalSampler`: every index exactly once across ranks, no padding."""
import pytest
import torch
from torch.utils.data import DistributedSampler

from adapters.distributed import EvalSampler


@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("n, replicas", [(10, 3), (41, 2), (2, 5), (0, 2), (7, 1)])
def test_shards_cover_every_index_once(n, replicas, strided):
    shards = [list(EvalSampler(range(n), num_replicas=replicas, rank=r, strided=strided)) for r in range(replicas)]
    flat = [i for s in shards for i in s]
    assert sorted(flat) == list(range(n))  # no duplicates, nothing missing, no padding
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == [len(EvalSampler(range(n), replicas, r, strided=strided)) for r in range(replicas)]
    if strided:
        assert shards[0] == list(range(0, n, replicas))
    else:
        assert flat == list(range(n))  # contiguous blocks in rank order


def test_distributed_sampler_pads_where_eval_sampler_does_not():
    data = range(10)
    padded = [i for r in range(3) for i in DistributedSampler(data, num_replicas=3, rank=r, shuffle=False)]
    exact = [i for r in range(3) for i in EvalSampler(data, num_replicas=3, rank=r)]
    assert len(padded) == 12 and len(set(padded)) == 10  # two samples counted twice
    assert len(exact) == 10


def test_without_a_group_one_process_sees_everything():
    s = EvalSampler(list("abcde"))
    assert list(s) == [0, 1, 2, 3, 4] and len(s) == 5
    s.set_epoch(3)  # accepted and ignored
    assert list(s) == [0, 1, 2, 3, 4]


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_replicas"):
        EvalSampler(range(3), num_replicas=0)
    with pytest.raises(ValueError, match="rank"):
        EvalSampler(range(3), rank=-1)
    with pytest.raises(ValueError, match=r"rank.*\[0, 2\), got 2"):
        list(EvalSampler(range(3), num_replicas=2, rank=2))


def test_works_as_a_dataloader_sampler():
    data = torch.utils.data.TensorDataset(torch.arange(11.0))
    loader = torch.utils.data.DataLoader(data, batch_size=4, sampler=EvalSampler(data, num_replicas=2, rank=1))
    assert torch.cat([b[0] for b in loader]).tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
