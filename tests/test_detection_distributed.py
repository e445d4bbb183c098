"""mean_average_precision over 2 gloo ranks with uneven image counts equals the one-process value."""
import pytest
import torch

from fmetrics.detection import mean_average_precision
from tests._dist import spawn
from tests.cases.detection import make_coco

KW = dict(iou_type=("bbox", "segm"), class_metrics=True)
CUTS = (7, 19)  # rank 0: images [0, 7) in two updates; rank 1: images [7, 19), a third update of one image


def _data():
    return make_coco(11, n_images=19, n_classes=4, masks=True, size=16, many=40)


def _body(rank, world):
    from adapters.distributed import reduce

    preds, target = _data()
    lo, hi = (0, CUTS[0]) if rank == 0 else CUTS
    m = mean_average_precision(**KW)
    s = m.init()
    mid = lo + (hi - lo) // 2
    for a, b in ((lo, mid), (mid, hi - 1), (hi - 1, hi)):
        s = m.update(s, preds[a:b], target[a:b])
    return m.finalize(reduce(m, s))


@pytest.mark.distributed
def test_map_two_ranks_uneven_images_equal_one_process():
    preds, target = _data()
    want = mean_average_precision(**KW)(preds, target)
    got = spawn(_body, 2, timeout=60)
    for out in got:
        assert out.keys() == want.keys()
        for k, v in want.items():
            assert torch.equal(out[k], v), k
