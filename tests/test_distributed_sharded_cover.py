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
from tests.test_distributed_sharded_more import WORLDS


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


# ---------------------------------------------------------------- detection: micro average, extended summary

DETECTION = [dict(average="micro"), dict(average="micro", class_metrics=True, box_format="xywh"),
             dict(extended_summary=True, class_metrics=True),
             dict(average="micro", extended_summary=True, iou_thresholds=[0.3, 0.5], rec_thresholds=[0.0, 0.5, 1.0],
                  max_detection_thresholds=[1, 2, 3])]
SEGM = [dict(iou_type="segm", average="micro"),
        dict(iou_type=("bbox", "segm"), average="micro", extended_summary=True, class_metrics=True),
        dict(iou_type="segm", extended_summary=True)]


def _plain(value):
    """An output value with its ``ious`` dict as a key-sorted tuple of (image, class, matrix) (comparable)."""
    if isinstance(value, dict):
        return tuple((torch.tensor(k), v) for k, v in sorted(value.items()))
    return value


def _check_details(results):
    """`_check` of the detection bodies' results, the ``ious`` dicts made comparable."""
    from tests.test_distributed_sharded_more import _check

    _check([[(cid, _plain(got), _plain(ref), *rest) for cid, got, ref, *rest in per_rank] for per_rank in results])


# as in tests/test_distributed_sharded_more.py: the default run takes one rotating scenario per (configuration,
# data kind) pair, the slow job every (configuration, kind, scenario) on 2 and 3 ranks
@pytest.mark.distributed
@pytest.mark.parametrize("world, every", WORLDS)
def test_sharded_micro_and_extended_detection_equal_one_process(world, every):
    from tests.test_distributed_sharded_more import DET_KINDS, _detection_body, _images

    _check_details(spawn(_detection_body, world, 61 + world, DETECTION, DET_KINDS, _images, every, timeout=300))


@pytest.mark.distributed
@pytest.mark.parametrize("world, every", WORLDS)
def test_sharded_micro_and_extended_segm_equal_one_process(world, every):
    from tests.test_distributed_sharded_more import SEGM_KINDS, _detection_body, _masked

    _check_details(spawn(_detection_body, world, 71 + world, SEGM, SEGM_KINDS, _masked, every, timeout=300))


def _oracle_detection_body(rank, world):
    """(seed, average, sharded output without ``ious``, preds, target): uneven shards (seed 3), then every image
    on rank 1 (seed 4)."""
    from tests.cases.detection import make_coco

    out = []
    for seed in (3, 4):
        preds, target = make_coco(seed, n_images=24, n_classes=4, many=130 if seed % 2 else 0)
        lo, hi = [(0, 9), (9, 24)][rank] if seed == 3 else [(0, 0), (0, 24)][rank]
        for average in ("micro", "macro"):
            m = fm.mean_average_precision(box_format="xywh", average=average, extended_summary=True)
            got = distributed.finalize(m, m.update(m.init(), preds[lo:hi], target[lo:hi]))
            out.append((seed, average, {k: v for k, v in got.items() if k != "ious"}, preds, target))
    return out


@pytest.mark.distributed
def test_sharded_extended_detection_matches_pycocotools():
    """The sharded stats to 1e-12 and the precision / recall / score tables bit for bit against COCOeval."""
    import numpy as np

    pytest.importorskip("pycocotools", reason="the oracle is pycocotools' COCOeval")
    from tests.cases.detection import STAT_KEYS, coco_reference

    for seed, average, out, preds, target in spawn(_oracle_detection_body, 2, timeout=120)[0]:
        stats, prec, rec, sc = coco_reference(preds, target, "bbox", "xywh", average=average)
        np.testing.assert_allclose(np.array([out[k].item() for k in STAT_KEYS]), stats, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(out["precision"].numpy(), prec)
        np.testing.assert_array_equal(out["recall"].numpy(), rec)
        np.testing.assert_array_equal(out["scores"].numpy(), sc)


# ---------------------------------------------------------------- multiclass / multilabel: packed column groups

CURVES = [("multiclass_auroc", dict(num_classes=5)), ("multiclass_average_precision", dict(num_classes=5, average=None)),
          ("multiclass_roc", dict(num_classes=5)), ("multilabel_auroc", dict(num_labels=5, ignore_index=-1)),
          ("multilabel_precision_recall_curve", dict(num_labels=5, ignore_index=-1)),
          ("multiclass_recall_at_fixed_precision", dict(num_classes=5, min_precision=0.4))]


def _curves_body(rank, world, group_rows):
    """Every metric of `CURVES` on random, tied (five distinct scores), float16 and one-class-on-one-rank data,
    with columns packed ``group_rows`` entries to a sample sort: (case, sharded, one process, warnings...)."""
    from adapters._shard import columns
    from tests.test_distributed_sharded_more import _run

    columns.GROUP_ROWS = group_rows
    out = []
    for i, (name, kw) in enumerate(CURVES):
        m = getattr(fm, name)(**kw)
        for kind in ("random", "ties", "half", "one_rank_class"):
            for k, scenario in enumerate(SCENARIOS):
                g = torch.Generator().manual_seed(100 * i + 10 * k + len(kind))
                n = 400
                preds = torch.rand(n, 5, generator=g)
                if kind == "ties":
                    preds = torch.randint(0, 5, (n, 5), generator=g).float() / 4
                if kind == "half":
                    preds = preds.half()
                if name.startswith("multiclass"):
                    target = torch.randint(0, 4, (n,), generator=g)
                    if kind == "one_rank_class":  # class 4 only in the last rows (so on one rank)
                        target[-7:] = 4
                else:
                    target = (torch.rand(n, 5, generator=g) < 0.4).long()
                    target[torch.rand(n, 5, generator=g) < 0.1] = -1
                rng = random.Random(f"curves/{i}/{kind}/{k}")
                out.append((f"{name}{kw}/{kind}/{scenario}/{group_rows}", *_run(m, (preds, target), world, rank,
                                                                                scenario, rng)))
    return out


@pytest.mark.distributed
@pytest.mark.parametrize("world,group_rows", [(2, 900), pytest.param(3, 1 << 18, marks=pytest.mark.slow)])
def test_packed_column_groups_equal_one_process(world, group_rows):
    """Columns of 400 entries in groups of up to ``group_rows``: one or two columns per sort (900), or all of them."""
    from tests.test_distributed_sharded_more import _check

    _check(spawn(_curves_body, world, group_rows, timeout=300))
