"""dice_score and hausdorff_distance vs SciPy / torchmetrics on random masks (beyond the law-suite cases)."""
import numpy as np
import pytest
import torch

from fmetrics.segmentation import dice_score, hausdorff_distance, mean_iou
from fmetrics.segmentation.distance import edges
from tests.cases.segmentation import make_blobs, make_masks

_CDIST = {"euclidean": "euclidean", "chessboard": "chebyshev", "taxicab": "cityblock"}


def _scipy_hausdorff(preds, target, num_classes, metric="euclidean", spacing=None, directed=False,
                     include_background=False):
    """Mean over (sample, class) of the Hausdorff distance of edge point sets (SciPy)."""
    from scipy.spatial.distance import cdist, directed_hausdorff

    p = torch.nn.functional.one_hot(preds, num_classes).movedim(-1, 1).bool()
    t = torch.nn.functional.one_hot(target, num_classes).movedim(-1, 1).bool()
    dims = preds.dim() - 1
    sp = np.asarray(spacing if spacing is not None else [1.0] * dims)
    values = []
    for b in range(p.shape[0]):
        for c in range(0 if include_background else 1, num_classes):
            u = torch.nonzero(edges(p[b, c], dims)).numpy() * sp
            v = torch.nonzero(edges(t[b, c], dims)).numpy() * sp
            if len(u) == 0 and len(v) == 0:
                continue
            if len(u) == 0 or len(v) == 0:
                values.append(np.inf)
                continue
            if metric == "euclidean":
                d = directed_hausdorff(u, v)[0]
                if not directed:
                    d = max(d, directed_hausdorff(v, u)[0])
            else:
                m = cdist(u, v, _CDIST[metric])
                d = m.min(1).max() if directed else max(m.min(1).max(), m.min(0).max())
            values.append(d)
    return np.mean(values) if values else np.nan


@pytest.mark.parametrize("metric", ["euclidean", "chessboard", "taxicab"])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_hausdorff_vs_scipy(metric, directed, seed):
    pytest.importorskip("scipy", reason="the oracle is scipy.spatial.distance.directed_hausdorff")
    size = (16, 24, 20)[seed]  # non-square images too (torchmetrics' own engine needs square ones)
    preds, target = make_masks(seed, n=6, num_classes=4, size=size)
    preds = preds[:, :, : size - 3]
    target = target[:, :, : size - 3]
    spacing = [1.0, 1.0] if seed == 0 else [0.7, 1.9]
    got = hausdorff_distance(num_classes=4, input_format="index", distance_metric=metric, spacing=spacing,
                             directed=directed)(preds, target)
    want = _scipy_hausdorff(preds, target, 4, metric, spacing, directed)
    np.testing.assert_allclose(got.item(), want, rtol=1e-12)


def test_hausdorff_3d_vs_scipy():
    pytest.importorskip("scipy")
    g = torch.Generator().manual_seed(0)
    target = (torch.rand(3, 8, 9, 10, generator=g) < 0.4).long() + (torch.rand(3, 8, 9, 10, generator=g) < 0.2)
    preds = torch.roll(target, 1, dims=3)
    got = hausdorff_distance(num_classes=3, input_format="index", spacing=[1.0, 2.0, 0.5])(preds, target)
    np.testing.assert_allclose(got.item(), _scipy_hausdorff(preds, target, 3, spacing=[1.0, 2.0, 0.5]), rtol=1e-12)


def test_hausdorff_empty_sides():
    """One side without edges: inf; neither: the pair is skipped; nothing scored: NaN."""
    m = hausdorff_distance(num_classes=2, input_format="index")
    z = torch.zeros(1, 6, 6, dtype=torch.long)
    one = z.clone()
    one[0, 2:4, 2:4] = 1
    assert torch.isinf(m(one, z)) and torch.isinf(m(z, one))
    assert torch.isnan(m(z, z))
    assert m(one, one).item() == 0.0


@pytest.mark.parametrize("average", ["micro", "macro", "weighted", "none"])
@pytest.mark.parametrize("level", ["samplewise", "global"])
def test_dice_vs_torchmetrics_with_empty_classes(average, level):
    tms = pytest.importorskip("torchmetrics.segmentation", reason="the oracle is torchmetrics' DiceScore")
    preds, target = make_masks(5, n=10, num_classes=5, size=9)
    preds[preds == 4] = 0  # class 4 only in the target; class 3 absent from some samples
    target[:3][target[:3] == 3] = 1
    kw = dict(num_classes=5, average=average, aggregation_level=level, input_format="index")
    m = dice_score(**kw)
    s = m.init()
    for a, b in ((0, 4), (4, 4), (4, 10)):
        s = m.update(s, preds[a:b], target[a:b])
    ref = tms.DiceScore(**kw)
    for a, b in ((0, 4), (4, 10)):
        ref.update(preds[a:b], target[a:b])
    torch.testing.assert_close(m.finalize(s), ref.compute().double(), rtol=1e-6, atol=1e-7, equal_nan=True)
    if level == "global":
        assert all(x.dtype == torch.int64 for x in s)


def test_index_values_out_of_range_raise():
    preds, target = make_masks(0, n=2, num_classes=3)
    target[0, 0, 0] = 7
    for f in (dice_score, mean_iou):
        m = f(num_classes=3, input_format="index")
        with pytest.raises(ValueError, match=r"class indices in \[0, 3\); found 7"):
            m.update(m.init(), preds, target)


def test_blobs_have_finite_hausdorff():
    preds, target = make_blobs(0)
    assert torch.isfinite(hausdorff_distance(num_classes=3, input_format="index")(preds, target))
