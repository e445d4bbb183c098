"""Box inputs of the detection metrics: lists read as tensors, the value rules and the device rule.

* `as_boxes` -- a tensor ``[n, 4]``; a list of 4-lists (or a numpy array) is read as a float64 tensor.
* Value rules (docs/detection.md, "Bad input"): boxes finite and not inverted (``x1 <= x2``,
  ``y1 <= y2`` for ``"xyxy"``; width and height ``>= 0`` for ``"xywh"`` / ``"cxcywh"``).
  `check_boxes` raises at once quoting the offenders (eager: CPU tensors, no trace);
  `flag_boxes` counts them into `validation.Invalid` records without a host sync, which
  `report` raises in ``finalize`` (accelerators, ``torch.compile``, ``vmap``).
* `check_device` -- every input tensor on the state's device (lists of dicts included).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

from fmetrics import validation

RULE_FINITE = "boxes must be finite (no NaN or inf)"
RULE_INVERTED = ("boxes must not be inverted (x1 <= x2 and y1 <= y2; width and height >= 0 for 'xywh' / "
                 "'cxcywh'); the value is the negative width or height")
BOX_RULES = (RULE_FINITE, RULE_INVERTED)


def as_boxes(name: str, arg: str, x, device: torch.device) -> torch.Tensor:
    """``x`` as a tensor; a Python list (or numpy array) of ``[4]`` rows becomes float64 on ``device``.

    Example::

        >>> as_boxes("m", "preds[0]['boxes']", [[0, 0, 2, 2]], torch.device("cpu"))
        tensor([[0., 0., 2., 2.]], dtype=torch.float64)
    """
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (list, tuple, np.ndarray)):
        try:
            rows = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise validation.fail(name, arg, "a float tensor [n, 4] or a list of [4] number lists",
                                  f"a list that is not one ({x!r:.60})") from None
        return torch.as_tensor(rows, device=device)
    raise validation.fail(name, arg, "a float tensor [n, 4] or a list of [4] number lists", type(x).__name__)


def extents(boxes: torch.Tensor, fmt: str) -> torch.Tensor:
    """``[n, 2]`` width and height of ``[n, 4]`` boxes in ``fmt`` (negative: an inverted box)."""
    if fmt == "xyxy":
        return boxes[:, 2:] - boxes[:, :2]
    return boxes[:, 2:]


def faulty(boxes: torch.Tensor, fmt: str) -> torch.Tensor:
    """0-d bool: whether some box breaks `BOX_RULES` (the eager path reads it once per batch)."""
    return (~torch.isfinite(boxes)).any() | (extents(boxes, fmt) < 0).any()


def check_boxes(name: str, arg: str, boxes: torch.Tensor, fmt: str) -> None:
    """The eager check of `BOX_RULES` (a host read: CPU tensors, eager mode only)."""
    finite = torch.isfinite(boxes)
    if not bool(finite.all()):
        raise validation.fail(name, arg, "finite boxes (no NaN or inf)", validation.quote(boxes[~finite]))
    bad = (extents(boxes, fmt) < 0).any(1)
    if bool(bad.any()):
        rows = torch.nonzero(bad)[:, 0]
        first = [float(v) for v in boxes[rows[0]].tolist()]
        spec = "x1 <= x2 and y1 <= y2" if fmt == "xyxy" else "width and height >= 0"
        raise validation.fail(name, arg, f"boxes with {spec} (box_format={fmt!r})",
                              f"{rows.numel()} inverted box{'es' if rows.numel() > 1 else ''}, the first "
                              f"{first} at row {int(rows[0])}")


def flag_boxes(invalid: tuple, boxes: torch.Tensor, fmt: str) -> tuple:
    """`BOX_RULES` of float64 ``[n, 4]`` ``boxes`` (one update call) folded into two ``Invalid`` records."""
    wh = extents(boxes, fmt)
    return (validation.invalid_flag(invalid[0], ~torch.isfinite(boxes), boxes),
            validation.invalid_flag(invalid[1], wh < 0, wh))


def invalid_init(rules: tuple) -> tuple:
    return tuple(validation.invalid_init() for _ in rules)


def tick(invalid: tuple) -> tuple:
    """The records after an update call whose entries all passed the eager check (calls + 1)."""
    return tuple(inv._replace(calls=inv.calls + 1) for inv in invalid)


def invalid_merge(a: tuple, b: tuple) -> tuple:
    return tuple(validation.invalid_merge(x, y) for x, y in zip(a, b))


def report(name: str, rules: tuple, invalid: tuple) -> None:
    """``finalize``'s error for the first rule whose record holds offending entries."""
    for rule, inv in zip(rules, invalid):
        validation.invalid_report(name, rule, inv)


def eager(tensors: Iterable[torch.Tensor]) -> bool:
    """Whether the value checks run eagerly now (CPU tensors, no trace; see `validation.mode`)."""
    return validation.eager_check_applies_to(*tensors)


def check_device(name: str, device: torch.device, tensors: Iterable[torch.Tensor]) -> None:
    """Raises naming the metric and both devices when an input tensor is not on the state's ``device``."""
    validation.check_device(name, device, tuple(tensors), {})
