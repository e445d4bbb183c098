"""Segmentation overlap: mean IoU and generalized Dice over per-sample, per-class pixel counts."""
from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import merge_fields

__all__ = ["mean_iou", "generalized_dice_score"]


class ScoreState(NamedTuple):
    score: torch.Tensor  # float64 [C]: sum over samples of the per-sample score
    count: torch.Tensor  # int64 [C]: samples that scored


TAGS = ScoreState("sum", "sum")


def _one_hot(name, x, num_classes, input_format, include_background, what):
    if input_format == "index":
        if x.is_floating_point():
            raise validation.fail(name, what, "an integer class-index tensor [N, ...]", x.dtype)
        x = torch.nn.functional.one_hot(x.to(torch.int64).clamp(0, num_classes - 1), num_classes).movedim(-1, 1)
    else:
        if x.dim() < 3 or x.shape[1] != num_classes:
            raise validation.fail(name, what, f"a one-hot tensor [N, {num_classes}, ...]", tuple(x.shape))
    x = x.to(torch.int64)
    return x if include_background else x[:, 1:]


def _sums(name, preds, target, num_classes, include_background, input_format):
    if preds.shape != target.shape:
        raise validation.fail(name, "preds, target", "equal shapes", f"{tuple(preds.shape)} and {tuple(target.shape)}")
    p = _one_hot(name, preds, num_classes, input_format, include_background, "preds")
    t = _one_hot(name, target, num_classes, input_format, include_background, "target")
    if p.dim() < 3:
        raise validation.fail(name, "preds", "at least one spatial dimension", tuple(preds.shape))
    axes = tuple(range(2, p.dim()))
    inter = (p * t).sum(axes)
    return inter, p.sum(axes), t.sum(axes)


def _check_config(name, num_classes, include_background, input_format):
    if not isinstance(num_classes, int) or num_classes < 1 or (num_classes < 2 and not include_background):
        raise validation.fail(name, "num_classes", "a positive int (>= 2 without the background)", repr(num_classes))
    if input_format not in ("one-hot", "index"):
        raise validation.fail(name, "input_format", "'one-hot' or 'index'", repr(input_format))
    return num_classes - (0 if include_background else 1)


@factory
def mean_iou(*, num_classes: int, include_background: bool = True, per_class: bool = False,
             input_format: Literal["one-hot", "index"] = "one-hot") -> Metric:
    """Mean intersection over union of segmentation masks: per sample and class ``|P n T| / |P u T|``.

    As torchmetrics' ``MeanIoU``: a (sample, class) pair scores only when its
    union is non-empty; the value is the mean over scoring pairs (per class
    with ``per_class``, ``-1`` for a class that never scored).

    Args:
      num_classes: number of classes C (required).
      include_background: count class 0 (default ``True``).
      per_class: return the ``[C]`` per-class means instead of one number (default ``False``).
      input_format: ``"one-hot"`` (default: ``[N, C, ...]`` 0/1) or ``"index"`` (``[N, ...]`` class ids).

    Inputs:
      ``update(state, preds, target)``, both in ``input_format``, equal shapes.

    Returns:
      float64 scalar (or ``[C]``).

    Example::

        >>> preds = torch.tensor([[0, 0, 1, 1]])
        >>> target = torch.tensor([[0, 1, 1, 1]])
        >>> mean_iou(num_classes=2, input_format="index")(preds, target)
        tensor(0.5833, dtype=torch.float64)
    """
    name = "mean_iou"
    c = _check_config(name, num_classes, include_background, input_format)

    def init():
        return ScoreState(torch.zeros(c, dtype=torch.float64), torch.zeros(c, dtype=torch.int64))

    def update(s, preds, target):
        inter, ps, ts = _sums(name, preds, target, num_classes, include_background, input_format)
        union = ps + ts - inter
        valid = union > 0
        score = inter.to(torch.float64) / union.clamp(min=1).to(torch.float64)
        return ScoreState(s.score + torch.where(valid, score, 0.0).sum(0), s.count + valid.sum(0))

    def finalize(s):
        if per_class:
            return torch.where(s.count > 0, s.score / s.count.clamp(min=1), -1.0)
        n = s.count.sum()
        return torch.where(n > 0, s.score.sum() / n.clamp(min=1), torch.nan)

    return Metric(init=init, update=update, merge=merge_fields(TAGS), finalize=finalize, name=name,
                  state_key=(name, num_classes, include_background, input_format), reductions=TAGS,
                  higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))


@factory
def generalized_dice_score(*, num_classes: int, include_background: bool = True, per_class: bool = False,
                           weight_type: Literal["square", "simple", "linear"] = "square",
                           input_format: Literal["one-hot", "index"] = "one-hot") -> Metric:
    """Generalized Dice score: per sample ``2 sum_c w_c |P_c n T_c| / sum_c w_c (|P_c| + |T_c|)``, averaged over samples.

    Weights ``w_c`` are ``1 / |T_c|^2`` (``"square"``), ``1 / |T_c|`` (``"simple"``) or 1 (``"linear"``);
    an infinite weight (class absent from the sample's target) becomes the sample's largest finite weight
    (MONAI's rule; torchmetrics' replacement depends on the batch, docs/segmentation.md).

    Args:
      num_classes: number of classes C (required).
      include_background: count class 0 (default ``True``).
      per_class: per-class scores ``[C]`` instead of one number (default ``False``).
      weight_type: ``"square"`` (default), ``"simple"`` or ``"linear"``.
      input_format: ``"one-hot"`` (default) or ``"index"``.

    Inputs:
      ``update(state, preds, target)``, both in ``input_format``, equal shapes.

    Returns:
      float64 scalar (or ``[C]``): the mean over samples (0/0 counts as 0).

    Example::

        >>> preds = torch.tensor([[0, 0, 1, 1]])
        >>> target = torch.tensor([[0, 1, 1, 1]])
        >>> generalized_dice_score(num_classes=2, input_format="index")(preds, target)
        tensor(0.6875, dtype=torch.float64)
    """
    name = "generalized_dice_score"
    c = _check_config(name, num_classes, include_background, input_format)
    if weight_type not in ("square", "simple", "linear"):
        raise validation.fail(name, "weight_type", "'square', 'simple' or 'linear'", repr(weight_type))
    width = c if per_class else 1

    def init():
        return ScoreState(torch.zeros(width, dtype=torch.float64), torch.zeros(width, dtype=torch.int64))

    def update(s, preds, target):
        inter, ps, ts = _sums(name, preds, target, num_classes, include_background, input_format)
        tsf = ts.to(torch.float64)
        w = torch.ones_like(tsf) if weight_type == "linear" else 1.0 / (tsf if weight_type == "simple" else tsf ** 2)
        n = w.shape[0]
        infs = torch.isinf(w)
        w = torch.where(infs, 0.0, w)
        w = torch.where(infs, w.amax(1, keepdim=True), w)  # a class absent from the target: the sample's max weight
        num = 2.0 * inter.to(torch.float64) * w
        den = (ps + ts).to(torch.float64) * w
        if not per_class:
            num, den = num.sum(1, keepdim=True), den.sum(1, keepdim=True)
        score = torch.where(den != 0, num / torch.where(den != 0, den, 1.0), 0.0)
        return ScoreState(s.score + score.sum(0), s.count + n)

    def finalize(s):
        v = s.score / s.count
        return v if per_class else v[0]

    return Metric(init=init, update=update, merge=merge_fields(TAGS), finalize=finalize, name=name,
                  state_key=(name, num_classes, include_background, per_class, weight_type, input_format),
                  reductions=TAGS, higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))
