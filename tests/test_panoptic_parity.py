"""panoptic_quality / modified_panoptic_quality vs torchmetrics' functional API on random panoptic maps."""
import pytest
import torch

from fmetrics import validation
from fmetrics.detection import modified_panoptic_quality, panoptic_quality
from tests.cases.detection import PQ_STUFFS, PQ_THINGS, make_panoptic

tmd = pytest.importorskip("torchmetrics.functional.detection", reason="the oracle is torchmetrics")

KW = {"things": set(PQ_THINGS), "stuffs": set(PQ_STUFFS)}


def _close(a, b):
    torch.testing.assert_close(a, b.double(), rtol=1e-6, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("options", [{}, {"return_sq_and_rq": True}, {"return_per_class": True},
                                     {"return_per_class": True, "return_sq_and_rq": True}])
def test_panoptic_quality_parity(seed, options):
    size, block = (16, 4) if seed % 2 else (24, 3)
    preds, target = make_panoptic(seed, n=6, size=size, block=block)
    got = panoptic_quality(allow_unknown_preds_category=True, **options, **KW)(preds, target)
    _close(got, tmd.panoptic_quality(preds, target, allow_unknown_preds_category=True, **options, **KW))


@pytest.mark.parametrize("seed", range(6))
def test_modified_panoptic_quality_parity(seed):
    preds, target = make_panoptic(seed, n=6, size=20, block=5)
    got = modified_panoptic_quality(allow_unknown_preds_category=True, **KW)(preds, target)
    _close(got, tmd.modified_panoptic_quality(preds, target, allow_unknown_preds_category=True, **KW))


def test_arbitrary_instance_ids_point_clouds_and_batching():
    """Large / negative instance ids, [B, N, 2] point clouds, and one image per update vs all at once."""
    preds, target = make_panoptic(7, n=5, size=12, block=3)
    remap = lambda x: torch.stack([x[..., 0], x[..., 1] * 1_000_003 - 7], -1)  # noqa: E731
    preds, target = remap(preds).reshape(5, -1, 2), remap(target).reshape(5, -1, 2)
    want = tmd.panoptic_quality(preds, target, allow_unknown_preds_category=True, return_per_class=True, **KW)
    m = panoptic_quality(allow_unknown_preds_category=True, return_per_class=True, **KW)
    s = m.init()
    for i in range(5):
        s = m.update(s, preds[i:i + 1], target[i:i + 1])
    _close(m.finalize(s), want)
    assert s.true_positives.dtype == torch.int64 and s.iou_sum.dtype == torch.float64


def test_state_sums_match_torchmetrics_counts():
    from torchmetrics.functional.detection._panoptic_quality_common import (
        _get_category_id_to_continuous_id, _get_void_color, _panoptic_quality_update, _prepocess_inputs)

    preds, target = make_panoptic(3, n=8)
    things, stuffs = set(PQ_THINGS), set(PQ_STUFFS)
    void = _get_void_color(things, stuffs)
    cont = _get_category_id_to_continuous_id(things, stuffs)
    fp = _prepocess_inputs(things, stuffs, preds, void, True)
    ft = _prepocess_inputs(things, stuffs, target, void, True)
    iou, tp, fpos, fneg = _panoptic_quality_update(fp, ft, cont, void)
    m = panoptic_quality(allow_unknown_preds_category=True, **KW)
    s = m.update(m.init(), preds, target)
    assert torch.equal(s.true_positives, tp.long()) and torch.equal(s.false_positives, fpos.long())
    assert torch.equal(s.false_negatives, fneg.long())
    torch.testing.assert_close(s.iou_sum, iou, rtol=1e-6, atol=1e-7)


def test_unknown_prediction_category_raises_eagerly_and_deferred():
    preds, target = make_panoptic(1, n=3, unknown=False)
    preds[0, 0, 0] = torch.tensor([42, 0])
    m = panoptic_quality(**KW)
    with pytest.raises(ValueError, match="unknown categories 42"):
        m.update(m.init(), preds, target)
    with validation.mode("deferred"):
        s = m.update(m.init(), preds, target)
    with pytest.raises(ValueError, match="the first was 42"):
        m.finalize(s)
    with pytest.raises(ValueError):
        tmd.panoptic_quality(preds, target, **KW)


def test_bad_configuration_and_shapes():
    with pytest.raises(ValueError, match="disjoint"):
        panoptic_quality(things={0, 1}, stuffs={1})
    with pytest.raises(ValueError, match="at least one"):
        panoptic_quality(things=set(), stuffs=set())
    with pytest.raises(ValueError, match="int category ids"):
        modified_panoptic_quality(things={0.5}, stuffs={1})
    m = panoptic_quality(**KW)
    with pytest.raises(ValueError, match=r"\[B, \*spatial, 2\]"):
        m.update(m.init(), torch.zeros(2, 4, 3, dtype=torch.long), torch.zeros(2, 4, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="equal shapes"):
        m.update(m.init(), torch.zeros(2, 4, 2, dtype=torch.long), torch.zeros(1, 4, 2, dtype=torch.long))


def test_no_category_seen_is_nan_and_empty_batches_are_identity():
    m = panoptic_quality(**KW)
    assert torch.isnan(m.finalize(m.init()))
    s = m.update(m.init(), torch.zeros(0, 4, 4, 2, dtype=torch.long), torch.zeros(0, 4, 4, 2, dtype=torch.long))
    assert torch.equal(s.true_positives, m.init().true_positives)
