"""Plots of metric values: ``fmetrics.plot(metric, value_or_values) -> (fig, ax)``.

What torchmetrics' ``Metric.plot`` draws, for functional users (and for
`adapters.TorchMetric.plot`):

* a scalar: one point, inside the metric's bounds when it has them;
* a per-class vector (``average=None``): one bar per class;
* a list of values (one per step or epoch): a line over the steps, the best
  step marked when the metric says whether higher is better; a list of
  vectors gives one line per class;
* a dict of values (a `fmetrics.collection`): one bar per key, or one line per
  key for a list of dicts;
* a ROC curve ``(fpr, tpr, thresholds)`` or a precision-recall curve
  ``(precision, recall, thresholds)``: one curve (per class for multiclass /
  multilabel), its area in the legend (``AUC=0.912``);
* a confusion matrix: the counts as an annotated image (multilabel: one
  2x2 matrix per label).

matplotlib is imported when a plot is drawn (``pip install matplotlib``).
The module is callable, so ``fmetrics.plot(metric, value)`` and
``from fmetrics.plot import plot`` are the same function.

Example::

    >>> import matplotlib; matplotlib.use("Agg")
    >>> m = fmetrics.binary_roc()
    >>> preds, target = torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1])
    >>> fig, ax = fmetrics.plot(m, m(preds, target))      # the ROC curve, AUC in the legend
    >>> ax.get_legend().get_texts()[0].get_text()         # AUC = 0.75 by hand: 3 of 4 pairs ordered
    '(AUC=0.750)'
    >>> import io; fig.savefig(io.BytesIO(), format="png")
"""
from __future__ import annotations

import math
import sys
import types
from typing import Any, Mapping, Optional, Sequence

import torch

__all__ = ["plot"]

_KINDS = ("scalar", "classes", "steps", "dict", "roc", "pr", "confusion_matrix")


def plot(metric: Any = None, value: Any = None, *, ax: Any = None, kind: Optional[str] = None,
         title: Optional[str] = None, labels: Optional[Sequence[str]] = None):
    """Draws ``value`` (or a list of values over steps) of ``metric``; returns ``(fig, ax)``.

    Args:
      metric: the `fmetrics.Metric` that produced the value (its name titles the plot, its
        ``bounds`` set the y range, its ``higher_is_better`` marks the best step, and its name
        tells a ROC / PR curve or a confusion matrix apart). ``None`` plots a bare value.
      value: a value of the metric (a tensor, a dict of tensors, a curve tuple) or a list of
        values, one per step. Default: ``metric`` is then taken as the value.
      ax: a matplotlib ``Axes`` to draw into (default: a new figure).
      kind: force one of ``"scalar"``, ``"classes"``, ``"steps"``, ``"dict"``, ``"roc"``,
        ``"pr"``, ``"confusion_matrix"`` (default: from the metric's name and the value).
      title: the title (default: the metric's name).
      labels: names of the classes (bars, curves, matrix ticks).

    Returns:
      ``(fig, ax)``; for a multilabel confusion matrix ``ax`` is an array of axes.
    """
    plt = _pyplot()
    name = getattr(metric, "name", None) or "value"
    if kind is None:
        kind = _kind(name, value)
    elif kind not in _KINDS:
        raise ValueError(f"fmetrics.plot: argument `kind` expected one of {_KINDS}, got {kind!r}")
    bounds = tuple(getattr(metric, "bounds", (None, None)) or (None, None))
    higher = getattr(metric, "higher_is_better", None)
    if kind == "confusion_matrix" and _as_tensor(value).dim() == 3 and ax is None:
        n = _as_tensor(value).shape[0]
        fig, axes = plt.subplots(1, n, figsize=(3 * n, 3), squeeze=False)
        for i, a in enumerate(axes[0]):
            _confusion(a, _as_tensor(value)[i], None, f"{labels[i] if labels else i}")
        fig.suptitle(title or name)
        return fig, axes[0]
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.get_figure()
    if kind == "scalar":
        _scalar(ax, value, bounds)
    elif kind == "classes":
        _classes(ax, _as_tensor(value), bounds, labels)
    elif kind == "steps":
        _steps(ax, value, bounds, higher, labels)
    elif kind == "dict":
        _dict(ax, value, bounds, higher)
    elif kind in ("roc", "pr"):
        _curves(ax, value, kind, labels)
    else:
        _confusion(ax, _as_tensor(value), labels, None)
    ax.set_title(title or name)
    return fig, ax


# ---------------------------------------------------------------- kinds


def _kind(name: str, value: Any) -> str:
    lowered = name.lower()
    if "confusion_matrix" in lowered:
        return "confusion_matrix"
    if "roc" in lowered and "auroc" not in lowered and isinstance(value, (tuple, list)) and len(value) == 3:
        return "roc"
    if "precision_recall_curve" in lowered and isinstance(value, (tuple, list)) and len(value) == 3:
        return "pr"
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, (list, tuple)):
        return "steps"
    t = _as_tensor(value)
    return "scalar" if t.numel() == 1 else "classes"


def _as_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().to(torch.float64) if x.is_floating_point() else x.detach().cpu()
    return torch.as_tensor(x)


def _set_bounds(ax, bounds, axis: str = "y") -> None:
    lo, hi = bounds
    if lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        pad = 0.05 * (hi - lo)
        (ax.set_ylim if axis == "y" else ax.set_xlim)(lo - pad, hi + pad)


def _scalar(ax, value, bounds) -> None:
    v = _as_tensor(value).reshape(-1)[0].item()
    ax.plot([0], [v], "o", markersize=10)
    ax.annotate(f"{v:.4g}", (0, v), textcoords="offset points", xytext=(12, 0), va="center")
    ax.set_xticks([])
    _set_bounds(ax, bounds)
    ax.grid(True, axis="y", alpha=0.3)


def _classes(ax, values: torch.Tensor, bounds, labels) -> None:
    values = values.reshape(-1)
    names = list(labels) if labels is not None else [str(i) for i in range(values.numel())]
    ax.bar(range(values.numel()), values.tolist())
    ax.set_xticks(range(values.numel()), names)
    ax.set_xlabel("class")
    _set_bounds(ax, bounds)
    ax.grid(True, axis="y", alpha=0.3)


def _steps(ax, values, bounds, higher, labels) -> None:
    if values and isinstance(values[0], Mapping):
        keys = list(values[0])
        for k in keys:
            ys = [_as_tensor(v[k]).reshape(-1)[0].item() for v in values]
            ax.plot(range(len(ys)), ys, marker="o", label=k)
        ax.legend()
    else:
        stacked = torch.stack([_as_tensor(v).reshape(-1) for v in values])  # (steps, classes)
        for c in range(stacked.shape[1]):
            label = None if stacked.shape[1] == 1 else (labels[c] if labels is not None else f"class {c}")
            ax.plot(range(stacked.shape[0]), stacked[:, c].tolist(), marker="o", label=label)
        if stacked.shape[1] == 1 and higher is not None and stacked.numel():
            col = stacked[:, 0]
            best = int(torch.nan_to_num(col, nan=-math.inf if higher else math.inf).argmax() if higher
                       else torch.nan_to_num(col, nan=math.inf).argmin())
            ax.plot([best], [col[best].item()], "*", markersize=15, label=f"best: step {best}")
            ax.legend()
        elif stacked.shape[1] > 1:
            ax.legend()
    ax.set_xlabel("step")
    _set_bounds(ax, bounds)
    ax.grid(True, alpha=0.3)


def _dict(ax, value: Mapping, bounds, higher) -> None:
    keys = list(value)
    ys = [_as_tensor(value[k]).reshape(-1)[0].item() for k in keys]
    ax.bar(range(len(keys)), ys)
    ax.set_xticks(range(len(keys)), keys, rotation=30, ha="right")
    for i, y in enumerate(ys):
        ax.annotate(f"{y:.3g}", (i, y), textcoords="offset points", xytext=(0, 3), ha="center")
    ax.grid(True, axis="y", alpha=0.3)


def _per_class(x) -> list[torch.Tensor]:
    if isinstance(x, (list, tuple)):
        return [_as_tensor(v).reshape(-1) for v in x]
    t = _as_tensor(x)
    return [t] if t.dim() <= 1 else [row for row in t]


def area(x: torch.Tensor, y: torch.Tensor) -> float:
    """Trapezoidal area under ``y(x)`` in the order the points come (absolute value: curves may run right to left)."""
    if x.numel() < 2:
        return float("nan")
    x, y = x.to(torch.float64), y.to(torch.float64)
    return abs(float(((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2).sum()))


def _curves(ax, value, kind: str, labels) -> None:
    first, second = value[0], value[1]
    if kind == "roc":
        xs, ys, xlabel, ylabel = _per_class(first), _per_class(second), "false positive rate", "true positive rate"
        ax.plot([0, 1], [0, 1], "--", color="grey", linewidth=1)
    else:  # (precision, recall, thresholds): recall on x
        xs, ys, xlabel, ylabel = _per_class(second), _per_class(first), "recall", "precision"
    for c, (x, y) in enumerate(zip(xs, ys)):
        name = "" if len(xs) == 1 else (f"{labels[c]} " if labels is not None else f"class {c} ")
        ax.plot(x.tolist(), y.tolist(), label=f"{name}(AUC={area(x, y):.3f})", linewidth=1.5)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.legend(loc="lower right" if kind == "roc" else "lower left")
    ax.grid(True, alpha=0.3)


def _confusion(ax, matrix: torch.Tensor, labels, title) -> None:
    matrix = matrix.to(torch.float64) if matrix.is_floating_point() else matrix
    n_rows, n_cols = matrix.shape
    ax.imshow(matrix.to(torch.float64).numpy(), cmap="Blues")
    high = float(matrix.max()) if matrix.numel() else 0.0
    for i in range(n_rows):
        for j in range(n_cols):
            v = matrix[i, j].item()
            text = f"{v:.2f}" if isinstance(v, float) and not float(v).is_integer() else f"{int(v)}"
            ax.text(j, i, text, ha="center", va="center", color="white" if v > high / 2 else "black")
    names = list(labels) if labels is not None else [str(i) for i in range(n_rows)]
    ax.set_xticks(range(n_cols), names[:n_cols])
    ax.set_yticks(range(n_rows), names[:n_rows])
    ax.set_xlabel("predicted")
    ax.set_ylabel("target")
    if title is not None:
        ax.set_title(title)


def _pyplot():
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise ModuleNotFoundError("fmetrics.plot needs matplotlib: pip install matplotlib (in a checkout of this "
                                  "repository: pip install -e '.[plot]')") from None
    import matplotlib.pyplot as plt

    return plt


class _CallableModule(types.ModuleType):
    """``fmetrics.plot(metric, value)`` calls `plot`; the module's other names stay reachable."""

    def __call__(self, *args, **kwargs):
        return plot(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
