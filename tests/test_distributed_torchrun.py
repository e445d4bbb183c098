"""A plain ``torchrun`` script (no training framework): EvalSampler shards, `reduce` gathers.

The test launches this file with ``python -m torch.distributed.run --nproc_per_node 3``
(gloo, 127.0.0.1, bounded timeout); rank 0 writes the reduced values to JSON.
"""
import json
import os
import sys

import pytest
import torch

from tests._dist import run_script

N = 50


def _data():
    g = torch.Generator().manual_seed(1)
    scores = torch.rand(N, 4, generator=g)
    return scores, torch.randint(0, 4, (N,), generator=g)


def main(out_path: str) -> None:
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    import fmetrics as fm
    from adapters.distributed import EvalSampler, reduce

    dist.init_process_group("gloo")
    metric = fm.collection({"acc": fm.multiclass_accuracy(num_classes=4),
                            "auroc": fm.multiclass_auroc(num_classes=4),
                            "confmat": fm.multiclass_confusion_matrix(num_classes=4)})
    dataset = TensorDataset(*_data())
    state = metric.init()
    for scores, labels in DataLoader(dataset, batch_size=7, sampler=EvalSampler(dataset)):
        state = metric.update(state, scores, labels)
    value = metric.finalize(reduce(metric, state))
    if dist.get_rank() == 0:
        with open(out_path, "w") as f:
            json.dump({"world": dist.get_world_size(), **{k: v.tolist() for k, v in value.items()}}, f)
    dist.destroy_process_group()


@pytest.mark.distributed
def test_torchrun_script_reduces_to_the_one_process_value(tmp_path):
    from torchmetrics.classification import MulticlassAccuracy, MulticlassAUROC, MulticlassConfusionMatrix

    out = tmp_path / "value.json"
    run_script([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "3",
                os.path.abspath(__file__), str(out)], timeout=180)
    got = json.loads(out.read_text())
    scores, labels = _data()
    assert got["world"] == 3
    assert got["confmat"] == MulticlassConfusionMatrix(num_classes=4)(scores, labels).tolist()
    assert got["acc"] == pytest.approx(MulticlassAccuracy(num_classes=4)(scores, labels).item(), rel=1e-6)
    assert got["auroc"] == pytest.approx(MulticlassAUROC(num_classes=4)(scores, labels).item(), rel=1e-6)


if __name__ == "__main__":
    main(sys.argv[1])
