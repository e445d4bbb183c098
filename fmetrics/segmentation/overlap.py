"""Segmentation overlap: mean IoU, Dice and generalized Dice over per-sample, per-class pixel counts.

Per (sample, class) pixel counts are int64. Metrics whose torchmetrics semantics average a per-sample score
(mean IoU, generalized Dice, ``dice_score(aggregation_level="samplewise")``) keep float64 sums of those scores
and int64 counts of scoring samples: a mean of per-sample ratios cannot be rebuilt from summed counts.
``dice_score(aggregation_level="global")`` keeps the int64 counts themselves.
"""
from __future__ import annotations

import math
import warnings
from typing import Literal, NamedTuple

import torch

from fmetrics import validation
from fmetrics.metric import Metric
from fmetrics.recipe import factory
from fmetrics.state import merge_fields

__all__ = ["mean_iou", "generalized_dice_score", "dice_score"]


class ScoreState(NamedTuple):
    score: torch.Tensor  # float64 [C]: sum over samples of the per-sample score
    count: torch.Tensor  # int64 [C]: samples that scored
    invalid: torch.Tensor  # int64: input entries that broke the value rule (deferred checks, see `rule`)


TAGS = ScoreState("sum", "sum", "sum")


def _zero() -> torch.Tensor:
    return torch.zeros((), dtype=torch.int64)


def rule(num_classes: int, input_format: str) -> str:
    """The value rule of the inputs: class indices in range, or finite one-hot values."""
    if input_format == "index":
        return f"class indices in [0, {num_classes})"
    return "one-hot values finite (no NaN or inf)"


def count_invalid(preds: torch.Tensor, target: torch.Tensor, num_classes: int, input_format: str):
    """int64 0-d count of entries breaking `rule`, where ``update`` counts them (accelerators, compile, vmap,
    ``validation.mode("deferred")``); ``0`` where the eager check already ran. No host sync."""
    if validation.eager_check_applies_to(preds, target):
        return 0
    if input_format == "index":
        return sum(validation.count((x < 0) | (x >= num_classes)) for x in (preds, target))
    return sum(validation.count(~torch.isfinite(x)) for x in (preds, target) if x.is_floating_point())


def report(name: str, num_classes: int, input_format: str, invalid: torch.Tensor) -> None:
    """``finalize``'s error for entries counted by `count_invalid`."""
    validation.report(name, {rule(num_classes, input_format): invalid})


def warn_empty(name: str, scored) -> bool:
    """Warns (and returns True) when nothing scored: the value is then NaN (docs/conventions.md)."""
    if bool(scored):
        return False
    warnings.warn(f"{name}: nothing was scored (no samples, or no class present in any); the value is undefined "
                  "and set to NaN", UserWarning, stacklevel=3)
    return True


def _index_counts(name, preds, target, num_classes):
    """Per sample and class: ``|P n T|``, ``|P|``, ``|T|`` (int64 ``[N, C]``) of class-index maps, by scatter-add."""
    for arg, x in (("preds", preds), ("target", target)):
        if x.is_floating_point() or x.is_complex():
            raise validation.fail(name, arg, "an integer class-index tensor [N, ...]", x.dtype)
    if preds.dim() < 2:
        raise validation.fail(name, "preds", "[N, ...] with at least one spatial dimension", tuple(preds.shape))
    n = preds.shape[0]
    pix = math.prod(preds.shape[1:])
    p = preds.reshape(n, pix).to(torch.int64).clamp(0, num_classes - 1)
    t = target.reshape(n, pix).to(torch.int64).clamp(0, num_classes - 1)
    c = num_classes
    # torch.bincount is ~3x faster than scatter_add on CPU, but its output size is data-dependent
    # (a host sync on accelerators, a graph break under compile, no vmap rule): eager CPU only
    fast = p.device.type == "cpu" and not validation.traced()

    def count(key, size, weights=None):
        if fast:
            return torch.bincount(key, weights, minlength=size) if weights is None else \
                torch.zeros(size, dtype=torch.int64, device=key.device).index_add_(0, key, weights)
        src = torch.ones((), dtype=torch.int64, device=key.device).expand(key.shape[0]) if weights is None \
            else weights
        return torch.zeros(size, dtype=torch.int64, device=key.device).scatter_add(0, key, src)

    if n * c * c <= max(4 * p.numel(), 1 << 16):  # one pass: per-sample confusion counts [n, target, pred]
        key = (t * c + p + torch.arange(n, device=p.device)[:, None] * (c * c)).reshape(-1)
        cm = count(key, n * c * c).reshape(n, c, c)
        return cm.diagonal(dim1=1, dim2=2), cm.sum(1), cm.sum(2)
    base = torch.arange(n, device=p.device)[:, None] * c
    tk = (base + t).reshape(-1)
    ps = count((base + p).reshape(-1), n * c)
    ts = count(tk, n * c)
    inter = count(tk, n * c, (p == t).reshape(-1).to(torch.int64))
    return tuple(x.reshape(n, num_classes) for x in (inter, ps, ts))


def _onehot_counts(name, preds, target, num_classes):
    if preds.dim() < 3 or preds.shape[1] != num_classes:
        raise validation.fail(name, "preds", f"a one-hot tensor [N, {num_classes}, ...]", tuple(preds.shape))
    axes = tuple(range(2, preds.dim()))
    p, t = preds != 0, target != 0
    return (torch.count_nonzero(p & t, dim=axes), torch.count_nonzero(p, dim=axes), torch.count_nonzero(t, dim=axes))


def _sums(name, preds, target, num_classes, include_background, input_format):
    """``(|P n T|, |P|, |T|)`` per sample and class, int64 ``[N, C]`` (class 0 dropped without the background)."""
    if not isinstance(preds, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise validation.fail(name, "preds, target", "tensors", f"{type(preds).__name__} and {type(target).__name__}")
    if preds.shape != target.shape:
        raise validation.fail(name, "preds, target", "equal shapes", f"{tuple(preds.shape)} and {tuple(target.shape)}")
    preds, target = preds.detach(), target.detach()
    if input_format == "index":
        out = _index_counts(name, preds, target, num_classes)
    else:
        out = _onehot_counts(name, preds, target, num_classes)
    return out if include_background else tuple(x[:, 1:] for x in out)


def value_check(name, num_classes, input_format):
    """The eager value check of `rule`: class indices in ``[0, num_classes)``, or finite one-hot values."""

    def check(preds, target):
        for arg, x in (("preds", preds), ("target", target)):
            if not isinstance(x, torch.Tensor) or x.is_complex():
                continue
            if input_format == "index" and not x.is_floating_point():
                bad = (x < 0) | (x >= num_classes)
            elif input_format != "index" and x.is_floating_point():
                bad = ~torch.isfinite(x)
            else:
                continue
            if bool(bad.any()):
                raise ValueError(f"{name}: argument `{arg}` expected {rule(num_classes, input_format)}; "
                                 f"found {validation.quote(x[bad])}")

    return check


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
        return ScoreState(torch.zeros(c, dtype=torch.float64), torch.zeros(c, dtype=torch.int64), _zero())

    def update(s, preds, target):
        inter, ps, ts = _sums(name, preds, target, num_classes, include_background, input_format)
        bad = count_invalid(preds, target, num_classes, input_format)
        union = ps + ts - inter
        valid = union > 0
        score = inter.to(torch.float64) / union.clamp(min=1).to(torch.float64)
        return ScoreState(s.score + torch.where(valid, score, 0.0).sum(0), s.count + valid.sum(0), s.invalid + bad)

    def finalize(s):
        report(name, num_classes, input_format, s.invalid)
        if per_class:
            return torch.where(s.count > 0, s.score / s.count.clamp(min=1), -1.0)
        n = s.count.sum()
        warn_empty(name, n > 0)
        return torch.where(n > 0, s.score.sum() / n.clamp(min=1), torch.nan)

    return Metric(init=init, update=update, merge=merge_fields(TAGS), finalize=finalize, name=name,
                  state_key=(name, num_classes, include_background, input_format), reductions=TAGS,
                  check=value_check(name, num_classes, input_format),
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
        return ScoreState(torch.zeros(width, dtype=torch.float64), torch.zeros(width, dtype=torch.int64), _zero())

    def update(s, preds, target):
        inter, ps, ts = _sums(name, preds, target, num_classes, include_background, input_format)
        bad = count_invalid(preds, target, num_classes, input_format)
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
        return ScoreState(s.score + score.sum(0), s.count + n, s.invalid + bad)

    def finalize(s):
        report(name, num_classes, input_format, s.invalid)
        warn_empty(name, s.count[0] > 0)
        v = s.score / s.count
        return v if per_class else v[0]

    return Metric(init=init, update=update, merge=merge_fields(TAGS), finalize=finalize, name=name,
                  state_key=(name, num_classes, include_background, per_class, weight_type, input_format),
                  reductions=TAGS, check=value_check(name, num_classes, input_format), higher_is_better=True,
                  is_differentiable=False, bounds=(0.0, 1.0))


class DiceCounts(NamedTuple):
    numerator: torch.Tensor  # int64 [C]: 2 |P n T| summed over samples
    denominator: torch.Tensor  # int64 [C]: |P| + |T|
    support: torch.Tensor  # int64 [C]: |T|
    invalid: torch.Tensor  # int64: input entries that broke the value rule (deferred checks)


def _dice_average(num, den, support, average):
    """torchmetrics' ``_dice_score_compute`` per row (float64): ``[R, C]`` counts -> ``[R]`` or ``[R, C]``."""
    num, den, support = num.to(torch.float64), den.to(torch.float64), support.to(torch.float64)
    if average == "micro":
        n, d = num.sum(-1), den.sum(-1)
        return torch.where(d != 0, n / torch.where(d != 0, d, 1.0), torch.nan)
    dice = torch.where(den != 0, num / torch.where(den != 0, den, 1.0), torch.nan)
    if average == "none":
        return dice
    ok = ~torch.isnan(dice)
    if average == "macro":
        k = ok.sum(-1)
        return torch.where(k > 0, torch.where(ok, dice, 0.0).sum(-1) / k.clamp(min=1), torch.nan)
    total = support.sum(-1, keepdim=True)
    w = torch.where(total != 0, support / torch.where(total != 0, total, 1.0), torch.nan)
    prod = dice * w
    v = torch.where(torch.isnan(prod), 0.0, prod).sum(-1)
    return torch.where(ok.any(-1), v, torch.nan)


@factory
def dice_score(*, num_classes: int, include_background: bool = True,
               average: Literal["micro", "macro", "weighted", "none"] = "macro",
               aggregation_level: Literal["samplewise", "global"] = "samplewise",
               input_format: Literal["one-hot", "index"] = "one-hot") -> Metric:
    """Dice score (F1 of pixels) per class: ``2 |P n T| / (|P| + |T|)``, averaged as torchmetrics' ``DiceScore``.

    ``"samplewise"``: the score of every sample (classes averaged by ``average``; a class with
    ``|P| + |T| = 0`` is ``NaN`` and skipped), then the mean over samples with a score.
    ``"global"``: counts summed over all samples first, then averaged over classes.

    Args:
      num_classes: number of classes C (required).
      include_background: count class 0 (default ``True``).
      average: ``"macro"`` (default: mean over classes), ``"micro"`` (counts summed over classes),
        ``"weighted"`` (classes weighted by their target pixel counts) or ``"none"`` (per class ``[C]``).
      aggregation_level: ``"samplewise"`` (default) or ``"global"``.
      input_format: ``"one-hot"`` (default: ``[N, C, ...]`` 0/1) or ``"index"`` (``[N, ...]`` class ids).

    Inputs:
      ``update(state, preds, target)``, both in ``input_format``, equal shapes.

    Returns:
      float64 scalar (``[C]`` with ``average="none"``); ``NaN`` where nothing scored.

    Example::

        >>> preds = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
        >>> target = torch.tensor([[0, 1, 1, 1], [1, 1, 0, 0]])
        >>> dice_score(num_classes=2, input_format="index")(preds, target)
        tensor(0.5333, dtype=torch.float64)
        >>> dice_score(num_classes=2, input_format="index", average="none", aggregation_level="global")(preds, target)
        tensor([0.4000, 0.7273], dtype=torch.float64)
    """
    name = "dice_score"
    c = _check_config(name, num_classes, include_background, input_format)
    if average not in ("micro", "macro", "weighted", "none"):
        raise validation.fail(name, "average", "'micro', 'macro', 'weighted' or 'none'", repr(average))
    if aggregation_level not in ("samplewise", "global"):
        raise validation.fail(name, "aggregation_level", "'samplewise' or 'global'", repr(aggregation_level))
    check = value_check(name, num_classes, input_format)
    meta = dict(higher_is_better=True, is_differentiable=False, bounds=(0.0, 1.0))

    def counts(preds, target):
        inter, ps, ts = _sums(name, preds, target, num_classes, include_background, input_format)
        return 2 * inter, ps + ts, ts

    if aggregation_level == "global":
        tags = DiceCounts("sum", "sum", "sum", "sum")

        def init_g():
            return DiceCounts(*(torch.zeros(c, dtype=torch.int64) for _ in range(3)), _zero())

        def update_g(s, preds, target):
            num, den, sup = counts(preds, target)
            return DiceCounts(s.numerator + num.sum(0), s.denominator + den.sum(0), s.support + sup.sum(0),
                              s.invalid + count_invalid(preds, target, num_classes, input_format))

        def finalize_g(s):
            report(name, num_classes, input_format, s.invalid)
            warn_empty(name, (s.denominator > 0).any())
            return _dice_average(s.numerator[None], s.denominator[None], s.support[None], average)[0]

        return Metric(init=init_g, update=update_g, merge=merge_fields(tags), finalize=finalize_g, name=name,
                      state_key=(name, num_classes, include_background, input_format, "global"), reductions=tags,
                      check=check, **meta)

    width = c if average == "none" else 1

    def init():
        return ScoreState(torch.zeros(width, dtype=torch.float64), torch.zeros(width, dtype=torch.int64), _zero())

    def update(s, preds, target):
        num, den, sup = counts(preds, target)
        score = _dice_average(num, den, sup, average)
        score = score if average == "none" else score[:, None]
        ok = ~torch.isnan(score)
        return ScoreState(s.score + torch.where(ok, score, 0.0).sum(0), s.count + ok.sum(0),
                          s.invalid + count_invalid(preds, target, num_classes, input_format))

    def finalize(s):
        report(name, num_classes, input_format, s.invalid)
        warn_empty(name, (s.count > 0).any())
        v = torch.where(s.count > 0, s.score / s.count.clamp(min=1), torch.nan)
        return v if average == "none" else v[0]

    return Metric(init=init, update=update, merge=merge_fields(TAGS), finalize=finalize, name=name,
                  state_key=(name, num_classes, include_background, input_format, average), reductions=TAGS,
                  check=check, **meta)
