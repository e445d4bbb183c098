"""Bad input to the segmentation metrics (issue 28): non-finite one-hot values, class indices out of range
(eagerly and deferred) and empty input.

Expected values are hand calculations on one 1x4 image: preds ``[0, 0, 1, 1]``, target ``[0, 1, 1, 1]``.
"""
import math

import pytest
import torch

from fmetrics import validation
from fmetrics.segmentation import dice_score, generalized_dice_score, hausdorff_distance, mean_iou

PREDS, TARGET = torch.tensor([[[0, 0, 1, 1]]]), torch.tensor([[[0, 1, 1, 1]]])
# class 0: |P n T| = 1, |P| = 2, |T| = 1; class 1: |P n T| = 2, |P| = 2, |T| = 3
EXPECTED = [
    (mean_iou, {}, (1 / 2 + 2 / 3) / 2),  # IoU 1/2 and 2/3
    (dice_score, {}, (2 / 3 + 4 / 5) / 2),  # Dice 2*1/3 and 2*2/5, macro
    (dice_score, {"aggregation_level": "global", "average": "micro"}, (2 + 4) / (3 + 5)),
    (generalized_dice_score, {}, 2 * (1 + 2 / 9) / (3 + 5 / 9)),  # w = 1/|T|^2 = 1, 1/9
    # class 1 only (no background); every pixel of a 1-row image is an edge: P {2, 3}, T {1, 2, 3}: max 1
    (hausdorff_distance, {}, 1.0),
]


def _one_hot(x):
    return torch.nn.functional.one_hot(x, 2).movedim(-1, 1).double()


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("factory, kw, want", EXPECTED)
def test_nonfinite_one_hot_rejected_with_the_state_intact(factory, kw, want, bad):
    """Today NaN / inf one-hot entries count as "set" (x != 0) without a word."""
    m = factory(num_classes=2, **kw)
    s = m.update(m.init(), _one_hot(PREDS), _one_hot(TARGET))
    broken = _one_hot(PREDS)
    broken[0, 1, 0, 0] = bad
    with pytest.raises(ValueError, match=rf"{m.name}: argument `preds` expected one-hot values finite .*found "
                                         rf"{bad!r}"):
        m.update(s, broken, _one_hot(TARGET))
    s = m.update(s, _one_hot(PREDS), _one_hot(TARGET))
    assert m.finalize(s).item() == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("factory, kw, want", EXPECTED)
def test_deferred_out_of_range_indices_and_nonfinite_values_raise_in_finalize(factory, kw, want):
    """Today the deferred path (GPU, compile) clamps out-of-range indices into a class and returns a value."""
    m = factory(num_classes=2, input_format="index", **kw)
    with validation.mode("deferred"):
        s = m.update(m.init(), PREDS, TARGET)
        assert m.finalize(s).item() == pytest.approx(want, abs=1e-12)
        s = m.update(s, torch.tensor([[[0, 7, 1, -1]]]), TARGET)
    with pytest.raises(ValueError, match=rf"{m.name}: 2 input entries broke the rule: class indices in \[0, 2\)"):
        m.finalize(s)
    m = factory(num_classes=2, **kw)
    broken = _one_hot(TARGET)
    broken[0, 0, 0, 1] = float("nan")
    with validation.mode("deferred"):
        s = m.update(m.init(), _one_hot(PREDS), broken)
    with pytest.raises(ValueError, match=rf"{m.name}: 1 input entry broke the rule: one-hot values finite"):
        m.finalize(s)


@pytest.mark.parametrize("factory, kw, want", EXPECTED)
def test_empty_input_is_nan_with_a_warning(factory, kw, want):
    """docs/conventions.md, "Empty input": NaN and a UserWarning (today NaN without a warning)."""
    m = factory(num_classes=2, **kw)
    empty = torch.zeros(0, 2, 1, 4)
    for s in (m.init(), m.update(m.init(), empty, empty)):
        with pytest.warns(UserWarning, match=rf"{m.name}: nothing was scored .* set to NaN"):
            assert math.isnan(m.finalize(s).item())
